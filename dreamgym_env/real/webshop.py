"""WebShop's real engine and env; the code lives in :mod:`dreamgym_env.domains.webshop.engine`."""

from __future__ import annotations

from dreamgym_env.domains.webshop.engine import WEBSHOP_INSTALL as WEBSHOP_INSTALL
from dreamgym_env.domains.webshop.engine import WebShopEngine as WebShopEngine
from dreamgym_env.domains.webshop.engine import WebShopRealEnv as WebShopRealEnv
from dreamgym_env.domains.webshop.engine import WebShopTextEngine as WebShopTextEngine

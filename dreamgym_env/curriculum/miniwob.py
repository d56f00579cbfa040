"""MiniWoB++'s curriculum format and validator; the code lives in :mod:`dreamgym_env.domains.miniwob.curriculum`."""

from __future__ import annotations

from dreamgym_env.domains.miniwob.curriculum import MINIWOB_FORMAT as MINIWOB_FORMAT
from dreamgym_env.domains.miniwob.curriculum import MiniWoBVariant as MiniWoBVariant
from dreamgym_env.domains.miniwob.curriculum import validate_miniwob as validate_miniwob

"""The verifiers taskset id of DreamGym: ``--env.taskset.id dreamgym_verifiers``.

verifiers loads an environment by a taskset id that names an importable top-level module exporting
the taskset and the env in ``__all__``; a dotted module name fails. This package is that module for
:mod:`dreamgym_env.integrations.verifiers` (which needs ``verifiers`` installed).
"""

from dreamgym_env.integrations.verifiers import *  # noqa: F403
from dreamgym_env.integrations.verifiers import __all__  # noqa: F401

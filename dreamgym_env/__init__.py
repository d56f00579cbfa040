"""dreamgym_env: Gymnasium environments simulated by an LLM experience model (DreamGym).

Importing the package registers the simulated ids ``DreamGym/WebShop-v0``, ``DreamGym/ALFWorld-v0``,
``DreamGym/WebArena-v0`` and ``DreamGym/TextWorld-v0``, and the real-environment ids
``DreamGym/<Domain>-Real-v0``. It imports no heavy dependency (torch, vLLM, faiss, alfworld...).

Modules log under the ``dreamgym_env`` logger (HTTP retries and fail-overs, unparsable model answers,
buffer evictions, server start and stop); as a library it only adds a ``NullHandler``, so nothing is
printed unless the application configures logging (e.g. ``logging.basicConfig(level=logging.INFO)``).
"""

import logging
import sys

from dreamgym_env import records
from dreamgym_env.config import BackendConfig, EnvConfig
from dreamgym_env.domains import Domain, InitialState, available_domains, get_domain
from dreamgym_env.domains.spec import DomainSpec, load_spec, register_domain
from dreamgym_env.env import DreamGymEnv
from dreamgym_env.episode import EpisodeEnv, EpisodeSnapshot
from dreamgym_env.errors import DreamGymError
from dreamgym_env.experience.backends import Backend, Completion, CompletionRequest, TransitionQuery
from dreamgym_env.experience.backends.recording import RecordingBackend, record, replay
from dreamgym_env.experience.backends.scripted import ScriptedBackend
from dreamgym_env.experience.schema import ExperienceOutput
from dreamgym_env.records import Step, Task, Transition
from dreamgym_env.registration import BUILTIN_IDS, register_envs
from dreamgym_env.retrieval import BatchRetriever, RetrievalQuery, Retriever
from dreamgym_env.simulated import SimulatedWorld
from dreamgym_env.spaces import FreeText
from dreamgym_env.tasks import TaskList, TaskSampler
from dreamgym_env.vector import DreamGymVectorEnv
from dreamgym_env.world import EpisodeStart, EpisodeView, World, WorldStep

__version__ = "0.1.0"

# The records module's former name: code written against ``dreamgym_env.types`` keeps importing, while
# no file in the package shadows the standard library's ``types``.
sys.modules.setdefault(f"{__name__}.types", records)

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "BUILTIN_IDS",
    "Backend",
    "BackendConfig",
    "BatchRetriever",
    "Completion",
    "CompletionRequest",
    "Domain",
    "DomainSpec",
    "DreamGymEnv",
    "DreamGymError",
    "DreamGymVectorEnv",
    "EnvConfig",
    "EpisodeEnv",
    "EpisodeSnapshot",
    "EpisodeStart",
    "EpisodeView",
    "ExperienceOutput",
    "FreeText",
    "InitialState",
    "RecordingBackend",
    "RetrievalQuery",
    "Retriever",
    "ScriptedBackend",
    "SimulatedWorld",
    "Step",
    "Task",
    "TaskList",
    "TaskSampler",
    "Transition",
    "TransitionQuery",
    "World",
    "WorldStep",
    "available_domains",
    "get_domain",
    "load_spec",
    "record",
    "register_domain",
    "register_envs",
    "replay",
]

register_envs()

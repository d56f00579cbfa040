"""How this package runs a vLLM engine, in-process or as a server: its environment and KV-cache blocks.

The in-process backend (:mod:`dreamgym_env.experience.backends.vllm_engine`) and the managed server
(:mod:`dreamgym_env.serving.vllm_server`) must run the engine alike, so a model measured behind one
behaves the same behind the other. The settings live here, with the backend, because an env choosing
that backend needs them and nothing else of serving.
"""

from __future__ import annotations

import os

# Environment the engine gets unless the caller overrides it: no telemetry and no hub traffic (models
# are local paths) and a small KV cache (the CPU build otherwise reserves several GiB).
_DEFAULT_ENV = {
    "HF_HUB_OFFLINE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}

#: Fewer CPUs than this and the engine gets them all. vLLM's ``auto`` binding keeps one core for its
#: frontend, half of a 2-core machine; the engine is compute-bound there, and giving it both cores
#: took the shipped model from 8 to 13 simulated steps/s at 64 envs (docs/scaling.md, "Levers").
SMALL_MACHINE_CPUS = 8

#: KV-cache block size a server gets by default, in tokens. vLLM's prefix cache reuses whole blocks
#: only, and its CPU build defaults to 128: two prompts that share 120 tokens share none. 32 is the
#: smallest block the CPU attention kernels take (GPU ones take it too); it raised the share of prompt
#: tokens served from the cache and the simulated steps/s at 64 envs (docs/scaling.md, "Levers").
PREFIX_BLOCK_SIZE = 32


def small_machine_cpus() -> list[int]:
    """The CPUs this process may use, on a machine with fewer than :data:`SMALL_MACHINE_CPUS`; else none."""
    if not hasattr(os, "sched_getaffinity"):
        return []
    cpus = sorted(os.sched_getaffinity(0))
    return cpus if len(cpus) < SMALL_MACHINE_CPUS else []


def _thread_binding_env() -> dict[str, str]:
    """Bind the CPU engine to every core this process may use on a small machine (:data:`SMALL_MACHINE_CPUS`).

    Empty where the machine is larger or the process environment already chooses a binding.
    """
    cpus = small_machine_cpus()
    if "VLLM_CPU_OMP_THREADS_BIND" in os.environ or not cpus:
        return {}
    return {"VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, cpus)), "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}


def default_engine_env() -> dict[str, str]:
    """The environment this package runs a vLLM engine with, as a server or in-process.

    No telemetry, no hub traffic, a 1 GiB KV cache on the CPU build (it otherwise reserves 4 GiB), and on
    a machine with fewer than :data:`SMALL_MACHINE_CPUS` CPUs the engine bound to all of them.
    """
    return {**_DEFAULT_ENV, **_thread_binding_env()}

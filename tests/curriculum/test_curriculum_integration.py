"""Task generation against the real vLLM server serving the tiny smoke model.

The smoke model is random: its answers follow the requested JSON schema (vLLM enforces it) but their
content is noise. Nothing it writes may enter the pool, and every rejection must say why.
"""

import pytest

from dreamgym_env.config import BackendConfig
from dreamgym_env.curriculum import CurriculumSampler, TaskPool
from dreamgym_env.curriculum.generator import TaskGenerator
from dreamgym_env.curriculum.stats import TaskStats
from dreamgym_env.domains import get_domain

pytestmark = pytest.mark.integration

STAGES = {"backend", "parse", "validator", "duplicate", "drift", "selection"}


@pytest.fixture
def backend(vllm_server):
    from dreamgym_env.experience.backends.openai_http import OpenAIBackend

    return OpenAIBackend(
        BackendConfig(base_url=vllm_server.base_url, model=vllm_server.model, max_tokens=1500, timeout=120.0)
    )


def test_garbage_generations_are_rejected_with_reasons(backend):
    generator = TaskGenerator(backend, candidates=2)
    stats = TaskStats("p", 8, 8, 0.5, 0.5, 0.25, "task")
    rejected = []
    for domain in ("webshop", "alfworld", "webarena"):
        seeds = get_domain(domain).seed_tasks()[:2]
        result = generator.generate([(t, stats) for t in seeds], existing=seeds, seed=0)
        assert result.accepted == [], [t.instruction for t in result.accepted]
        rejected += result.rejected
    assert rejected
    assert all(r.stage in STAGES and r.reason.strip() for r in rejected)
    assert not any(r.stage == "backend" for r in rejected), [r.reason for r in rejected]
    # Structured decoding makes the answers parse; the domain validators are what refuses them.
    assert any(r.stage == "validator" for r in rejected), [f"{r.stage}: {r.reason}" for r in rejected]


def test_sampler_update_through_the_server_keeps_the_pool_clean(backend, tmp_path):
    sampler = CurriculumSampler(
        str(tmp_path / "pool.sqlite"),
        "alfworld",
        backend=backend,
        parents_per_update=2,
        candidates_per_task=1,
    )
    for task in get_domain("alfworld").seed_tasks()[:2]:
        for r in (1.0, 0.0, 1.0, 0.0):
            sampler.record_outcome(task, r, bool(r))
    result = sampler.update(seed=1)
    assert len(result.parents) == 2 and result.accepted == []
    with TaskPool(sampler.pool.path) as reopened:
        assert reopened.count(origin="generated") == 0
        assert sum(reopened.rejection_counts().values()) == len(result.rejected) > 0

import numpy as np
import pytest

from dreamgym_env import DreamGymEnv, DreamGymVectorEnv, ScriptedBackend
from dreamgym_env.curriculum import CurriculumSampler, TaskPool
from dreamgym_env.domains import get_domain
from dreamgym_env.errors import ConfigError, StoreError
from dreamgym_env.records import Task
from dreamgym_env.storage.tables import Executor
from dreamgym_env.tasks import TaskSampler

SEEDS = get_domain("webshop").seed_tasks()
VARIANT = {
    "category": "fashion",
    "attributes": ["waterproof", "insulated"],
    "options": ["black"],
    "price_upper": 120.0,
    "instruction": "i need insulated waterproof snow boots in black, and price lower than 120.00 dollars",
}


def _variant_backend():
    counter = iter(range(10_000))

    def respond(request):
        i = next(counter)
        v = dict(
            VARIANT,
            price_upper=float(100 + i),
            instruction=VARIANT["instruction"]
            .replace("120.00", f"{100 + i}.00")
            .replace("black", f"colour {i}"),
            options=[f"colour {i}"],
        )
        return {"reasoning": "r", "variants": [v]}

    return ScriptedBackend(respond)


def _feed(sampler, rng, episodes, p_of):
    for _ in range(episodes):
        task = sampler.sample(rng)
        r = float(rng.random() < p_of(task))
        sampler.record_outcome(task, r, bool(r))


def test_is_a_task_sampler_and_rejects_bad_settings():
    assert isinstance(CurriculumSampler(TaskPool(), "webshop"), TaskSampler)
    with pytest.raises(ConfigError, match="unknown curriculum setting"):
        CurriculumSampler(TaskPool(), "webshop", lambda_=0.3)
    with pytest.raises(ConfigError, match="invalid curriculum setting"):
        CurriculumSampler(TaskPool(), "webshop", generated_fraction=1.5)
    with pytest.raises(ConfigError, match="not of domain"):
        CurriculumSampler(TaskPool(), "alfworld", seeds=SEEDS)


def test_variance_weighting_favours_mixed_tasks():
    sampler = CurriculumSampler(TaskPool(), "webshop")
    rng = np.random.default_rng(0)
    mixed = {SEEDS[0].task_id, SEEDS[1].task_id}
    _feed(sampler, rng, 400, lambda t: 0.5 if t.task_id in mixed else float(t.task_id.endswith(("3", "5"))))
    draws = [sampler.sample(rng).task_id for _ in range(2000)]
    share = np.mean([d in mixed for d in draws])
    assert share > 0.6  # uniform would give 2/12
    assert {t.task_id for t, _ in sampler.parents()} <= mixed


def test_generated_share_never_exceeds_lambda():
    sampler = CurriculumSampler(TaskPool(), "webshop", backend=_variant_backend(), generated_fraction=0.25)
    rng = np.random.default_rng(1)
    _feed(sampler, rng, 200, lambda t: 0.5)
    result = sampler.update(seed=0)
    assert result.accepted and sampler.pool.count(origin="generated") == len(result.accepted)
    before_total, before_gen = sampler.sampled_total, sampler.sampled_generated
    draws = [sampler.sample(rng) for _ in range(1000)]
    gen = sum(t.source == "generated" for t in draws)
    assert 0 < gen <= 0.25 * 1000 + 1
    assert sampler.sampled_generated - before_gen == gen and sampler.sampled_total - before_total == 1000
    assert sampler.generated_share <= 0.25


def test_lambda_zero_and_no_backend():
    sampler = CurriculumSampler(TaskPool(), "webshop", generated_fraction=0.0)
    rng = np.random.default_rng(2)
    _feed(sampler, rng, 100, lambda t: 0.5)
    assert sampler.update().accepted == []  # no backend: reweighting only
    sampler.pool.add_tasks(
        [
            Task(
                task_id="g",
                domain="webshop",
                instruction="a generated task here",
                source="generated",
                parent_id=SEEDS[0].task_id,
            )
        ],
        origin="generated",
    )
    sampler.refresh()
    assert all(sampler.sample(rng).task_id != "g" for _ in range(200))


def test_max_generated_caps_growth():
    sampler = CurriculumSampler(TaskPool(), "webshop", backend=_variant_backend(), max_generated=1)
    _feed(sampler, np.random.default_rng(3), 200, lambda t: 0.5)
    assert len(sampler.update().accepted) == 1
    assert sampler.update().accepted == []
    assert sampler.pool.count(origin="generated") == 1


def test_pool_and_statistics_survive_a_restart(tmp_path):
    path = str(tmp_path / "pool.sqlite")
    first = CurriculumSampler(path, "webshop", backend=_variant_backend())
    _feed(first, np.random.default_rng(4), 150, lambda t: 0.5 if t.task_id == SEEDS[2].task_id else 1.0)
    accepted = first.update(seed=0).accepted
    stats, parents = first.stats(), first.parents()
    first.pool.close()

    second = CurriculumSampler(path, "webshop")  # seeds are not duplicated, generated tasks come back
    assert second.pool.count(origin="seed") == len(SEEDS)
    assert {e.task_id for e in second.pool.tasks(origin="generated")} == {t.task_id for t in accepted}
    restored = second.stats()
    for task_id, s in stats.items():
        assert restored[task_id].variance == pytest.approx(s.variance)
    assert [t.task_id for t, _ in second.parents()] == [t.task_id for t, _ in parents]
    assert second.get(accepted[0].task_id) == accepted[0]


def test_env_records_outcomes_and_pins_pool_tasks_by_id():
    sampler = CurriculumSampler(TaskPool(), "webshop")
    env = DreamGymEnv("webshop", tasks=sampler, backend=ScriptedBackend())
    for seed in range(6):
        env.reset(seed=seed)
        *_, terminated, _, info = env.step("click[Buy Now]")
        assert terminated
    assert sampler.pool.episode_count() == 6
    _, info = env.reset(seed=0, options={"task": SEEDS[3].task_id})
    assert info["task_id"] == SEEDS[3].task_id
    env.step("click[Buy Now]")
    assert [o.task_id for o in sampler.pool.outcomes()][-1] == SEEDS[3].task_id
    # A task from outside the pool is recorded as external and never sampled.
    env.reset(seed=1, options={"task": "buy a blue umbrella, and price lower than 20.00 dollars"})
    env.step("click[Buy Now]")
    assert sampler.pool.count(origin="external") == 1
    assert all(sampler.sample(np.random.default_rng(i)).source != "user" for i in range(50))


def test_vector_env_groups_share_one_sampled_task():
    sampler = CurriculumSampler(TaskPool(), "webshop")
    envs = DreamGymVectorEnv("webshop", num_envs=8, group_size=4, tasks=sampler, backend=ScriptedBackend())
    _, infos = envs.reset(seed=0)
    assert sampler.sampled_total == 2
    ids = list(infos["task_id"])
    assert len(set(ids[:4])) == 1 and len(set(ids[4:])) == 1
    envs.step(["click[Buy Now]"] * 8)
    history = sampler.pool.recent_outcomes(8)
    assert sum(len(v) for v in history.values()) == 8
    assert all(len(history[t]) >= 4 for t in set(ids))


@pytest.mark.parametrize("failing", [0, 3, 7])
def test_a_failed_outcome_write_moves_every_sub_env_and_loses_no_outcome(failing, monkeypatch, caplog):
    """The pool write of a vector step's 8 outcomes fails at sub-env ``failing``'s row.

    Every sub-env has moved all the same (the step returns), the pool holds none of the 8 (one
    transaction), and the next step sends all 8, once.
    """
    sampler = CurriculumSampler(TaskPool(), "webshop")
    envs = DreamGymVectorEnv("webshop", num_envs=8, tasks=sampler, backend=ScriptedBackend())
    envs.reset(seed=0)
    inserts = iter(range(1_000))
    real_rows = Executor.rows

    def failing_at_row(tx, sql, params=()):
        if sql.startswith("INSERT INTO curriculum_outcomes") and next(inserts) == failing:
            raise StoreError("disk I/O error")
        return real_rows(tx, sql, params)

    monkeypatch.setattr(Executor, "rows", failing_at_row)
    with caplog.at_level("WARNING", logger="dreamgym_env.tasks"):
        _, _, terminated, _, _ = envs.step(["click[Buy Now]"] * 8)
    assert terminated.all()
    assert sampler.pool.recent_outcomes(8) == {}
    assert "Could not record 8 episode outcome(s)" in caplog.text and len(envs.outcome_reporter.pending) == 8

    envs.step(["search[boots]"] * 8)  # the ended sub-envs reset; the queued outcomes go now
    assert sum(len(v) for v in sampler.pool.recent_outcomes(8).values()) == 8
    assert envs.outcome_reporter.pending == []
    envs.close()
    assert sum(len(v) for v in sampler.pool.recent_outcomes(8).values()) == 8


def test_a_single_env_step_returns_though_the_outcome_write_fails(monkeypatch):
    sampler = CurriculumSampler(TaskPool(), "webshop")
    env = DreamGymEnv("webshop", tasks=sampler, backend=ScriptedBackend())
    env.reset(seed=0)
    monkeypatch.setattr(
        sampler.pool, "record_outcomes", lambda rows: (_ for _ in ()).throw(StoreError("down"))
    )
    _, _, terminated, _, _ = env.step("click[Buy Now]")
    assert terminated and len(env.outcome_reporter.pending) == 1
    monkeypatch.undo()
    env.reset(seed=1)
    env.step("click[Buy Now]")
    assert sum(len(v) for v in sampler.pool.recent_outcomes(8).values()) == 2


def test_a_sampler_without_a_batch_write_hears_each_outcome_once_even_after_a_failure():
    """The one-at-a-time path: a failure part-way keeps only the outcomes not yet taken."""
    from dreamgym_env.tasks import OutcomeReporter

    class Flaky:
        def __init__(self):
            self.heard, self.calls = [], 0

        def sample(self, rng):
            return SEEDS[0]

        def record_outcome(self, task, reward, success):
            self.calls += 1
            if self.calls == 2:
                raise StoreError("down for a moment")
            self.heard.append((task.task_id, reward, success))

    sampler = Flaky()
    reporter = OutcomeReporter(sampler)
    for i, task in enumerate(SEEDS[:3]):
        reporter.add(task, float(i), bool(i))
    assert reporter.flush() is False and len(reporter.pending) == 2
    assert reporter.flush() is True and reporter.pending == []
    assert sampler.heard == [(t.task_id, float(i), bool(i)) for i, t in enumerate(SEEDS[:3])]

"""Snapshots, forks and group resets of simulated envs: one episode, continued or started alike many times."""

from __future__ import annotations

import dataclasses
import json
import pickle
from collections import Counter

import gymnasium as gym
import numpy as np
import pytest

from dreamgym_env import DreamGymEnv, DreamGymVectorEnv, EpisodeSnapshot, ScriptedBackend, TaskList
from dreamgym_env.errors import ConfigError, DreamGymError, SnapshotError, UnsupportedError
from dreamgym_env.records import Task, Transition
from tests._toy import ToyDomain
from tests.real.test_real_webshop import FakeWebShop


def make(**kwargs: object) -> DreamGymEnv:
    kwargs.setdefault("backend", ScriptedBackend())
    return DreamGymEnv(ToyDomain(), **kwargs)  # type: ignore[arg-type]


def played(actions: tuple[str, ...] = ("go[2]", "bad action"), **kwargs: object) -> DreamGymEnv:
    """An env whose episode took ``actions`` from ``reset(seed=7)``."""
    env = make(**kwargs)
    env.reset(seed=7)
    for action in actions:
        env.step(action)
    return env


class ListRetriever:
    """Keeps every transition; returns the latest first, never the asking episode's own."""

    def __init__(self) -> None:
        self.items: list[Transition] = []

    def retrieve(self, state, action, k, *, domain=None, exclude_episode=None):  # type: ignore[no-untyped-def]
        return [t for t in reversed(self.items) if t.episode_id != exclude_episode][:k]

    def add(self, transition: Transition) -> None:
        self.items.append(transition)


class RecordingSampler(TaskList):
    def __init__(self) -> None:
        super().__init__(ToyDomain().seed_tasks())
        self.outcomes: list[object] = []

    def record_outcomes(self, outcomes: list[object]) -> None:
        self.outcomes += outcomes


# ---------------------------------------------------------------------- snapshot and restore
def test_a_snapshot_is_an_immutable_picklable_value_of_the_episode() -> None:
    env = played()
    snapshot = env.snapshot()
    assert pickle.loads(pickle.dumps(snapshot)) == snapshot
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.step = 0  # type: ignore[misc]
    assert (snapshot.domain, snapshot.step, snapshot.ended) == ("toy", 2, False)
    assert snapshot.episode_id == env.episode_id and snapshot.ancestors == ()
    assert [s.action for s in snapshot.history] == ["go[2]"]  # the rejected action moved nothing
    assert snapshot.observation.startswith("[Invalid action]") and snapshot.state == env.state
    env.step("go[1]")
    assert snapshot.step == 2 and len(snapshot.history) == 1  # later steps leave it as it was


def test_restore_continues_the_episode_under_a_new_id_naming_its_parent() -> None:
    original = played()
    snapshot = pickle.loads(pickle.dumps(original.snapshot()))
    fork = make()
    obs, info = fork.restore(snapshot)
    assert obs == snapshot.observation
    assert (fork.task, fork.history, fork.state) == (original.task, original.history, original.state)
    assert info["step"] == 2 and info["admissible_actions"] == list(snapshot.admissible_actions)
    assert info["episode_id"] != original.episode_id and info["forked_from"] == original.episode_id
    assert fork.forked_from == original.episode_id and fork.episode_id == info["episode_id"]
    _, _, _, _, step_info = fork.step("go[3]")
    assert step_info["step"] == 3 and step_info["forked_from"] == original.episode_id
    assert (
        fork.last_transition is not None
        and fork.last_transition.metadata["forked_from"] == original.episode_id
    )
    assert "forked_from" not in original.step("go[3]")[4]  # the parent is no fork


def test_a_restored_env_sends_the_request_the_original_would_have() -> None:
    original_backend, fork_backend = ScriptedBackend(), ScriptedBackend()
    original = played(backend=original_backend)
    snapshot = original.snapshot()
    original.step("go[3]")
    fork = make(backend=fork_backend)
    fork.restore(snapshot)
    fork.step("go[3]")
    sent, replayed = original_backend.requests[-1], fork_backend.requests[-1]
    assert replayed.messages == sent.messages and replayed.seed == sent.seed
    original.restore(snapshot)  # the same env, back at the snapshot after playing on
    original.step("go[3]")
    assert original_backend.requests[-1].messages == sent.messages
    assert original_backend.requests[-1].seed == sent.seed


def test_a_seeded_restore_has_its_own_rng_and_repeats_its_id() -> None:
    snapshot = played().snapshot()
    ids = [make().restore(snapshot, seed=seed)[1]["episode_id"] for seed in (1, 1, 2)]
    assert ids[0] == ids[1] != ids[2]
    backend = ScriptedBackend()
    envs = [make(backend=backend) for _ in range(2)]
    for env, seed in zip(envs, (1, 2), strict=True):
        env.restore(snapshot, seed=seed)
        env.step("go[1]")
    assert backend.requests[-1].seed != backend.requests[-2].seed


def test_forks_of_one_snapshot_get_distinct_ids() -> None:
    snapshot = played().snapshot()
    env = make()
    ids = {env.restore(snapshot)[1]["episode_id"] for _ in range(5)}  # the same env, again and again
    ids |= {make().restore(snapshot)[1]["episode_id"] for _ in range(5)}
    assert len(ids) == 10 and snapshot.episode_id not in ids
    grandchild = make()
    _, info = grandchild.restore(env.snapshot())
    assert info["forked_from"] == env.episode_id and grandchild.snapshot().ancestors == (
        snapshot.episode_id,
        env.episode_id,
    )


def test_outcomes_of_forks_name_their_parent() -> None:
    sampler = RecordingSampler()
    env = make(tasks=sampler)
    env.reset(seed=0)
    env.step("go[1]")
    snapshot = env.snapshot()
    env.step("stop")
    env.restore(snapshot)
    fork_id = env.episode_id
    env.step("stop")
    whole, forked = sampler.outcomes
    assert (whole.episode_id, whole.forked_from) == (snapshot.episode_id, None)  # type: ignore[attr-defined]
    assert (forked.episode_id, forked.forked_from) == (fork_id, snapshot.episode_id)  # type: ignore[attr-defined]


def test_restoring_mid_episode_reports_the_abandoned_episode_as_truncated() -> None:
    sampler = RecordingSampler()
    env = make(tasks=sampler)
    env.reset(seed=0)
    env.step("go[1]")
    snapshot = env.snapshot()
    env.restore(snapshot)
    assert [(o.reward, o.success, o.episode_id) for o in sampler.outcomes] == [  # type: ignore[attr-defined]
        (0.0, False, snapshot.episode_id)
    ]


def test_a_fork_is_not_shown_its_ancestors_transitions_as_demonstrations() -> None:
    retriever, backend = ListRetriever(), ScriptedBackend()
    other = make(retriever=retriever, top_k=2, backend=backend)
    other.reset(seed=1)
    other.step("go[3]")  # another episode's transition: a demonstration for everyone
    original = make(retriever=retriever, top_k=2, backend=backend)
    original.reset(seed=7)
    original.step("go[2]")
    snapshot = original.snapshot()
    original.step("go[1]")
    sent = backend.requests[-1].messages
    fork = make(retriever=retriever, top_k=2, backend=backend)
    fork.restore(snapshot)
    fork.step("go[1]")
    assert backend.requests[-1].messages == sent
    assert "# Similar" in sent[1]["content"]  # the other episode's transition, the demonstration of both


def test_the_gymnasium_wrappers_see_a_restore_through_reset() -> None:
    env = gym.make("DreamGym/TextWorld-v0", backend="scripted")
    _, info = env.reset(seed=0)
    env.step(info["admissible_actions"][0])
    snapshot = env.unwrapped.snapshot()  # type: ignore[attr-defined]
    fresh = gym.make("DreamGym/TextWorld-v0", backend="scripted")
    obs, info = fresh.reset(options={"snapshot": snapshot})  # OrderEnforcing and TimeLimit see a reset
    assert obs == snapshot.observation and info["forked_from"] == snapshot.episode_id
    assert fresh.step(info["admissible_actions"][0])[4]["step"] == 2


def test_a_group_start_is_a_new_episode_at_the_first_state() -> None:
    leader = make()
    _, first = leader.reset(seed=3)
    member = make()
    obs, info = member.reset(seed=4, options={"group_start": leader.snapshot()})
    assert obs == leader.state and info["task_id"] == first["task_id"] and info["step"] == 0
    assert info["group_id"] == first["episode_id"] != info["episode_id"] and "forked_from" not in info
    leader.step("go[1]")
    with pytest.raises(SnapshotError, match="step 0.*options\\['snapshot'\\]"):
        member.reset(options={"group_start": leader.snapshot()})


# ---------------------------------------------------------------------- vector env: groups and forks
def test_group_resets_share_task_and_first_state_with_own_ids_and_rngs() -> None:
    backend = ScriptedBackend()
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=6, group_size=3, backend=backend)
    firsts = set()
    for seed in range(6):
        obs, infos = envs.reset(seed=seed)
        for group in (range(0, 3), range(3, 6)):
            assert len({obs[i] for i in group}) == 1
            assert len({infos["task_id"][i] for i in group}) == 1
            assert len({infos["group_id"][i] for i in group}) == 1
        assert len(set(infos["episode_id"])) == 6 and infos["group_id"][0] != infos["group_id"][3]
        firsts.add(obs[0])
    assert len(firsts) > 1  # the first state is drawn, not fixed: sharing it is the group's doing
    envs.step(["go[1]"] * 6)
    seeds = [r.seed for r in backend.requests[-6:]]
    assert len(set(seeds)) == 6  # each member samples the world with its own RNG


def test_a_reset_may_ask_for_another_group_size() -> None:
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=4, backend=ScriptedBackend())
    obs, infos = envs.reset(seed=5, options={"group_size": 2, "task": "toy-2"})
    assert obs[0] == obs[1] and obs[2] == obs[3] and set(infos["task_id"]) == {"toy-2"}
    _, infos = envs.reset(seed=5)
    assert "group_id" not in infos  # the constructor's size, 1: plain resets


def test_vector_fork_puts_sub_envs_at_one_snapshot() -> None:
    backend = ScriptedBackend()
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=4, backend=backend)
    envs.reset(seed=0)
    envs.step(["go[2]"] * 4)
    snapshot = envs.snapshot(0)
    obs, infos = envs.fork(snapshot, [1, 2])
    assert obs[1] == obs[2] == obs[0] and obs[3] == envs.envs[3].state
    assert list(infos["_episode_id"]) == [False, True, True, False]
    assert infos["forked_from"][1] == infos["forked_from"][2] == snapshot.episode_id
    assert len({infos["episode_id"][1], infos["episode_id"][2], snapshot.episode_id}) == 3
    _, _, _, _, infos = envs.step(["go[3]"] * 4)
    assert list(infos["step"]) == [2, 2, 2, 2]
    sent = Counter((json.dumps(r.messages), r.seed) for r in backend.requests[-4:])
    assert sorted(sent.values()) == [1, 3]  # sub-env 0 and its two forks: one request, thrice


def test_vector_fork_with_a_seed_gives_each_fork_its_own_rng() -> None:
    def forks_sampling_seeds() -> list[int | None]:
        backend = ScriptedBackend()
        envs = DreamGymVectorEnv(ToyDomain(), num_envs=3, backend=backend)
        envs.reset(seed=0)
        envs.fork(envs.snapshot(0), seed=10)
        envs.step(["go[1]"] * 3)
        return sorted(r.seed for r in backend.requests[-3:])  # type: ignore[type-var]

    seeds = forks_sampling_seeds()
    assert len(set(seeds)) == 3 and forks_sampling_seeds() == seeds


# ---------------------------------------------------------------------- bad input
def test_bad_snapshots_are_refused_naming_what_is_accepted() -> None:
    snapshot = played().snapshot()
    textworld = DreamGymEnv("textworld", backend="scripted")
    with pytest.raises(SnapshotError, match="'toy' episode.*'textworld'"):
        textworld.reset(options={"snapshot": snapshot})
    env = make()
    with pytest.raises(SnapshotError, match="EpisodeSnapshot.*got dict"):
        env.reset(options={"snapshot": {"step": 1}})
    with pytest.raises(SnapshotError, match="no other option.*'task'"):
        env.reset(options={"snapshot": snapshot, "task": "toy-1"})
    with pytest.raises(SnapshotError, match="max_state_chars"):
        make(max_state_chars=16).restore(snapshot)
    with pytest.raises(SnapshotError, match="rng_state"):
        env.restore(dataclasses.replace(snapshot, rng_state="{}"))
    with pytest.raises(DreamGymError, match="reset\\(\\) before snapshot"):
        make().snapshot()
    assert env.task is None  # nothing refused touched the env


def test_a_refused_restore_leaves_the_episode_running() -> None:
    sampler = RecordingSampler()
    env = make(tasks=sampler)
    env.reset(seed=0)
    env.step("go[1]")
    with pytest.raises(SnapshotError):
        env.restore("not a snapshot")  # type: ignore[arg-type]
    assert sampler.outcomes == [] and env.step("go[2]")[4]["step"] == 2


def test_a_real_env_cannot_snapshot() -> None:
    from dreamgym_env.domains.webshop.engine import WebShopRealEnv

    real = WebShopRealEnv(FakeWebShop())
    real.reset(seed=0)
    with pytest.raises(UnsupportedError, match="simulated envs, DreamGym/<Domain>-v0") as caught:
        real.snapshot()
    assert isinstance(caught.value, NotImplementedError)
    with pytest.raises(UnsupportedError):
        real.reset(options={"snapshot": played().snapshot()})


def test_bad_group_and_fork_requests_are_refused() -> None:
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=6, backend=ScriptedBackend())
    with pytest.raises(ConfigError, match=r"divides num_envs \(6\): one of \[1, 2, 3, 6\]; got 4"):
        envs.reset(options={"group_size": 4})
    with pytest.raises(ConfigError, match="reset_mask"):
        envs.reset(options={"group_size": 2, "reset_mask": np.ones(6, dtype=bool)})
    envs.reset(seed=0)
    snapshot = envs.snapshot(0)
    with pytest.raises(ConfigError, match=r"range\(6\), got 6"):
        envs.fork(snapshot, [6])
    with pytest.raises(ConfigError, match="twice"):
        envs.fork(snapshot, [1, 1])
    with pytest.raises(ConfigError, match="empty"):
        envs.fork(snapshot, [])
    with pytest.raises(ConfigError, match="indices"):
        envs.fork(snapshot, 3)  # type: ignore[arg-type]
    envs.step(["stop"] + ["go[1]"] * 5)
    with pytest.raises(SnapshotError, match="ended"):
        envs.fork(envs.snapshot(0), [1])


def test_a_snapshot_holds_the_task_and_the_rng() -> None:
    env = played()
    snapshot = env.snapshot()
    assert isinstance(snapshot, EpisodeSnapshot) and isinstance(snapshot.task, Task)
    expected = env.np_random.random()
    fork = make()
    fork.restore(snapshot)
    assert fork.np_random.random() == expected

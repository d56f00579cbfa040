import asyncio

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from dreamgym_env import DreamGymEnv, DreamGymVectorEnv, ScriptedBackend
from dreamgym_env.errors import ConfigError, ServerUnreachableError, StoreError
from tests._backends import PeakBackend
from tests._toy import ToyDomain

ACTIONS = ["go[1]", "go[2]", "stop", "go[3]", "bad action", "stop", "go[1]", "go[2]"]


def _rollout(envs, steps=8):
    trace = [envs.reset(seed=11)[0]]
    for t in range(steps):
        actions = [ACTIONS[(t + i) % len(ACTIONS)] for i in range(envs.num_envs)]
        obs, rewards, terms, truncs, infos = envs.step(actions)
        trace.append((obs, rewards.tolist(), terms.tolist(), truncs.tolist(), list(infos["step"])))
    return trace


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_matches_sync_vector_env_including_autoreset(mode):
    native = DreamGymVectorEnv(ToyDomain(), num_envs=4, backend=ScriptedBackend(), autoreset_mode=mode)
    sync = SyncVectorEnv(
        [lambda: DreamGymEnv(ToyDomain(), backend=ScriptedBackend()) for _ in range(4)], autoreset_mode=mode
    )
    assert _rollout(native) == _rollout(sync)


def test_next_step_autoreset_ignores_action_after_episode_end():
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=2, backend=ScriptedBackend())
    envs.reset(seed=0)
    _, _, terms, _, _ = envs.step(["stop", "go[1]"])
    assert terms.tolist() == [True, False]
    obs, rewards, terms, truncs, infos = envs.step(["go[1]", "go[1]"])
    assert infos["step"][0] == 0 and obs[0].startswith("Room")  # reset, action ignored
    assert rewards[0] == 0 and not terms[0] and not truncs[0]
    assert infos["step"][1] == 2


def test_same_step_autoreset_reports_final_obs():
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=2, backend=ScriptedBackend(), autoreset_mode="SameStep")
    envs.reset(seed=0)
    obs, _, terms, _, infos = envs.step(["stop", "go[1]"])
    assert terms[0] and infos["_final_obs"][0]
    assert "You did: stop" in infos["final_obs"][0]
    assert obs[0].startswith("Room")


def test_requests_are_concurrent():
    backend = PeakBackend(expected=16)
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=16, backend=backend)
    envs.reset(seed=0)
    envs.step(["go[1]"] * 16)
    assert backend.peak == 16 and backend.requests_received == 16  # serial sending peaks at 1


def test_groups_share_a_task():
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=6, group_size=3, backend=ScriptedBackend())
    _, infos = envs.reset(seed=4)
    ids = list(infos["task_id"])
    assert ids[0] == ids[1] == ids[2] and ids[3] == ids[4] == ids[5]
    assert len(set(infos["episode_id"])) == 6


def test_spaces_and_validation():
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=3, backend=ScriptedBackend())
    assert envs.observation_space.contains(envs.reset(seed=0)[0])
    with pytest.raises(ConfigError, match="actions"):
        envs.step(["stop"])
    with pytest.raises(ConfigError, match="multiple"):
        DreamGymVectorEnv(ToyDomain(), num_envs=3, group_size=2, backend=ScriptedBackend())
    assert isinstance(envs.step(["stop"] * 3)[1], np.ndarray)


@pytest.mark.parametrize(
    ("keyword", "value"),
    [
        ("num_envs", True),  # measured before the fix: TypeError from gymnasium's batch_space
        ("num_envs", "2"),  # before: TypeError ('<' between str and int)
        ("num_envs", None),
        ("num_envs", 2.0),
        ("num_envs", 1.5),
        ("group_size", True),
        ("group_size", "1"),
    ],
)
def test_a_wrongly_typed_count_is_a_config_error(keyword, value):
    import gymnasium as gym

    import dreamgym_env  # noqa: F401 - registers the ids

    kwargs = {"num_envs": 2, keyword: value}
    with pytest.raises(ConfigError, match=rf"{keyword} must be a positive int, got {value!r}"):
        gym.make_vec("DreamGym/WebShop-v0", backend="scripted", **kwargs)


class Recording(ScriptedBackend):
    """The scripted model, keeping every request's prompt. Its latency lets every sub-env send its request
    before any answer comes back, as with a real server, so no sub-env sees another's write of this step."""

    def __init__(self):
        super().__init__(latency_s=0.1)
        self.prompts = []

    async def acomplete(self, request):
        self.prompts.append(request.messages[-1]["content"])
        return await super().acomplete(request)


class OneAtATime:
    """A Retriever over a buffer without ``retrieve_many``: sub-envs query one by one.

    Its writes go through ``add_many``, which a vector env needs to store a step all or nothing.
    """

    def __init__(self, buffer):
        self.buffer = buffer

    def retrieve(self, *args, **kwargs):
        return self.buffer.retrieve(*args, **kwargs)

    def add(self, transition):
        self.buffer.add(transition)

    def add_many(self, transitions, *, apply_policy=False):
        return self.buffer.add_many(transitions, apply_policy=apply_policy)


class ListRetriever:
    """A plain Retriever (``retrieve`` and ``add`` only) whose ``add`` fails once, at call ``fail_at``."""

    def __init__(self, fail_at=None):
        self.items, self.calls, self.fail_at = [], 0, fail_at

    def retrieve(self, state, action, k, *, domain=None, exclude_episode=None):
        return [t for t in self.items if t.episode_id != exclude_episode][:k]

    def add(self, transition):
        self.calls += 1
        if self.calls == self.fail_at:
            raise StoreError("the list is full")
        self.items.append(transition)


def test_a_vector_env_refuses_a_retriever_that_cannot_store_a_step_at_once():
    """Measured before the fix: with add failing at the 3rd of 4 sub-envs, 2 rows stayed written and the
    retried step stored them again (6 rows for 4 steps)."""
    with pytest.raises(ConfigError, match=r"ListRetriever has no add_many.*store_transitions='none'"):
        DreamGymVectorEnv(ToyDomain(), num_envs=4, backend=ScriptedBackend(), retriever=ListRetriever(3))
    # Only retrieving from it needs no transaction.
    retriever = ListRetriever()
    retriever.items = [t for t in _seeded_buffer().iter_transitions()]
    envs = DreamGymVectorEnv(
        ToyDomain(), num_envs=4, backend=Recording(), retriever=retriever, store_transitions="none", top_k=2
    )
    envs.reset(seed=0)
    envs.step(["go[1]"] * 4)
    assert retriever.calls == 0 and any("Similar real transitions" in p for p in envs.backend.prompts)


def _seeded_buffer():
    from dreamgym_env.buffer import ReplayBuffer
    from dreamgym_env.records import Transition

    buffer = ReplayBuffer()
    buffer.add_many(
        Transition(
            domain="toy",
            task_id="t",
            task="walk",
            episode_id=f"seed{i // 3}",
            step=i % 3,
            state=f"Room {i % 4}. Exits: 1 2 3",
            action=f"go[{i % 3 + 1}]",
            next_state=f"Room {(i + 1) % 4}.",
            source="offline",
        )
        for i in range(30)
    )
    return buffer


def test_batched_retrieval_gives_each_sub_env_what_it_would_get_alone():
    """One search and one write per vector step, with the same demonstrations and stored rows as N of each."""
    runs = []
    for wrap in (lambda b: b, OneAtATime):
        buffer, backend = _seeded_buffer(), Recording()
        envs = DreamGymVectorEnv(ToyDomain(), num_envs=4, backend=backend, retriever=wrap(buffer), top_k=3)
        _rollout(envs)
        transitions = list(buffer.iter_transitions())
        episodes = _numbered((t.episode_id for t in transitions), {})
        stored = sorted((e, t.step, t.state, t.action) for e, t in zip(episodes, transitions, strict=True))
        runs.append((sorted(backend.prompts), stored))
    (batched_prompts, batched_rows), (single_prompts, single_rows) = runs
    assert batched_prompts == single_prompts and batched_rows == single_rows
    assert any("Similar real transitions" in p for p in batched_prompts)
    assert len(batched_rows) > len(_seeded_buffer())  # the steps were written


def test_batched_step_calls_the_buffer_once_per_step():
    buffer = _seeded_buffer()
    calls = {"retrieve_many": 0, "add_many": 0, "retrieve": 0}
    for name in calls:
        method = getattr(buffer, name)

        def counted(*args, _method=method, _name=name, **kwargs):
            calls[_name] += 1
            return _method(*args, **kwargs)

        setattr(buffer, name, counted)
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=8, backend=ScriptedBackend(), retriever=buffer, top_k=2)
    envs.reset(seed=0)
    envs.step(["go[1]"] * 8)
    assert calls == {"retrieve_many": 1, "add_many": 1, "retrieve": 0}


class FailOnce(ScriptedBackend):
    """The scripted world, except that request ``fail_at`` (0-based, counting every request) fails once.

    No timing decides the order: requests sent before it are answered at once, and it fails only when
    every request of the step has been sent, while the later ones are still held (they would be held
    for seconds, so an env that waits for them instead of cancelling them shows up in ``finished``).
    """

    def __init__(self, fail_at: int, num_envs: int = 8, hold_s: float = 5.0):
        super().__init__()
        self.fail_at, self.num_envs, self.hold_s = fail_at, num_envs, hold_s
        self.calls, self.finished, self.failed = 0, 0, False

    async def acomplete(self, request):
        call, self.calls = self.calls, self.calls + 1
        if not self.failed and call == self.fail_at:
            deadline = asyncio.get_running_loop().time() + self.hold_s
            while self.calls < self.num_envs and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.001)
            self.failed = True
            raise ServerUnreachableError("the server went away mid-step")
        if not self.failed and call > self.fail_at:
            await asyncio.sleep(self.hold_s)
        answer = await super().acomplete(request)
        self.finished += 1
        return answer


def _numbered(ids, numbers):
    """Episode ids as the order they were first seen in: alike for two env objects playing alike runs
    (each env object gives its episodes ids of their own)."""
    return [numbers.setdefault(episode_id, len(numbers)) for episode_id in ids]


def _vector_trace(envs, actions, steps=3):
    trace, numbers = [], {}
    for _ in range(steps):
        obs, rewards, terms, truncs, infos = envs.step(actions)
        trace.append((obs, rewards.tolist(), list(infos["step"]), _numbered(infos["episode_id"], numbers)))
    return trace


@pytest.mark.parametrize("fail_at", [0, 2, 7])
def test_a_failed_vector_step_advances_no_sub_env_and_stores_nothing(fail_at):
    """One sub-env's request fails: every sub-env is as it was, no row is written, a retry is a clean step."""
    actions = ["go[1]", "go[2]", "go[3]", "go[1]", "go[2]", "go[3]", "go[1]", "go[2]"]
    buffer, backend = _seeded_buffer(), FailOnce(fail_at)
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=8, backend=backend, retriever=buffer, top_k=2)
    envs.reset(seed=5)
    rows = len(buffer)
    with pytest.raises(ServerUnreachableError, match="went away"):
        envs.step(actions)
    assert all(env.history == [] for env in envs.envs)
    assert len(buffer) == rows
    assert backend.finished == fail_at  # those sent after the failing one were cancelled, not awaited

    retried = _vector_trace(envs, actions)
    clean_buffer = _seeded_buffer()
    clean = DreamGymVectorEnv(
        ToyDomain(), num_envs=8, backend=ScriptedBackend(), retriever=clean_buffer, top_k=2
    )
    clean.reset(seed=5)
    assert retried == _vector_trace(clean, actions)  # the RNG was restored too
    assert _rows(buffer) == _rows(clean_buffer)  # nothing recorded twice, nothing from the failed step


class _WritesFailOnce:
    """Makes the buffer's next write (``add`` or ``add_many``) raise once, as a full disk or a lost database would."""

    def __init__(self, buffer):
        self.buffer, self.armed = buffer, True
        for name in ("add", "add_many"):
            setattr(buffer, name, self._wrap(getattr(buffer, name)))

    def _wrap(self, method):
        def write(*args, **kwargs):
            if self.armed:
                self.armed = False
                raise StoreError("cannot write to the replay buffer: database or disk is full")
            return method(*args, **kwargs)

        return write


def test_a_vector_step_whose_batched_write_fails_advances_no_sub_env():
    """The transitions are written before any sub-env moves, so a failed write is a step that never happened."""
    actions = ["go[1]", "go[2]", "go[3]", "go[1]"]
    buffer = _seeded_buffer()
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=4, backend=ScriptedBackend(), retriever=buffer, top_k=2)
    envs.reset(seed=5)
    rows = len(buffer)
    _WritesFailOnce(buffer)
    with pytest.raises(StoreError, match="disk is full"):
        envs.step(actions)
    assert all(env.history == [] and env.last_transition is None for env in envs.envs)
    assert len(buffer) == rows

    retried = _vector_trace(envs, actions)
    clean_buffer = _seeded_buffer()
    clean = DreamGymVectorEnv(
        ToyDomain(), num_envs=4, backend=ScriptedBackend(), retriever=clean_buffer, top_k=2
    )
    clean.reset(seed=5)
    assert retried == _vector_trace(clean, actions)  # same steps, same RNG draws
    assert _rows(buffer) == _rows(clean_buffer)


def test_a_single_step_whose_write_fails_leaves_the_episode_as_it_was():
    buffer = _seeded_buffer()
    env = DreamGymEnv(ToyDomain(), backend=ScriptedBackend(), retriever=buffer, top_k=2)
    obs0, _ = env.reset(seed=3)
    _WritesFailOnce(buffer)
    with pytest.raises(StoreError, match="disk is full"):
        env.step("go[2]")
    assert env.history == [] and env.state == obs0 and env.last_transition is None
    after_retry = [env.step("go[2]")[0], env.step("go[3]")[0]]
    clean = DreamGymEnv(ToyDomain(), backend=ScriptedBackend(), retriever=_seeded_buffer(), top_k=2)
    clean.reset(seed=3)
    assert after_retry == [clean.step("go[2]")[0], clean.step("go[3]")[0]]
    assert [r.seed for r in env.backend.requests[-2:]] == [r.seed for r in clean.backend.requests[-2:]]


def _rows(buffer):
    transitions, numbers = list(buffer.iter_transitions()), {}
    episodes = _numbered((t.episode_id for t in transitions), numbers)
    return sorted((e, t.step, t.action, t.next_state) for e, t in zip(episodes, transitions, strict=True))


def test_a_failed_single_step_restores_the_env_rng():
    env = DreamGymEnv(ToyDomain(), backend=FailOnce(1))
    env.reset(seed=3)
    env.step("go[1]")
    with pytest.raises(ServerUnreachableError):
        env.step("go[2]")
    after_retry = [env.step("go[2]")[0], env.step("go[3]")[0]]
    clean = DreamGymEnv(ToyDomain(), backend=ScriptedBackend())
    clean.reset(seed=3)
    clean.step("go[1]")
    assert after_retry == [clean.step("go[2]")[0], clean.step("go[3]")[0]]
    assert [r.seed for r in env.backend.requests[-2:]] == [r.seed for r in clean.backend.requests[-2:]]


def _toy_env_with_a_buffer():
    from dreamgym_env.buffer import ReplayBuffer

    return DreamGymEnv(ToyDomain(), backend=ScriptedBackend(), retriever=ReplayBuffer())


def test_async_vector_env_pickles_factories_so_an_env_holding_a_buffer_runs_in_spawned_workers():
    """An env with a replay buffer (an open database, locks) does not pickle, and Gymnasium's
    ``AsyncVectorEnv`` never asks it to: the factories travel, and each worker makes its own env."""
    import pickle

    from gymnasium.vector import AsyncVectorEnv

    with pytest.raises(TypeError, match="RLock|sqlite3.Connection"):
        pickle.dumps(_toy_env_with_a_buffer().unwrapped)
    envs = AsyncVectorEnv([_toy_env_with_a_buffer] * 2, context="spawn")
    try:
        _, infos = envs.reset(seed=0)
        envs.step(["go[1]", "go[2]"])
    finally:
        envs.close()
    assert len(set(infos["episode_id"])) == 2


def test_two_runs_with_overlapping_seeds_store_no_episode_id_twice():
    """Sub-env 1 of ``reset(seed=3)`` and sub-env 0 of ``reset(seed=4)`` start from one RNG state, and a
    second run repeats the first's seeds (with other actions): each episode still has an id of its own,
    in ``info`` and in the buffer, where one id must never hold two different steps 0."""
    from dreamgym_env.buffer import ReplayBuffer

    buffer = ReplayBuffer(dedup="episode")
    ids: list[str] = []
    for actions in (("go[1]", "go[2]"), ("go[3]", "stop")):
        envs = DreamGymVectorEnv(ToyDomain(), num_envs=2, backend=ScriptedBackend(), retriever=buffer)
        for seed in (3, 4):
            ids += list(envs.reset(seed=seed)[1]["episode_id"])
            for action in actions:
                envs.step([action] * envs.num_envs)
    steps: dict[str, list[int]] = {}
    for transition in buffer.iter_transitions():
        steps.setdefault(transition.episode_id, []).append(transition.step)
    assert len(set(ids)) == len(ids) == 8
    assert set(steps) == set(ids)
    assert all(sorted(found) == list(range(len(found))) for found in steps.values()), steps


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_async_workers_reset_with_one_seed_get_ids_of_their_own(context):
    """Each worker process counts its envs from the same number (a forked one even from the parent's);
    the process's salt still sets their episodes apart."""
    from gymnasium.vector import AsyncVectorEnv

    envs = AsyncVectorEnv([_toy_env_with_a_buffer] * 2, context=context)
    try:
        _, infos = envs.reset(seed=[5, 5])
        _, again = envs.reset(seed=[5, 5])
    finally:
        envs.close()
    assert len(set(infos["episode_id"])) == 2
    assert list(again["episode_id"]) == list(infos["episode_id"])  # one env, one seed: one id

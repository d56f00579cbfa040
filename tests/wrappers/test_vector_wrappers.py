"""The adapters on vector envs, the native vector env's autoreset modes and the registered step limits."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import dreamgym_env  # noqa: F401  (registers the ids)
from dreamgym_env.buffer.embedders import HashingEmbedder
from dreamgym_env.domains import get_domain
from dreamgym_env.env import DreamGymEnv
from dreamgym_env.errors import ConfigError, DreamGymError
from dreamgym_env.real import REAL_IDS
from dreamgym_env.registration import BUILTIN_IDS
from dreamgym_env.vector import DreamGymVectorEnv
from dreamgym_env.wrappers import DiscreteActions, TextEmbedding, VectorDiscreteActions, VectorTextEmbedding

ENV_ID = "DreamGym/TextWorld-v0"
FIELDS = ("observation", "task", "admissible_actions")
K = 16


def native(n: int, mode: AutoresetMode = AutoresetMode.NEXT_STEP, **kwargs: object) -> VectorTextEmbedding:
    envs = gym.make_vec(ENV_ID, num_envs=n, backend="scripted", max_steps=3, autoreset_mode=mode, **kwargs)
    return VectorTextEmbedding(VectorDiscreteActions(envs, K), HashingEmbedder(dim=64), FIELDS)


def single_wrapped(mode: AutoresetMode, n: int) -> SyncVectorEnv:
    def make() -> gym.Env:
        env = DreamGymEnv("textworld", backend="scripted", max_steps=3)
        return TextEmbedding(DiscreteActions(env, K), HashingEmbedder(dim=64), FIELDS)

    return SyncVectorEnv([make] * n, autoreset_mode=mode)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_vector_adapters_give_what_the_single_env_adapters_give(mode: AutoresetMode) -> None:
    ours, reference = native(3, mode), single_wrapped(mode, 3)
    obs, infos = ours.reset(seed=7)
    ref_obs, ref_infos = reference.reset(seed=7)
    np.testing.assert_array_equal(obs, ref_obs)
    np.testing.assert_array_equal(infos["action_mask"], ref_infos["action_mask"])
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(7):
        actions = rng.integers(0, K, size=3)  # valid and out-of-range indices alike
        obs, rewards, terms, truncs, infos = ours.step(actions)
        ref_obs, ref_rewards, ref_terms, ref_truncs, ref_infos = reference.step(actions)
        np.testing.assert_array_equal(obs, ref_obs)
        assert (terms == ref_terms).all() and (truncs == ref_truncs).all() and (rewards == ref_rewards).all()
        np.testing.assert_array_equal(infos["action_mask"], ref_infos["action_mask"])
        assert list(infos["text_observation"]) == list(ref_infos["text_observation"])
        played = infos["_action_text"]  # False for the sub-envs this step only resets (NEXT_STEP)
        if played.any():
            assert played.tolist() == ref_infos["_action_text"].tolist()
            assert list(infos["action_text"][played]) == list(ref_infos["action_text"][played])
        if mode is AutoresetMode.SAME_STEP and "final_obs" in infos:
            for j in np.flatnonzero(infos["_final_obs"]):
                np.testing.assert_array_equal(infos["final_obs"][j], ref_infos["final_obs"][j])
                ended += 1
    assert ended > 0 or mode is AutoresetMode.NEXT_STEP


def test_out_of_range_index_is_reported_per_sub_env() -> None:
    envs = native(2)
    _, infos = envs.reset(seed=0)
    n = int(infos["action_mask"][0].sum())
    _, _, _, _, infos = envs.step(np.array([K - 1, 0]))
    assert infos["action_text"][0] == "" and f"index {K - 1}" in infos["last_action_error"][0]
    assert infos["text_observation"][0].startswith("[Invalid action]") and n < K
    assert infos["last_action_error"][1] is None and infos["action_text"][1] != ""
    assert envs.action_space == gym.spaces.MultiDiscrete([K, K])
    # The embedding wrapper forwards the masks of the VectorDiscreteActions below it.
    assert np.array_equal(envs.action_masks(), infos["action_mask"]) and envs.action_masks().shape == (2, K)


def test_vector_text_embedding_without_discrete_actions_has_no_masks() -> None:
    envs = VectorTextEmbedding(gym.make_vec(ENV_ID, num_envs=2, backend="scripted"))
    assert not hasattr(envs, "action_masks")
    with pytest.raises(AttributeError, match="VectorDiscreteActions"):
        envs.action_masks()


def test_single_env_adapters_point_vector_envs_to_the_vector_adapters() -> None:
    envs = gym.make_vec(ENV_ID, num_envs=2, backend="scripted")
    with pytest.raises(ConfigError, match="VectorDiscreteActions"):
        DiscreteActions(envs)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="VectorTextEmbedding"):
        TextEmbedding(envs)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="open action space"):
        VectorDiscreteActions(gym.make_vec("DreamGym/WebArena-v0", num_envs=2, backend="scripted"))
    with pytest.raises(ConfigError, match="fields"):
        VectorTextEmbedding(envs, fields=("html",))  # type: ignore[arg-type]


def test_disabled_autoreset_resets_only_the_masked_sub_envs() -> None:
    envs = native(3, AutoresetMode.DISABLED)
    obs, _ = envs.reset(seed=0)
    for _ in range(3):  # max_steps=3: every sub-env ends by now (the scripted model may end one sooner)
        live = ~envs.unwrapped._needs_reset  # type: ignore[attr-defined]
        obs, _, terms, truncs, _ = envs.step(np.where(live, 0, 0))
        if (terms | truncs).any():
            break
    done = terms | truncs
    with pytest.raises(DreamGymError, match="reset_mask"):
        envs.step(np.zeros(3, dtype=np.int64))
    before = obs.copy()
    obs, infos = envs.reset(options={"reset_mask": done})
    assert infos["_task"].tolist() == done.tolist()  # infos only for the reset sub-envs
    np.testing.assert_array_equal(obs[~done], before[~done])  # the others keep their observation
    assert (infos["step"][done] == 0).all()
    envs.step(np.zeros(3, dtype=np.int64))  # every sub-env may step again
    with pytest.raises(ConfigError, match="reset_mask"):
        envs.reset(options={"reset_mask": [1, 0, 1]})


def test_same_step_infos_have_gymnasiums_layout() -> None:
    ours = gym.make_vec(ENV_ID, num_envs=2, backend="scripted", max_steps=2, autoreset_mode="SameStep")
    reference = SyncVectorEnv(
        [lambda: DreamGymEnv("textworld", backend="scripted", max_steps=2)] * 2,
        autoreset_mode=AutoresetMode.SAME_STEP,
    )
    ours.reset(seed=3)
    reference.reset(seed=3)
    for _ in range(2):
        obs, *_, infos = ours.step(["look", "look"])
        ref_obs, *_, ref_infos = reference.step(["look", "look"])
    assert obs == ref_obs and "final_obs" in infos
    assert list(infos["final_obs"]) == list(ref_infos["final_obs"])
    assert infos["_final_obs"].tolist() == ref_infos["_final_obs"].tolist() == [True, True]
    assert infos["final_info"]["step"].tolist() == ref_infos["final_info"]["step"].tolist() == [2, 2]
    assert infos["step"].tolist() == [0, 0]  # the top level is the new episode's


def test_bad_autoreset_mode_and_step_limit_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="autoreset_mode must be one of"):
        DreamGymVectorEnv("textworld", 2, backend="scripted", autoreset_mode="Sometimes")
    with pytest.raises(ConfigError, match="max_episode_steps must be a positive int"):
        gym.make_vec(ENV_ID, num_envs=2, backend="scripted", max_episode_steps=0)


# ------------------------------------------------------------------ step limits
STEP_LIMITS = {
    "DreamGym/WebShop-v0": 15,
    "DreamGym/ALFWorld-v0": 50,
    "DreamGym/WebArena-v0": 30,
    "DreamGym/MiniWoB-v0": 10,
    "DreamGym/TextWorld-v0": 50,
}


def test_every_id_has_a_step_limit() -> None:
    assert set(STEP_LIMITS) == set(BUILTIN_IDS)


@pytest.mark.parametrize(("env_id", "limit"), sorted(STEP_LIMITS.items()))
def test_each_real_id_registers_its_simulated_twins_step_limit(env_id: str, limit: int) -> None:
    # Swapping a simulated id for its -Real-v0 twin keeps the episode length (and Gymnasium's TimeLimit).
    real_id = env_id.replace("-v0", "-Real-v0")
    assert real_id in REAL_IDS
    assert gym.spec(real_id).max_episode_steps == gym.spec(env_id).max_episode_steps == limit
    # The real wrapper's own limit, the same domain default, is where it truncates without TimeLimit too.
    assert get_domain(BUILTIN_IDS[env_id]).max_steps == limit


@pytest.mark.parametrize(("env_id", "limit"), sorted(STEP_LIMITS.items()))
def test_each_id_truncates_where_it_registers_its_step_limit(env_id: str, limit: int) -> None:
    # The registered max_episode_steps is where an env of the id truncates, on its own (not only by
    # Gymnasium's TimeLimit) and in the native vector env (which has no TimeLimit).
    assert gym.spec(env_id).max_episode_steps == limit
    task = get_domain(BUILTIN_IDS[env_id]).seed_tasks()[0]
    env = gym.make(env_id, backend="scripted")
    env.reset(seed=0, options={"task": task})
    for t in range(1, limit + 1):  # noqa: B007  (t is the step that truncated)
        *_, terminated, truncated, _ = env.step("")  # invalid: counts, never terminates, no model call
        if truncated:
            break
    assert (t, terminated, truncated) == (limit, False, True)
    assert env.unwrapped._ended  # type: ignore[attr-defined]  # the env's own limit fired
    envs = gym.make_vec(env_id, num_envs=1, backend="scripted")
    envs.reset(seed=0, options={"task": task})
    ends = [bool(envs.step([""])[3][0]) for _ in range(limit)]
    assert ends == [False] * (limit - 1) + [True]
    env.close()
    envs.close()


def test_single_env_truncates_once_at_the_limit_with_its_own_outcome() -> None:
    env = gym.make("DreamGym/WebShop-v0", backend="scripted")
    env.reset(seed=0)
    truncated_at = []
    for t in range(1, 16):
        *_, terminated, truncated, _ = env.step("")  # an invalid action: counts, never terminates
        if truncated:
            truncated_at.append(t)
    assert truncated_at == [15] and not terminated
    assert env.unwrapped._ended  # type: ignore[attr-defined]  # the env's own limit fired, not only TimeLimit


@pytest.mark.parametrize(
    ("kwargs", "limit"),
    [
        ({}, 50),
        ({"max_episode_steps": 4}, 4),
        ({"max_steps": 5}, 5),
        ({"max_steps": 5, "max_episode_steps": 4}, 4),
        ({"max_steps": 60, "max_episode_steps": 60}, 60),  # past the domain's 50 takes both
        ({"max_steps": 60}, 50),
        ({"max_steps": 60, "max_episode_steps": -1}, 60),
    ],
)
def test_vector_step_limit_is_the_smaller_of_max_steps_and_max_episode_steps(
    kwargs: dict[str, int], limit: int
) -> None:
    envs = gym.make_vec(ENV_ID, num_envs=2, backend="scripted", **kwargs)
    assert [env.max_steps for env in envs.unwrapped.envs] == [limit, limit]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kwargs", "limit"),
    [
        ({}, 15),
        ({"max_steps": 4}, 4),
        ({"max_episode_steps": 4}, 4),
        ({"max_steps": 20, "max_episode_steps": 20}, 20),
        ({"max_steps": 20}, 15),
    ],
)
def test_gymnasium_make_truncates_once_at_the_smaller_limit(kwargs: dict[str, int], limit: int) -> None:
    env = gym.make("DreamGym/WebShop-v0", backend="scripted", **kwargs)
    env.reset(seed=0)
    for t in range(1, 21):  # noqa: B007  (t is the step that truncated)
        *_, terminated, truncated, _ = env.step("")  # invalid: counts, never terminates, no model call
        if truncated:
            break
    assert (t, terminated, truncated) == (limit, False, True)


class CountingTasks:
    """The domain's seed tasks, counting the outcomes the env reports (the curriculum's input)."""

    def __init__(self) -> None:
        self.tasks = get_domain("webshop").seed_tasks()
        self.outcomes: list[tuple[float, bool]] = []

    def sample(self, rng: np.random.Generator):  # type: ignore[no-untyped-def]
        return self.tasks[int(rng.integers(len(self.tasks)))]

    def record_outcome(self, task, reward: float, success: bool) -> None:  # type: ignore[no-untyped-def]
        self.outcomes.append((reward, success))


@pytest.mark.parametrize("kwargs", [{}, {"max_episode_steps": 3}])
def test_every_truncated_episode_reports_its_outcome(kwargs: dict[str, int]) -> None:
    """Gymnasium's TimeLimit may end an episode before the env's own limit: it still counts, once."""
    tasks = CountingTasks()
    env = gym.make("DreamGym/WebShop-v0", backend="scripted", tasks=tasks, **kwargs)
    for episode in range(4):
        env.reset(seed=episode)
        truncated = False
        while not truncated:
            *_, truncated, _ = env.step("")
    env.reset(seed=99)
    assert tasks.outcomes == [(0.0, False)] * 4


def test_vector_adapter_skips_the_verbs_the_single_env_adapter_skips() -> None:
    skip = ("look", "examine")
    envs = gym.make_vec(ENV_ID, num_envs=2, backend="scripted", max_steps=3)
    ours = VectorDiscreteActions(envs, K, skip_verbs=skip)
    single = DiscreteActions(DreamGymEnv("textworld", backend="scripted", max_steps=3), K, skip_verbs=skip)
    _, infos = ours.reset(seed=[5, 6])
    single.reset(seed=5)
    assert ours.actions[0] == single.actions and single.actions
    assert all(a.split()[0] not in skip for row in ours.actions for a in row)
    assert infos["action_mask"][0].sum() == len(single.actions)

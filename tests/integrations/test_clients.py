"""Third-party RL clients against DreamGym ids, written as their own docs write them.

Each test uses only what ``docs/training_rl.md`` shows: the id, documented keyword arguments (the
scripted model through ``backend="scripted"``), and this package's adapters. stable-baselines3's
``make_vec_env`` (Dummy and Subproc), RLlib's PPO, a CleanRL-style loop and Gymnasium's own vector
wrappers.
"""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import DictInfoToList, NormalizeObservation, RecordEpisodeStatistics

import dreamgym_env  # noqa: F401  (registers the ids)
from dreamgym_env.errors import ConfigError, RenderModeError
from dreamgym_env.vector import DreamGymVectorEnv
from dreamgym_env.wrappers import DiscreteActions, TextEmbedding, VectorDiscreteActions, VectorTextEmbedding
from tests._backends import PeakBackend
from tests._scripts import load_script

ENV_ID = "DreamGym/TextWorld-v0"
SCRIPTED = {"backend": "scripted", "max_steps": 3}


# ---------------------------------------------------------------------------------- stable-baselines3
def test_unsupported_render_mode_is_a_type_error_naming_the_modes() -> None:
    """SB3's ``make_vec_env`` asks for ``rgb_array`` and retries without it only on a TypeError."""
    with pytest.raises(TypeError, match=r"render_mode must be None or one of \['ansi', 'human'\]") as caught:
        gym.make(ENV_ID, render_mode="rgb_array", **SCRIPTED)
    assert isinstance(caught.value, RenderModeError)
    with pytest.raises(RenderModeError):
        gym.make_vec(ENV_ID, num_envs=2, render_mode="rgb_array", **SCRIPTED)
    assert gym.make(ENV_ID, render_mode="ansi", **SCRIPTED).render_mode == "ansi"


def test_render_mode_error_does_not_echo_the_keyword_arguments() -> None:
    """Gymnasium re-raises a creator's TypeError with every keyword argument in the message."""
    with pytest.raises(RenderModeError) as caught:
        gym.make(ENV_ID, render_mode="rgb_array", api_key="sk-not-for-logs", **SCRIPTED)
    assert "sk-not-for-logs" not in str(caught.value) and "rgb_array" in str(caught.value)
    assert "DreamGym/TextWorld-v0" in str(caught.value)


@pytest.mark.parametrize("vec_env", ["DummyVecEnv", "SubprocVecEnv"])
def test_sb3_make_vec_env_trains_ppo(vec_env: str) -> None:
    from stable_baselines3 import PPO
    from stable_baselines3.common import vec_env as sb3_vec_env
    from stable_baselines3.common.env_util import make_vec_env

    envs = make_vec_env(
        ENV_ID,
        n_envs=2,
        seed=0,
        env_kwargs=SCRIPTED,
        wrapper_class=lambda env: TextEmbedding(DiscreteActions(env, max_actions=16)),
        vec_env_cls=getattr(sb3_vec_env, vec_env),
    )
    try:
        model = PPO("MlpPolicy", envs, n_steps=8, batch_size=8, n_epochs=1, seed=0, device="cpu")
        model.learn(16)
        assert model.num_timesteps == 16
        assert envs.get_attr("render_mode") == [None, None]  # built again without SB3's rgb_array
        episodes = [info for info in model.ep_info_buffer]
        assert episodes and all(e["l"] <= 3 for e in episodes)  # Monitor saw whole episodes
    finally:
        envs.close()


def test_sb3_subproc_workers_find_the_id_through_its_module() -> None:
    """A fresh worker process knows the DreamGym ids once ``dreamgym_env:`` in the id imports it."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    envs = make_vec_env(
        "dreamgym_env:DreamGym/TextWorld-v0", n_envs=2, env_kwargs=SCRIPTED, vec_env_cls=SubprocVecEnv
    )
    try:
        obs = envs.reset()
        assert len(obs) == 2 and all("Your task is to:" in o for o in obs)
    finally:
        envs.close()


# ---------------------------------------------------------------------------------- RLlib
@pytest.fixture(scope="module")
def ray_local():  # type: ignore[no-untyped-def]
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.rllib")
    if ray.is_initialized():  # another module's cluster: start a fresh local one
        ray.shutdown()
    ray.init(
        num_cpus=1,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        _node_ip_address="127.0.0.1",
    )
    yield ray
    ray.shutdown()


def test_rllib_ppo_one_iteration_on_the_native_vector_env(ray_local) -> None:  # type: ignore[no-untyped-def]
    from ray.rllib.algorithms.ppo import PPOConfig

    from dreamgym_env.integrations.rllib import register_rllib_envs

    register_rllib_envs()
    config = (
        PPOConfig()
        .environment(ENV_ID, env_config={**SCRIPTED, "backend": PeakBackend(), "max_actions": 16})
        .env_runners(
            num_env_runners=0,
            num_envs_per_env_runner=4,
            rollout_fragment_length=8,
            gym_env_vectorize_mode="vector_entry_point",
        )
        .training(train_batch_size_per_learner=32, minibatch_size=16, num_epochs=1)
        .learners(num_learners=0)
    )
    algo = config.build_algo()
    try:
        native = algo.env_runner.env.unwrapped
        assert isinstance(native, DreamGymVectorEnv)
        backend = native.backend  # RLlib copies env_config: this is the env runner's own copy
        assert isinstance(backend, PeakBackend)
        result = algo.train()
        assert result["env_runners"]["num_env_steps_sampled_lifetime"] >= 32
        assert result["env_runners"]["num_episodes_lifetime"] > 0
        # The sub-envs' model requests overlapped (one env at a time would give 1); how many of the four
        # overlap in a step is the machine's scheduling, not the env's.
        assert backend.peak >= 2
    finally:
        algo.stop()


def test_importing_the_adapters_does_not_import_ray_and_a_missing_rllib_names_the_extra() -> None:
    code = (
        "import sys, dreamgym_env.integrations.rllib\n"
        "assert 'ray' not in sys.modules\n"
        "sys.modules['ray'] = None\n"
        "from dreamgym_env.errors import DependencyNotInstalled\n"
        "try:\n"
        "    dreamgym_env.integrations.rllib.register_rllib_envs()\n"
        "except DependencyNotInstalled as e:\n"
        "    assert 'dreamgym-env[rllib]' in str(e), e\n"
        "else:\n"
        "    raise SystemExit('no error')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_register_rllib_envs_rejects_unknown_ids(ray_local) -> None:  # type: ignore[no-untyped-def]
    from dreamgym_env.integrations.rllib import register_rllib_envs

    with pytest.raises(ConfigError, match="Not registered Gymnasium ids"):
        register_rllib_envs(["DreamGym/Nope-v0"])


# ---------------------------------------------------------------------------------- CleanRL-style loop
def cleanrl_envs(num_envs: int, autoreset_mode: AutoresetMode, **kwargs: object) -> gym.vector.VectorEnv:
    """What docs/training_rl.md's CleanRL section builds."""
    envs = gym.make_vec(ENV_ID, num_envs=num_envs, autoreset_mode=autoreset_mode, **{**SCRIPTED, **kwargs})
    envs = VectorTextEmbedding(VectorDiscreteActions(envs, max_actions=16))
    return RecordEpisodeStatistics(envs)


def test_cleanrl_loop_same_step_stores_only_real_transitions_and_sees_every_final_info() -> None:
    backend = PeakBackend()
    envs = cleanrl_envs(4, AutoresetMode.SAME_STEP, backend=backend)
    rng = np.random.default_rng(0)
    obs, infos = envs.reset(seed=0)
    stored, ended, final_infos, episode_stats = [], 0, 0, 0
    for _ in range(12):
        # A valid index per sub-env, of an action the model answers (the domain's rules answer look,
        # inventory and examine without a request), so every step sends 4 requests together.
        actions = [
            rng.choice(
                [i for i, a in enumerate(listed) if a.split()[0] not in ("look", "inventory", "examine")]
            )
            for listed in infos["admissible_actions"]
        ]
        next_obs, rewards, terminations, truncations, infos = envs.step(actions)
        dones = np.logical_or(terminations, truncations)
        real_next, steps = next_obs.copy(), infos["step"].copy()
        if "final_obs" in infos:  # SAME_STEP: next_obs already starts the next episode
            final_infos += int(infos["_final_info"].sum())
            for j in np.flatnonzero(infos["_final_obs"]):
                real_next[j], steps[j] = infos["final_obs"][j], infos["final_info"]["step"][j]
        episode_stats += int(infos.get("_episode", np.zeros(4, bool)).sum())
        stored.extend(zip(obs, actions, rewards, real_next, dones, steps, strict=True))
        ended += int(dones.sum())
        obs = next_obs
    assert ended > 0 and final_infos == ended and episode_stats == ended
    assert len(stored) == 48 and all(step >= 1 for *_, step in stored)  # no reset step among them
    assert backend.peak == 4


def test_cleanrl_loop_next_step_marks_the_reset_steps_to_skip() -> None:
    """Gymnasium's default: the step after an episode ends only resets; docs show how to skip it."""
    envs = cleanrl_envs(4, AutoresetMode.NEXT_STEP)
    envs.action_space.seed(0)
    envs.reset(seed=0)
    autoreset = np.zeros(4, dtype=bool)
    kept = skipped = ended = 0
    for _ in range(12):
        _, _, terminations, truncations, infos = envs.step(envs.action_space.sample())
        kept += int((~autoreset).sum())
        skipped += int(autoreset.sum())
        assert not infos["_action_text"][autoreset].any()  # nothing was played on a reset step
        autoreset = np.logical_or(terminations, truncations)
        ended += int(autoreset.sum())
    assert skipped > 0 and kept + skipped == 48 and skipped <= ended


def test_cleanrl_style_ppo_example_trains_at_a_tiny_budget() -> None:
    module = load_script("examples/cleanrl_ppo.py")
    result = module.main(
        module.Args(backend="scripted", num_envs=2, num_steps=8, total_timesteps=32, max_steps=3)
    )
    assert result["updates"] == 2 and result["lengths"] and max(result["lengths"]) <= 3


# ---------------------------------------------------------------------------------- Gymnasium wrappers
def test_gymnasium_vector_wrappers_stack_on_the_native_vector_env() -> None:
    envs = gym.make_vec(ENV_ID, num_envs=3, **SCRIPTED)
    assert isinstance(envs, DreamGymVectorEnv)
    envs = DictInfoToList(
        NormalizeObservation(RecordEpisodeStatistics(VectorTextEmbedding(VectorDiscreteActions(envs, 16))))
    )
    envs.action_space.seed(0)
    obs, infos = envs.reset(seed=0)
    assert obs.shape == (3, 256) and isinstance(infos, list) and "admissible_actions" in infos[0]
    lengths = []
    for _ in range(8):
        obs, _, _, _, infos = envs.step(envs.action_space.sample())
        assert obs.shape == (3, 256) and np.isfinite(obs).all()
        lengths += [info["episode"]["l"] for info in infos if "episode" in info]
    assert lengths and all(n == 3 for n in lengths)  # max_steps=3 truncates every episode at 3


def test_make_vec_max_episode_steps_and_the_registered_limit() -> None:
    assert (
        gym.spec(ENV_ID).max_episode_steps == 50 and gym.spec("DreamGym/WebShop-v0").max_episode_steps == 15
    )
    envs = gym.make_vec(ENV_ID, num_envs=2, backend="scripted", max_episode_steps=2)
    assert isinstance(envs, DreamGymVectorEnv) and envs.spec is not None
    envs.reset(seed=0)
    envs.step(["look", "look"])
    *_, truncations, _ = envs.step(["look", "look"])
    assert truncations.all()
    single = gym.make(ENV_ID, backend="scripted")
    assert single.spec is not None and single.spec.max_episode_steps == 50

"""stable-baselines3 adapters: admissible actions as Discrete(K) with masks, text as vectors."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from dreamgym_env.buffer.embedders import HashingEmbedder
from dreamgym_env.env import DreamGymEnv
from dreamgym_env.errors import ConfigError
from dreamgym_env.wrappers import DiscreteActions, TextEmbedding


def sim_env(**kwargs: object) -> DreamGymEnv:
    return DreamGymEnv("textworld", backend="scripted", max_steps=5, **kwargs)  # type: ignore[arg-type]


def test_index_plays_the_admissible_action_and_mask_marks_real_ones() -> None:
    env = DiscreteActions(sim_env(), max_actions=16)
    assert env.action_space == gym.spaces.Discrete(16)
    _, info = env.reset(seed=0)
    actions = info["admissible_actions"]
    assert 0 < len(actions) < 16
    assert info["action_mask"].tolist() == [i < len(actions) for i in range(16)]
    assert np.array_equal(env.action_masks(), info["action_mask"]) and env.actions == actions
    # An action the model answers (look, inventory and examine the domain's rules answer).
    i = next(
        i for i, a in enumerate(actions) if i >= 2 and a.split()[0] not in ("look", "inventory", "examine")
    )
    obs, reward, terminated, truncated, info = env.step(np.int64(i))
    assert info["action_text"] == actions[i] and f"You did: {actions[i]}" in obs
    assert info["last_action_error"] is None


def test_index_without_action_takes_the_env_failure_path() -> None:
    env = DiscreteActions(sim_env(), max_actions=16)
    _, info = env.reset(seed=0)
    n = len(info["admissible_actions"])
    obs, reward, terminated, truncated, info = env.step(15)
    assert obs.startswith("[Invalid action]") and reward == 0.0 and info["step"] == 1
    assert "index 15" in info["last_action_error"] and f"lists {n}" in info["last_action_error"]
    assert info["action_text"] == ""
    for _ in range(4):  # invalid steps still count: truncation ends a stuck episode
        *_, terminated, truncated, info = env.step(15)
    assert truncated and not terminated


def test_wrap_maps_every_index_to_a_real_action() -> None:
    env = DiscreteActions(sim_env(), max_actions=16, on_invalid="wrap")
    _, info = env.reset(seed=0)
    actions = info["admissible_actions"]
    *_, info = env.step(15)
    assert info["action_text"] == actions[15 % len(actions)] and info["last_action_error"] is None


def test_long_lists_are_cut_to_k_and_counted() -> None:
    env = DiscreteActions(sim_env(), max_actions=2)
    _, info = env.reset(seed=0)
    assert (
        env.actions == info["admissible_actions"][:2]
        and info["actions_dropped"] == len(info["admissible_actions"]) - 2
    )
    assert info["action_mask"].tolist() == [True, True]


def test_open_domains_and_bad_arguments_are_rejected() -> None:
    with pytest.raises(ConfigError, match="open action space"):
        DiscreteActions(DreamGymEnv("webarena", backend="scripted"))
    with pytest.raises(ConfigError, match="max_actions"):
        DiscreteActions(sim_env(), max_actions=0)
    with pytest.raises(ConfigError, match="on_invalid"):
        DiscreteActions(sim_env(), on_invalid="noop")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="fields"):
        TextEmbedding(sim_env(), fields=("html",))  # type: ignore[arg-type]


def test_text_embedding_forwards_the_masks_of_the_env_it_wraps() -> None:
    # The stack docs/training_rl.md shows: env.action_masks() on TextEmbedding(DiscreteActions(env)).
    env = TextEmbedding(DiscreteActions(gym.make("DreamGym/TextWorld-v0", backend="scripted"), 16))
    _, info = env.reset(seed=0)
    assert np.array_equal(env.action_masks(), info["action_mask"])
    *_, info = env.step(0)
    assert np.array_equal(env.action_masks(), info["action_mask"])
    # Over an env without masks there is none to forward: absent, with a message saying what to wrap.
    plain = TextEmbedding(sim_env())
    assert not hasattr(plain, "action_masks")
    with pytest.raises(AttributeError, match=r"TextEmbedding\(DiscreteActions\(env\)\)"):
        plain.action_masks()


def test_text_embedding_is_a_deterministic_box_per_field() -> None:
    env = TextEmbedding(
        sim_env(), HashingEmbedder(dim=32), fields=("observation", "task", "admissible_actions")
    )
    assert env.observation_space.shape == (96,) and env.observation_space.dtype == np.float32
    obs, info = env.reset(seed=1)
    again, _ = env.reset(seed=1)
    assert np.array_equal(obs, again) and env.observation_space.contains(obs)
    task_block = HashingEmbedder(dim=32).embed([info["task"]])[0]
    np.testing.assert_allclose(obs[32:64], task_block, rtol=1e-6)
    assert info["text_observation"].startswith("Room: ")
    other, _ = env.reset(seed=2)
    assert not np.array_equal(obs, other)


def test_wrapped_env_passes_sb3_check_env_and_maskable_ppo_trains() -> None:
    pytest.importorskip("stable_baselines3")
    sb3_contrib = pytest.importorskip("sb3_contrib")
    from stable_baselines3.common.env_checker import check_env

    env = TextEmbedding(
        DiscreteActions(gym.make("DreamGym/TextWorld-v0", backend="scripted", max_steps=5), 16)
    )
    check_env(env, warn=True)
    model = sb3_contrib.MaskablePPO("MlpPolicy", env, n_steps=32, batch_size=16, n_epochs=1, seed=0)
    model.learn(64)
    obs, info = env.reset(seed=0)
    action, _ = model.predict(obs, action_masks=info["action_mask"])
    assert info["action_mask"][int(action)]


@pytest.mark.real
@pytest.mark.parametrize(
    ("env_id", "extra"),
    [("DreamGym/TextWorld-Real-v0", {}), ("DreamGym/TextWorld-v0", {"backend": "scripted"})],
)
def test_same_training_script_runs_on_real_and_simulated_ids(
    env_id: str, extra: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    pytest.importorskip("textworld")
    pytest.importorskip("sb3_contrib")
    pytest.importorskip("matplotlib")
    from dreamgym_env.training.ppo import PPOSettings, train_and_evaluate

    games = tmp_path_factory.getbasetemp() / "ppo_games"  # shared by both ids: generated once
    out = tmp_path_factory.mktemp("ppo")
    args = PPOSettings(
        env_id=env_id,
        level=2,
        train_games=2,
        eval_games=1,
        max_steps=6,
        num_envs=2,
        total_timesteps=128,
        n_steps=32,
        eval_episodes=2,
        games_dir=str(games),
        out_dir=str(out),
        **extra,
    )
    result = train_and_evaluate(args)
    assert 0.0 <= result["held_out_games_trained"] <= 1.0 and result["env_id"] == env_id
    assert (out / "success_rate.png").stat().st_size > 0 and (out / "policy.zip").is_file()


def test_wrapped_envs_are_remade_from_their_spec():
    import gymnasium as gym

    import dreamgym_env  # noqa: F401
    from dreamgym_env.wrappers import DiscreteActions, TextEmbedding

    env = TextEmbedding(DiscreteActions(gym.make("DreamGym/TextWorld-v0", backend="scripted"), 8, "wrap"))
    assert env.spec is not None
    again = gym.make(env.spec)
    assert [w.name for w in again.spec.additional_wrappers] == ["DiscreteActions", "TextEmbedding"]
    inner = again.env
    assert isinstance(again, TextEmbedding) and isinstance(inner, DiscreteActions)
    assert (inner.max_actions, inner.on_invalid) == (8, "wrap")
    assert again.reset(seed=0)[0].shape == env.reset(seed=0)[0].shape


OBSERVING = ("look", "inventory", "examine")


def test_skipped_verbs_are_not_offered_but_still_listed() -> None:
    env = DiscreteActions(sim_env(), max_actions=16, skip_verbs=OBSERVING)
    _, info = env.reset(seed=0)
    listed = info["admissible_actions"]
    offered = [a for a in listed if a.split()[0] not in OBSERVING]
    assert len(offered) < len(listed)  # the state lists look and examine commands
    assert env.actions == offered and info["action_mask"].sum() == len(offered)
    *_, info = env.step(0)
    assert info["action_text"] == offered[0]
    assert all(a.split()[0] not in OBSERVING for a in env.actions)


@pytest.mark.parametrize("bad", ["look", ["go north"], [3]])
def test_skip_verbs_must_be_single_words(bad: object) -> None:
    with pytest.raises(ConfigError, match="skip_verbs"):
        DiscreteActions(sim_env(), max_actions=16, skip_verbs=bad)  # type: ignore[arg-type]

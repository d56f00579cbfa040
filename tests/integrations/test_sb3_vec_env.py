"""SB3VecEnv: an SB3 VecEnv over the concurrent native vector env (Discrete(K), masks, embeddings per batch)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv  # noqa: E402

import dreamgym_env  # noqa: E402, F401 - registers the ids
from dreamgym_env import DreamGymEnv, DreamGymVectorEnv, ScriptedBackend  # noqa: E402
from dreamgym_env.buffer.embedders import HashingEmbedder  # noqa: E402
from dreamgym_env.errors import ConfigError  # noqa: E402
from dreamgym_env.integrations.sb3 import SB3VecEnv
from dreamgym_env.wrappers import DiscreteActions, TextEmbedding  # noqa: E402
from tests._toy import ToyDomain  # noqa: E402

K = 6  # the toy domain lists 4 actions (go[1..3], stop): indices 4 and 5 have none behind them
FIELDS = ("observation", "task", "admissible_actions")


def _embedder() -> HashingEmbedder:
    return HashingEmbedder(dim=16)


def native(num_envs: int = 3, backend: ScriptedBackend | None = None, **kwargs: Any) -> SB3VecEnv:
    on_invalid = kwargs.pop("on_invalid", "fail")
    venv = DreamGymVectorEnv(
        ToyDomain(),
        num_envs=num_envs,
        backend=backend or ScriptedBackend(),
        autoreset_mode="SameStep",
        **kwargs,
    )
    return SB3VecEnv(venv, max_actions=K, on_invalid=on_invalid, embedder=_embedder(), fields=FIELDS)


def _toy_env(on_invalid: str = "fail") -> gym.Env:
    env = TextEmbedding(DreamGymEnv(ToyDomain(), backend=ScriptedBackend()), _embedder(), FIELDS)
    return DiscreteActions(env, K, on_invalid)  # type: ignore[arg-type]


def test_vec_env_contract_shapes_dtypes_and_masks() -> None:
    envs = native(3)
    assert isinstance(envs, VecEnv) and envs.num_envs == 3
    assert envs.action_space == gym.spaces.Discrete(K)
    assert envs.observation_space.shape == (3 * 16,) and envs.observation_space.dtype == np.float32
    envs.seed(0)
    obs = envs.reset()
    assert obs.shape == (3, 48) and obs.dtype == np.float32
    assert all(envs.observation_space.contains(row) for row in obs)
    masks = envs.env_method("action_masks")
    assert len(masks) == 3 and all(m.shape == (K,) and m.dtype == bool for m in masks)
    for mask, info in zip(masks, envs.reset_infos, strict=True):
        assert mask.tolist() == [i < len(info["admissible_actions"]) for i in range(K)]
    obs, rewards, dones, infos = envs.step(np.array([0, 1, 2]))
    assert obs.shape == (3, 48) and obs.dtype == np.float32
    assert rewards.shape == (3,) and rewards.dtype == np.float32
    assert dones.shape == (3,) and dones.dtype == bool and not dones.any()
    assert isinstance(infos, list) and len(infos) == 3
    assert [info["action_text"] for info in infos] == ["go[1]", "go[2]", "go[3]"]
    assert infos[0]["text_observation"].endswith("You did: go[1] (step 1).")
    assert np.array_equal(
        np.stack(envs.env_method("action_masks", indices=[0, 2])), envs.action_masks()[[0, 2]]
    )
    assert envs.actions(1) == infos[1]["admissible_actions"]


def test_sb3_contrib_finds_the_masks() -> None:
    utils = pytest.importorskip("sb3_contrib.common.maskable.utils")
    envs = native(2)
    envs.reset()
    assert utils.is_masking_supported(envs)
    assert utils.get_action_masks(envs).shape == (2, K)


def test_autoreset_reports_terminal_observation_and_truncation() -> None:
    envs = native(2)
    envs.seed(0)
    envs.reset()
    obs, _, dones, infos = envs.step(np.array([3, 0]))  # env 0 plays "stop": terminated
    assert dones.tolist() == [True, False]
    final_text = infos[0]["text_observation"]
    assert "You did: stop" in final_text and infos[0]["TimeLimit.truncated"] is False
    expected = _embedder().embed([final_text, infos[0]["task"], "\n".join(infos[0]["admissible_actions"])])
    np.testing.assert_array_equal(infos[0]["terminal_observation"], expected.reshape(-1))
    reset_info = envs.reset_infos[0]
    assert reset_info["step"] == 0 and reset_info["text_observation"].startswith("Room")
    assert not np.array_equal(obs[0], infos[0]["terminal_observation"])
    assert "terminal_observation" not in infos[1]
    for _ in range(3):  # the toy domain truncates after 4 steps
        _, _, dones, infos = envs.step(np.array([0, 0]))
    assert dones[1] and infos[1]["TimeLimit.truncated"] is True
    assert envs.reset_infos[1]["step"] == 0


def test_index_without_action_takes_the_failure_path_or_wraps() -> None:
    envs = native(1)
    envs.reset()
    _, rewards, _, infos = envs.step(np.array([5]))
    assert infos[0]["action_text"] == "" and "index 5" in infos[0]["last_action_error"]
    assert infos[0]["text_observation"].startswith("[Invalid action]") and rewards[0] == 0
    wrapping = native(1, on_invalid="wrap")
    wrapping.reset()
    _, _, _, infos = wrapping.step(np.array([5]))
    assert infos[0]["action_text"] == "go[2]" and infos[0]["last_action_error"] is None


class PeakBackend(ScriptedBackend):
    """The scripted model, counting how many requests are in flight together."""

    def __init__(self) -> None:
        super().__init__(latency_s=0.05)
        self.in_flight = self.peak = 0

    async def acomplete(self, request):  # type: ignore[no-untyped-def]
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            return await super().acomplete(request)
        finally:
            self.in_flight -= 1


def test_all_model_requests_of_a_step_are_in_flight_at_once() -> None:
    backend = PeakBackend()
    envs = native(8, backend=backend)
    envs.reset()
    envs.step(np.zeros(8, dtype=np.int64))
    assert backend.peak == 8 and len(backend.requests) == 8
    envs.step_async(np.arange(8) % 3)
    _, _, _, infos = envs.step_wait()
    assert backend.peak == 8 and len(backend.requests) == 16 and len(infos) == 8


def _trace(envs: VecEnv, schedule: np.ndarray) -> list[Any]:
    """Everything a learner sees, as plain values: observations, masks, rewards, dones, terminal obs."""
    envs.seed(7)
    trace: list[Any] = [envs.reset().tolist(), np.stack(envs.env_method("action_masks")).tolist()]
    for actions in schedule:
        obs, rewards, dones, infos = envs.step(actions)
        trace.append(
            (
                obs.tolist(),
                rewards.tolist(),
                dones.tolist(),
                np.stack(envs.env_method("action_masks")).tolist(),
                [
                    (
                        info["action_text"],
                        info["last_action_error"],
                        info["success"],
                        info["text_observation"],
                        info["action_mask"].tolist(),
                        info.get("TimeLimit.truncated"),
                        info["terminal_observation"].tolist() if "terminal_observation" in info else None,
                    )
                    for info in infos
                ],
                [(r["text_observation"], r["task"], r["action_mask"].tolist()) for r in envs.reset_infos],
            )
        )
    return trace


@pytest.mark.parametrize("on_invalid", ["fail", "wrap"])
def test_same_inputs_as_dummy_vec_env_over_the_single_env_wrappers(on_invalid: str) -> None:
    schedule = np.random.default_rng(3).integers(0, K, size=(14, 4))
    dummy = DummyVecEnv([lambda: _toy_env(on_invalid) for _ in range(4)])
    ours = _trace(native(4, on_invalid=on_invalid), schedule)
    assert ours == _trace(dummy, schedule)
    assert any(True in step[2] for step in ours[2:])  # episodes ended and were reset


def test_sync_vector_env_of_envs_gives_the_same_as_the_native_one() -> None:
    schedule = np.random.default_rng(4).integers(0, K, size=(10, 3))
    sync = SB3VecEnv.from_env_fns(
        [lambda: DreamGymEnv(ToyDomain(), backend=ScriptedBackend()) for _ in range(3)],
        max_actions=K,
        embedder=_embedder(),
        fields=FIELDS,
    )
    assert _trace(sync, schedule) == _trace(native(3), schedule)
    assert sync.env_is_wrapped(gym.Wrapper) == [False] * 3


def test_make_uses_the_native_vector_env_for_simulated_ids() -> None:
    envs = SB3VecEnv.make("DreamGym/TextWorld-v0", 2, max_actions=16, backend="scripted", max_steps=5)
    assert isinstance(envs.venv, DreamGymVectorEnv)
    assert envs.reset().shape == (2, 256)
    assert envs.get_attr("max_steps") == [5, 5]
    envs.set_attr("max_steps", 3, indices=1)
    assert envs.get_attr("max_steps") == [5, 3]
    assert envs.env_method("render") == [None, None] and envs.env_is_wrapped(gym.Wrapper) == [False, False]
    envs.close()


def test_bad_vector_envs_are_rejected() -> None:
    with pytest.raises(ConfigError, match="SAME_STEP"):
        SB3VecEnv(DreamGymVectorEnv(ToyDomain(), num_envs=2, backend=ScriptedBackend()))
    webarena = DreamGymVectorEnv("webarena", backend=ScriptedBackend(), autoreset_mode="SameStep")
    with pytest.raises(ConfigError, match="open action space"):
        SB3VecEnv(webarena)
    with pytest.raises(ConfigError, match="max_actions"):
        SB3VecEnv(DreamGymVectorEnv(ToyDomain(), backend=ScriptedBackend(), autoreset_mode="SameStep"), 0)
    envs = native(2)
    envs.set_options([{"task": "toy-1"}, {"task": "toy-2"}])
    with pytest.raises(ConfigError, match="same options"):
        envs.reset()


def test_maskable_ppo_learns_on_it() -> None:
    sb3_contrib = pytest.importorskip("sb3_contrib")
    envs = SB3VecEnv.make(
        "DreamGym/TextWorld-v0",
        4,
        max_actions=16,
        fields=("observation", "task"),
        backend="scripted",
        max_steps=5,
    )
    model = sb3_contrib.MaskablePPO("MlpPolicy", envs, n_steps=16, batch_size=32, n_epochs=1, seed=0)
    model.learn(64, progress_bar=True)  # as the docs show it: SB3's bar needs tqdm and rich (the sb3 extra)
    assert model.num_timesteps == 64
    obs = envs.reset()
    actions, _ = model.predict(obs, action_masks=envs.action_masks())
    assert all(envs.action_masks()[i, a] for i, a in enumerate(actions))
    envs.close()


def test_importing_the_package_does_not_import_sb3_and_a_missing_sb3_names_the_extra() -> None:
    code = (
        "import sys, dreamgym_env, dreamgym_env.wrappers\n"
        "assert 'stable_baselines3' not in sys.modules\n"
        "sys.modules['stable_baselines3'] = None\n"
        "from dreamgym_env.errors import DependencyNotInstalled\n"
        "try:\n"
        "    from dreamgym_env.integrations.sb3 import SB3VecEnv\n"
        "except DependencyNotInstalled as e:\n"
        "    assert 'dreamgym-env[sb3]' in str(e), e\n"
        "else:\n"
        "    raise SystemExit('no error')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

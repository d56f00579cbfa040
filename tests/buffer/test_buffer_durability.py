"""Crash safety and multi-process writers, with real processes, on SQLite and on PostgreSQL."""

import os
import signal
import subprocess
import sys
import textwrap
import time

from dreamgym_env.buffer import ReplayBuffer

WRITER = textwrap.dedent(
    """
    import sys
    from dreamgym_env.buffer import ReplayBuffer
    from dreamgym_env.records import Transition

    path, name, single = sys.argv[1], sys.argv[2], sys.argv[5]
    batches, batch = int(sys.argv[3]), int(sys.argv[4])  # noqa: E501
    with ReplayBuffer.open(path, busy_timeout_s=60) as buffer:
        n = 0
        for b in range(batches):
            items = [
                Transition(domain="d", task_id="t", task="x", episode_id=name, step=n + i,
                           state=f"{name} state {n + i}", action="act", next_state=f"{name} next {n + i}",
                           source="sim")
                for i in range(batch)
            ]
            if single == "1":
                for t in items:
                    buffer.add(t)
            else:
                buffer.add_many(items)
            n += batch
            print(n, flush=True)
    """
)


def _spawn(tmp_path, *args):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    return subprocess.Popen(
        [sys.executable, str(script), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )


def test_sigkill_mid_stream_keeps_exactly_the_committed_batches(tmp_path, store_location):
    path = store_location
    batch = 40
    proc = _spawn(tmp_path, path, "w", 100_000, batch, 0)
    acknowledged = 0
    while acknowledged < 2000:
        acknowledged = int(proc.stdout.readline())
    time.sleep(0.05)  # let it get into the middle of further writes
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with ReplayBuffer.open(path) as buffer:
        n = len(buffer)
        assert n >= acknowledged and n % batch == 0  # every acknowledged batch, and no half batch
        steps = [t.step for t in buffer.iter_transitions()]
        assert steps == list(range(n))  # exactly a prefix of what was written, nothing lost in between
        assert len(buffer.index) == n
        last = buffer.retrieve(f"w state {n - 1}", "act", 1)[0]
        assert last.step == n - 1


def test_concurrent_writers_from_several_processes_lose_nothing(tmp_path, store_location):
    path = store_location
    ReplayBuffer.open(path).close()  # create the file (and WAL mode) once
    procs = [_spawn(tmp_path, path, f"w{i}", 10, 30, int(i % 2 == 0)) for i in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and out.split()[-1:] == ["300"], f"writer failed: {err[-2000:]}"
    with ReplayBuffer.open(path) as buffer:
        assert len(buffer) == 1200
        by_writer = {}
        for t in buffer.iter_transitions():
            by_writer.setdefault(t.episode_id, set()).add(t.step)
        assert by_writer == {f"w{i}": set(range(300)) for i in range(4)}

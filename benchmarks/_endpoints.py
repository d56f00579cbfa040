"""Stub OpenAI-compatible endpoints in processes of their own, for the benchmarks that need many servers.

``bench_endpoints.py`` measures throughput and fail-over against them, and ``fault_figures.py``
steps its N=64 resource figure against them: one copy here, since a benchmark run as
``python benchmarks/<name>.py`` can import a ``_``-prefixed sibling module but should not import
another benchmark.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
from typing import Any

ACTION = "search[yoga mat]"
ANSWER = {
    "reasoning": "The agent searched.",
    "next_state": "WebShop | results page\n[Back to Search]\n[B0001] Yoga mat, purple, 6mm | $29.99",
    "admissible_actions": ["click[back to search]", "click[b0001]"],
    "done": False,
    "success": False,
}


def completion_body() -> bytes:
    """The stub's one answer: a chat completion whose content is :data:`ANSWER`."""
    return json.dumps(
        {
            "id": "stub",
            "object": "chat.completion",
            "created": 0,
            "model": "stub",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": json.dumps(ANSWER)},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140},
        }
    ).encode()


def _serve(port_out: Any, latency: float, slots: int) -> None:
    """One stub endpoint (runs in its own process until killed)."""
    body = completion_body()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)

    async def handle(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, busy: asyncio.Semaphore
    ) -> None:
        try:
            while True:
                request_head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in request_head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                async with busy:
                    await asyncio.sleep(latency)
                writer.write(head + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        busy = asyncio.Semaphore(slots)
        server = await asyncio.start_server(lambda r, w: handle(r, w, busy), "127.0.0.1", 0, backlog=1024)
        port_out.send(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    asyncio.run(main())


class Endpoints:
    """``n`` stub endpoints, each in its own process."""

    def __init__(self, n: int, latency: float, slots: int) -> None:
        ctx = mp.get_context("spawn")
        self.processes, self.urls = [], []
        for _ in range(n):
            here, there = ctx.Pipe()
            process = ctx.Process(target=_serve, args=(there, latency, slots), daemon=True)
            process.start()
            self.processes.append(process)
            self.urls.append(f"http://127.0.0.1:{here.recv()}/v1")

    def kill(self, index: int) -> None:
        self.processes[index].kill()
        self.processes[index].join()

    def close(self) -> None:
        for process in self.processes:
            if process.is_alive():
                process.kill()
            process.join()

"""The OpenAI-compatible backend's HTTP behaviour, against a local stand-in server."""

import asyncio
import json
import threading

from dreamgym_env.config import BackendConfig
from dreamgym_env.experience.backends.base import CompletionRequest
from dreamgym_env.experience.backends.openai_http import OpenAIBackend
from tests._http import serve_json

ANSWER = {"reasoning": "r", "next_state": "s", "admissible_actions": [], "done": False, "success": False}


def _serve(wave: int):
    """A chat-completions endpoint that records each request's client port and answers a wave at a time.

    Every request waits until ``wave`` requests are in, so exactly ``wave`` connections are open at once.
    """
    ports = []
    barrier = threading.Barrier(wave, timeout=30)

    def respond(body, port):
        ports.append(port)
        barrier.wait()
        return {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": json.dumps(ANSWER)},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    return serve_json(respond), ports


def test_waves_wider_than_openais_default_pool_reuse_their_connections():
    """A vector env of 120 sends waves of 120 requests; the second wave must not open new connections.

    openai's default pool keeps 100 connections alive, so 20 would be closed after every wave and
    opened again (against vLLM, some requests on such fresh connections stalled until the read timeout).
    """
    server, ports = _serve(wave=120)
    backend = OpenAIBackend(
        BackendConfig(base_url=f"http://127.0.0.1:{server.server_port}/v1", model="m", max_concurrency=256)
    )
    request = CompletionRequest(messages=[{"role": "user", "content": "hi"}], json_schema={"type": "object"})

    async def waves():
        for _ in range(2):
            completions = await asyncio.gather(*(backend.acomplete(request) for _ in range(120)))
            assert all(json.loads(c.text) == ANSWER for c in completions)
        await backend.aclose()

    try:
        asyncio.run(waves())
    finally:
        server.shutdown()
    assert len(ports) == 240
    assert len(set(ports)) == 120

"""A local JSON-over-HTTP endpoint for tests of OpenAI-compatible clients (loopback only)."""

import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def serve_json(respond: Callable[[dict, int], dict], port: int = 0) -> ThreadingHTTPServer:
    """Start a keep-alive server on 127.0.0.1 answering every POST with ``respond(body, client_port)``.

    Each connection gets its own thread, so a test can hold many requests in flight at once. Call
    ``shutdown()`` on the returned server when done (and ``server_close()`` to free its port). ``port``
    0 picks a free one; a given port lets a test bring a stopped server back at the same URL.
    """

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as vLLM's server does

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            payload = json.dumps(respond(body, self.client_address[1])).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def finish(self):
            with contextlib.suppress(OSError):  # a reset connection has nothing left to flush
                super().finish()

        def log_message(self, *args):
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 512

    server = Server(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@dataclass
class Reply:
    """What :func:`serve_replies` sends back for one request.

    ``body`` is sent as JSON unless it is bytes or str; ``trickle_s`` > 0 sends it one byte at a time
    with that pause between bytes (a server that never quite answers); ``delay_s`` waits before the
    status line (a server that accepts and then says nothing); ``reset`` answers nothing and resets the
    connection (TCP RST: a server killed mid-request, a proxy dropping it).
    """

    status: int = 200
    body: Any = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    trickle_s: float = 0.0
    delay_s: float = 0.0
    reset: bool = False


def serve_replies(reply: Callable[[dict, dict], Reply], port: int = 0) -> ThreadingHTTPServer:
    """Like :func:`serve_json`, but ``reply(body, request_headers)`` chooses status, headers and pacing."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):  # noqa: N802
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            answer = reply(json.loads(raw or b"{}"), self.headers)  # case-insensitive .get
            if answer.reset:  # linger 0: close() sends RST, not FIN
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
                self.close_connection = True
                return
            body = answer.body
            payload = (
                body
                if isinstance(body, bytes)
                else body.encode()
                if isinstance(body, str)
                else json.dumps(body).encode()
            )
            try:
                time.sleep(answer.delay_s)
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(payload)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if answer.trickle_s <= 0:
                    self.wfile.write(payload)
                    return
                for i in range(len(payload)):
                    self.wfile.write(payload[i : i + 1])
                    self.wfile.flush()
                    time.sleep(answer.trickle_s)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def finish(self):
            with contextlib.suppress(OSError):  # a reset connection has nothing left to flush
                super().finish()

        def log_message(self, *args):
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 512

    server = Server(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server

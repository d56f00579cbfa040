"""A local JSON-over-HTTP endpoint for tests of OpenAI-compatible clients (loopback only)."""

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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

        def log_message(self, *args):
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 512

    server = Server(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server

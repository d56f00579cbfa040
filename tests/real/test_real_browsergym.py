"""BrowserGym driving Debian's Chromium against a page served on 127.0.0.1."""

from __future__ import annotations

import functools
import http.server
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest

from dreamgym_env.real import register_real_envs

pytestmark = pytest.mark.real

PAGE = """<!DOCTYPE html><html><head><title>Loopback Shop</title></head><body>
<h1>Loopback Shop</h1>
<label for="q">Search</label><input id="q" type="text">
<button onclick="document.getElementById('out').textContent='Answer: 42 widgets'">Show answer</button>
<p id="out">No answer yet</p>
</body></html>"""


@pytest.fixture(scope="module")
def page_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("browsergym.core")
    if not shutil.which("chromium"):
        pytest.skip("Debian's chromium is not installed (scripts/install_real.sh installs it)")
    root: Path = tmp_path_factory.mktemp("site")
    (root / "index.html").write_text(PAGE)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/index.html"
    server.shutdown()


def test_browsergym_page_maps_to_listing_and_actions_act(page_url: str) -> None:
    register_real_envs()
    env = gym.make("DreamGym/WebArena-Real-v0", start_url=page_url, goal="How many widgets are there?")
    try:
        obs, info = env.reset(seed=0)
        assert obs.splitlines()[:2] == ["Tab 0 (current): Loopback Shop", f"URL: {page_url}"]
        assert info["task"] == "How many widgets are there?" and info["source"] == "real"
        # BrowserGym's own listing (flatten_axtree_to_str), as AgentLab logs it
        assert obs.splitlines()[2].startswith("RootWebArea 'Loopback Shop', focused")
        button = re.search(r"^\t+\[(\w+)\] button 'Show answer'$", obs, re.MULTILINE)
        textbox = re.search(r"^\t+\[(\w+)\] textbox 'Search'$", obs, re.MULTILINE)
        assert button and textbox, obs
        obs, reward, terminated, truncated, info = env.step(f"click('{button.group(1)}')")
        assert "StaticText 'Answer: 42 widgets'" in obs and info["last_action_error"] is None
        obs, *_, info = env.step("click('99999')")  # well-formed, but no such element: BrowserGym says why
        assert info["last_action_error"] and not terminated
        obs, reward, terminated, truncated, info = env.step("send_msg_to_user('42')")
        assert terminated and reward == 0.0 and not info["success"]
    finally:
        env.close()

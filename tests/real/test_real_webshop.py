"""The WebShop wrapper's contract against a stand-in engine that speaks WebShop's documented text format."""

from __future__ import annotations

from typing import Any

import pytest
from gymnasium.utils.env_checker import check_env

from dreamgym_env.domains.webshop.engine import WebShopRealEnv
from dreamgym_env.errors import DependencyNotInstalled

INSTR = "i need a deodorant for sensitive skin, and price lower than 40.00 dollars"


class FakeWebShop:
    """Three pages of WebShop's text mode, the way WebAgentTextEnv prints them."""

    def __init__(self) -> None:
        self.page = "search"

    def reset(self, session: Any = None, instruction_text: str | None = None) -> tuple[str, None]:
        self.page = "search"
        return f"WebShop [SEP] Instruction: [SEP] {INSTR} [SEP] Search", None

    def get_available_actions(self) -> dict[str, Any]:
        clickables = {
            "search": ["search"],
            "results": ["back to search", "next >", "b078gwrc1j"],
            "item": [
                "back to search",
                "< prev",
                "assorted scents",
                "bright citrus",
                "description",
                "features",
                "reviews",
                "buy now",
            ],
            "done": [],
        }[self.page]
        return {"has_search_bar": self.page == "search", "clickables": clickables}

    def step(self, action: str) -> tuple[str, float, bool, None]:
        head = f"Instruction: [SEP] {INSTR} [SEP] Back to Search"
        if action.startswith("search["):
            self.page = "results"
        elif action.lower() == "click[b078gwrc1j]":
            self.page = "item"
        elif action.lower() == "click[buy now]":
            self.page = "done"
            return "Thank you for shopping with us! [SEP] Your code: [SEP] None", 0.5, True, None
        if self.page == "results":
            return (
                (
                    f"{head} [SEP] Page 1 (Total results: 50) [SEP] Next > [SEP] B078GWRC1J [SEP] "
                    "Bright Citrus Deodorant [SEP] $10.99"
                ),
                0.0,
                False,
                None,
            )
        if self.page == "item":
            return (
                (
                    f"{head} [SEP] < Prev [SEP] scent [SEP] assorted scents [SEP] bright citrus [SEP] "
                    "Bright Citrus Deodorant [SEP] Price: $10.99 [SEP] Rating: N.A. [SEP] Description [SEP] "
                    "Features [SEP] Reviews [SEP] Buy Now"
                ),
                0.0,
                False,
                None,
            )
        return f"WebShop [SEP] Instruction: [SEP] {INSTR} [SEP] Search", 0.0, False, None


def test_webshop_episode_maps_pages_tracks_state_and_passes_reward_through() -> None:
    env = WebShopRealEnv(FakeWebShop(), sessions=[7])
    obs, info = env.reset(seed=0)
    assert obs == f"WebShop | search page\nInstruction: {INSTR}\n[Search]"
    assert (
        info["task_id"] == "webshop-session-7"
        and info["admissible_actions"] == []
        and info["source"] == "real"
    )
    obs, *_, info = env.step("search[deodorant sensitive skin]")
    assert obs.startswith('WebShop | results for "deodorant sensitive skin" | page 1 (50 results)')
    assert (
        "click[B078GWRC1J]" in info["admissible_actions"]
        and "click[Back to Search]" in info["admissible_actions"]
    )
    obs, *_ = env.step("click[B078GWRC1J]")
    assert obs.startswith("WebShop | item B078GWRC1J") and "scent: [assorted scents] [bright citrus]" in obs
    obs, *_ = env.step("click[bright citrus]")
    assert "Selected: scent=bright citrus" in obs
    obs, reward, terminated, truncated, info = env.step("click[Buy Now]")
    assert (reward, terminated, info["success"]) == (0.5, True, False)
    assert obs.startswith("WebShop | purchase complete") and "options: scent=bright citrus" in obs


def test_webshop_contract_and_missing_package_message() -> None:
    check_env(WebShopRealEnv(FakeWebShop()), skip_render_check=True)
    with pytest.raises(DependencyNotInstalled, match="WebShop"):
        WebShopRealEnv().reset(seed=0)

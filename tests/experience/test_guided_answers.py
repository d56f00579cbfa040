"""``EnvConfig.guided_answers``: the model's answer is a choice among the outcomes the domain wrote out."""

from __future__ import annotations

import pytest

from dreamgym_env._event_loop import run_sync
from dreamgym_env.config import BackendConfig, EnvConfig
from dreamgym_env.domains import get_domain
from dreamgym_env.errors import ConfigError, ResponseFormatError
from dreamgym_env.experience.backends.base import Backend, Completion, CompletionRequest
from dreamgym_env.experience.backends.openai_http import OpenAIBackend
from dreamgym_env.experience.backends.scripted import ScriptedBackend
from dreamgym_env.experience.model import ExperienceModel
from dreamgym_env.records import Task

STATE = "Room: kitchen\nExits: east\nHere: chest (open, holds: key), crate (closed)\nCarrying: nothing"
TASK = Task(task_id="t", domain="textworld", instruction="take the key")
CHOOSE = EnvConfig(answer_format="state", top_k=0, guided_answers=True, parse_retries=0)


def _predict(backend: Backend, action: str, config: EnvConfig = CHOOSE):
    model = ExperienceModel(get_domain("textworld"), backend, config)
    return run_sync(model.apredict(TASK, [], [], STATE, action, seed=0))


def test_a_step_with_known_outcomes_is_a_choice_among_them():
    # The script's answer leaves the key in the chest as well: the nearest outcome moves it.
    backend = ScriptedBackend(["Done.\nHere: chest (open, holds: key), crate (closed)\nCarrying: key"])
    prediction = _predict(backend, "take key from chest")
    choices = backend.requests[0].choices
    assert choices is not None and [c.split("\n")[0] for c in choices] == [
        "Nothing happens.",
        "Done.",
        "You won.",
        "You lost.",
    ]
    assert prediction.answered_by == "chosen" and prediction.output is not None
    assert prediction.output.next_state.endswith("Here: chest (open, empty), crate (closed)\nCarrying: key")


def test_the_model_judges_the_ending_among_the_choices():
    backend = ScriptedBackend(["You won.\nHere: chest (open, empty), crate (closed)\nCarrying: key"])
    prediction = _predict(backend, "take key from chest")
    assert prediction.output is not None and prediction.output.done and prediction.output.success


def test_a_step_that_cannot_succeed_is_the_rules_and_sends_nothing():
    backend = ScriptedBackend([])
    prediction = _predict(backend, "take key from crate")
    assert prediction.answered_by == "rule" and backend.requests_received == 0
    assert prediction.output is not None and prediction.output.next_state.startswith("Nothing happens.\n")


def test_a_revealing_step_is_written_in_the_domains_form():
    backend = ScriptedBackend(["Done.\nHere: chest (open, holds: key), crate (open, holds: ruby)"])
    prediction = _predict(backend, "open crate")
    request = backend.requests[0]
    assert request.choices is None and request.pattern is not None and prediction.answered_by == "model"
    assert "crate (open, holds: ruby)" in prediction.output.next_state


def test_a_revealing_answer_out_of_the_domains_form_is_refused():
    # The chest changed too: no longer the form of opening the crate.
    backend = ScriptedBackend(["Done.\nHere: chest (closed), crate (open, holds: ruby)"])
    with pytest.raises(ResponseFormatError, match="form the domain gives"):
        _predict(backend, "open crate")


def test_off_by_default_and_refused_with_json_answers():
    backend = ScriptedBackend(["Done.\nHere: chest (open, empty), crate (closed)\nCarrying: key"])
    prediction = _predict(backend, "take key from chest", EnvConfig(answer_format="state", top_k=0))
    assert backend.requests[0].choices is None and prediction.answered_by == "model"
    with pytest.raises(ConfigError, match="answer_format='state'"):
        ExperienceModel(get_domain("textworld"), ScriptedBackend(), EnvConfig(guided_answers=True))


class _IgnoresChoices(Backend):
    """A server that does not apply the choice (not vLLM's): it writes what it likes."""

    async def acomplete(self, request: CompletionRequest) -> Completion:
        return Completion(text="Done.\nCarrying: key")


def test_an_answer_off_the_list_is_refused_and_says_why():
    with pytest.raises(ResponseFormatError, match="none of the 4 outcomes"):
        _predict(_IgnoresChoices(), "take key from chest")


def test_the_http_request_carries_vllms_choice():
    backend = OpenAIBackend(BackendConfig(base_url="http://127.0.0.1:9/v1", model="m"))
    request = CompletionRequest(messages=[], json_schema=None, choices=("a", "b"))
    assert backend._request_kwargs(request)["structured_outputs"] == {"choice": ["a", "b"]}
    assert "structured_outputs" not in backend._request_kwargs(
        CompletionRequest(messages=[], json_schema=None)
    )


def test_a_remembered_room_this_episode_gave_another_room_is_asked_for_again():
    # The memo keys what the model is shown; the guide reads more of the episode (the names it gave).
    from dreamgym_env.experience.memo import StepMemo
    from dreamgym_env.records import Step

    kitchen = "Done.\nRoom: kitchen\nExits: east, north\nHere: nothing\nCarrying: nothing"
    hall = "Done.\nRoom: hall\nExits: west\nHere: nothing"
    attic = "Done.\nRoom: attic\nExits: west\nHere: nothing"
    backend = ScriptedBackend([hall, attic])
    config = EnvConfig(answer_format="state", top_k=0, guided_answers=True, parse_retries=0, history_window=0)
    model = ExperienceModel(get_domain("textworld"), backend, config, StepMemo())
    task = Task(task_id="t", domain="textworld", instruction="find the coin")

    def came_from(room: str) -> list[Step]:  # the room north of the kitchen
        return [
            Step(state=f"Room: {room}\nExits: south\nHere: nothing\nCarrying: nothing", action="go south")
        ]

    first = run_sync(model.apredict(task, came_from("pantry"), [], kitchen, "go east", seed=0))
    assert first.answered_by == "model" and "Room: hall" in first.output.next_state
    # Another episode came from a hall north of the kitchen: east cannot be a hall too.
    second = run_sync(model.apredict(task, came_from("hall"), [], kitchen, "go east", seed=0))
    assert second.answered_by == "model" and "Room: attic" in second.output.next_state
    assert backend.requests_received == 2
    # An episode that fits the remembered answer (now the attic) is still answered from the memo.
    again = run_sync(model.apredict(task, came_from("cellar"), [], kitchen, "go east", seed=0))
    assert again.answered_by == "memo" and "Room: attic" in again.output.next_state

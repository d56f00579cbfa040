"""Plain-text state answers (``EnvConfig.answer_format="state"``): no schema sent, the text is the next
state, and the domain completes it, lists its actions and rules the ending."""

from __future__ import annotations

import pytest

from dreamgym_env._event_loop import run_sync
from dreamgym_env.config import BackendConfig, EnvConfig
from dreamgym_env.domains import get_domain
from dreamgym_env.errors import ConfigError, ResponseFormatError
from dreamgym_env.experience.backends.openai_http import OpenAIBackend
from dreamgym_env.experience.backends.scripted import ScriptedBackend
from dreamgym_env.experience.model import ExperienceModel
from dreamgym_env.experience.schema import ExperienceOutput
from dreamgym_env.records import Task

STATE = "Room: kitchen\nExits: east\nHere: key\nCarrying: nothing"
TASK = Task(task_id="t", domain="textworld", instruction="take the key")


def _predict(model: ExperienceModel, action: str = "take key"):
    return run_sync(model.apredict(TASK, [], [], STATE, action, ["take key", "look"], seed=0))


def test_a_state_request_carries_no_schema_and_its_text_is_the_next_state():
    backend = ScriptedBackend(["Done.\nHere: nothing\nCarrying: key"])
    model = ExperienceModel(get_domain("textworld"), backend, EnvConfig(answer_format="state", top_k=0))
    prediction = _predict(model)
    assert backend.requests[0].json_schema is None
    out = prediction.output
    assert out is not None and prediction.answered_by == "model"
    # The domain fills in the lines the answer leaves out and lists the commands of the new state.
    assert out.next_state == "Done.\nRoom: kitchen\nExits: east\nHere: nothing\nCarrying: key"
    assert "drop key" in out.admissible_actions and not out.done


def test_a_json_request_still_carries_the_schema():
    backend = ScriptedBackend()
    model = ExperienceModel(get_domain("textworld"), backend, EnvConfig(top_k=0))
    _predict(model)
    assert backend.requests[0].json_schema == model.json_schema and model.json_schema is not None


def test_an_empty_state_answer_is_unparsable_and_asked_again():
    backend = ScriptedBackend(["  \n", "Done.\nHere: nothing\nCarrying: key"])
    model = ExperienceModel(
        get_domain("textworld"), backend, EnvConfig(answer_format="state", top_k=0, parse_retries=1)
    )
    prediction = _predict(model)
    assert prediction.attempts == 2 and prediction.output is not None
    with pytest.raises(ResponseFormatError, match="empty"):
        _predict(
            ExperienceModel(
                get_domain("textworld"),
                ScriptedBackend([""]),
                EnvConfig(answer_format="state", parse_retries=0),
            )
        )


def test_a_structured_answer_from_the_scripted_backend_is_sent_as_its_state():
    answer = ExperienceOutput(
        reasoning="r", next_state="Done.\nHere: nothing\nCarrying: key", done=False, success=False
    )
    model = ExperienceModel(
        get_domain("textworld"), ScriptedBackend([answer]), EnvConfig(answer_format="state")
    )
    assert _predict(model).completion.text == answer.next_state


def test_a_domain_that_takes_its_actions_from_the_model_refuses_state_answers():
    with pytest.raises(ConfigError, match="answer_format='state'"):
        ExperienceModel(get_domain("webshop"), ScriptedBackend(), EnvConfig(answer_format="state"))


def test_the_http_request_has_no_response_format_for_a_state_answer():
    model = ExperienceModel(
        get_domain("textworld"), ScriptedBackend(), EnvConfig(answer_format="state", top_k=0)
    )
    request = model.build_request(TASK, [], [], STATE, "take key")
    backend = OpenAIBackend(BackendConfig(base_url="http://127.0.0.1:9/v1", model="m"))
    assert "response_format" not in backend._request_kwargs(request)
    json_model = ExperienceModel(get_domain("textworld"), ScriptedBackend(), EnvConfig(top_k=0))
    kwargs = backend._request_kwargs(json_model.build_request(TASK, [], [], STATE, "take key"))
    assert kwargs["response_format"]["json_schema"]["schema"] == json_model.json_schema

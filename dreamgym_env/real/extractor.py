"""Real-to-abstract mapping by an extraction prompt (the paper's alternative to rules).

For observation formats the rule-based mappings (:mod:`dreamgym_env.real.mapping`) do not cover.
"""

from __future__ import annotations

import json
from typing import Any

from dreamgym_env.domains import Domain, get_domain
from dreamgym_env.errors import ResponseFormatError

_EXTRACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"state": {"type": "string"}},
    "required": ["state"],
    "additionalProperties": False,
}


class LLMStateExtractor:
    """Map a raw real observation to the abstract state with an extraction prompt.

    The prompt gives the domain's own description of the simulated world (which includes its state
    format and an example) and asks the model to rewrite the raw observation in that format, keeping
    every fact and element id an agent needs and dropping markup. The request uses the same backends
    as the experience model (a vLLM server over HTTP, or the scripted fake in tests) with a JSON schema
    ``{"state": str}``.

    Args:
        backend: A :class:`~dreamgym_env.experience.backends.Backend`.
        domain: The domain whose state format to produce.
        max_raw_chars: Longest raw observation sent; longer ones are cut.

    Example:
        >>> extractor = LLMStateExtractor(make_backend(BackendConfig(base_url=...)), "webarena")
        >>> state = extractor(raw_html_or_axtree_text)
    """

    def __init__(self, backend: Any, domain: str | Domain, *, max_raw_chars: int = 24_000) -> None:
        self.backend = backend
        self.domain = get_domain(domain)
        self.max_raw_chars = max_raw_chars

    def messages(self, raw: str) -> list[dict[str, str]]:
        """The extraction prompt: fixed system text first (prefix-cache friendly), the observation last."""
        system = (
            "You convert raw observations of a real environment into the abstract text state an agent and a "
            "simulator share. Here is how that environment and its state format are described:\n\n"
            f"{self.domain.instructions}\n\n"
            "Rewrite the raw observation you receive in exactly that state format. Keep every fact, number, "
            "product id and element id an agent would need; drop markup, scripts, styling and boilerplate; "
            'invent nothing. Answer with JSON {"state": "..."}.'
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": raw[: self.max_raw_chars]}]

    async def aextract(self, raw: str) -> str:
        """Coroutine form of :meth:`__call__`."""
        from dreamgym_env.experience.backends import CompletionRequest

        request = CompletionRequest(
            messages=self.messages(raw), json_schema=_EXTRACTION_SCHEMA, schema_name="abstract_state"
        )
        completion = await self.backend.acomplete(request)
        try:
            state = json.loads(completion.text)["state"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ResponseFormatError(
                f"The extraction model did not answer {{'state': str}}: {e}", raw_output=completion.text
            ) from e
        if not isinstance(state, str) or not state.strip():
            raise ResponseFormatError(
                "The extraction model returned an empty state.", raw_output=completion.text
            )
        return state.strip()

    def __call__(self, raw: str) -> str:
        """Return the abstract state for ``raw``.

        Raises:
            ResponseFormatError: The model's answer is not ``{"state": "<non-empty text>"}``.
        """
        from dreamgym_env._event_loop import run_sync

        return run_sync(self.aextract(raw))

"""The action grammar of a spec domain: templates and regular expressions an action must match in full."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_FREE_SLOT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def compile_template(template: str) -> str:
    """Turn an action template into the regular expression it stands for.

    Template syntax: literal text, plus placeholders in braces. ``{name}`` is a free slot (one or more
    characters, no newline); ``{a|b|c}`` is exactly one of the listed words. Write ``{{`` and ``}}`` for
    literal braces. Example: ``assign[{billing|tech|sales}]``, ``reply[{message}]``, ``close``.

    Raises:
        ValueError: an unbalanced brace, an empty placeholder or a slot name that is not an identifier.
    """
    pieces: list[str] = []
    i = 0
    while i < len(template):
        char = template[i]
        if template.startswith("{{", i) or template.startswith("}}", i):
            pieces.append(re.escape(char))
            i += 2
        elif char == "{":
            end = template.find("}", i)
            if end < 0 or "{" in template[i + 1 : end]:
                raise ValueError(f"unbalanced '{{' at character {i} (write '{{{{' for a literal brace)")
            body = template[i + 1 : end].strip()
            if "|" in body:
                choices = [c.strip() for c in body.split("|")]
                if not all(choices):
                    raise ValueError(f"empty choice in '{{{body}}}'")
                pieces.append("(?:" + "|".join(re.escape(c) for c in choices) + ")")
            elif _FREE_SLOT.fullmatch(body):
                pieces.append(r"[^\n]+?")
            else:
                raise ValueError(
                    f"placeholder '{{{body}}}' is neither a slot name nor choices like '{{a|b}}'"
                )
            i = end + 1
        elif char == "}":
            raise ValueError(f"unbalanced '}}' at character {i} (write '}}}}' for a literal brace)")
        else:
            pieces.append(re.escape(char))
            i += 1
    return "".join(pieces)


class ActionGrammar(BaseModel):
    """Which action strings are well-formed. Give ``templates`` or ``regex`` (or both).

    Attributes:
        templates: Action templates (see :func:`compile_template`); shown to agents as written.
        regex: Regular expressions, each matched against the whole action.
        help: One paragraph for agents; built from the templates when omitted.
        open: True when valid actions cannot be listed per state (then ``admissible_actions`` may be
            empty and agents rely on ``help``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    templates: list[str] = Field(default_factory=list)
    regex: list[str] = Field(default_factory=list)
    help: str | None = None
    open: bool = False

    @field_validator("templates")
    @classmethod
    def _templates_compile(cls, value: list[str]) -> list[str]:
        for template in value:
            if not template.strip():
                raise ValueError("a template is empty; write the action's literal text, e.g. 'close'")
            try:
                compile_template(template)
            except ValueError as e:
                raise ValueError(f"template {template!r}: {e}") from None
        return value

    @field_validator("regex")
    @classmethod
    def _regex_compiles(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as e:
                raise ValueError(f"regular expression {pattern!r} does not compile: {e}") from None
        return value

    @model_validator(mode="after")
    def _something_given(self) -> ActionGrammar:
        if not self.templates and not self.regex and not self.open:
            raise ValueError("give at least one of 'templates' or 'regex', or set 'open: true'")
        return self

    def patterns(self) -> list[str]:
        """Every pattern an action may match in full."""
        return [compile_template(t) for t in self.templates] + list(self.regex)

    def render_help(self) -> str:
        """The grammar paragraph shown to agents and to the experience model."""
        if self.help:
            return self.help.strip()
        if self.templates:
            return "Actions (one per step; {x} is free text, {a|b} one of the words): " + "; ".join(
                self.templates
            )
        return "Actions must match one of: " + "; ".join(self.regex)

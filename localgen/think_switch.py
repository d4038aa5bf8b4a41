"""--think and /think: a hybrid reasoning model's thinking turned on or off, or its effort set, through the variable its
chat template reads (Qwen3's and SmolLM3's enable_thinking, DeepSeek-V3.1's thinking, GPT-OSS's reasoning_effort)."""

from __future__ import annotations

from functools import lru_cache

from localgen.errors import UsageError
from localgen.template_sandbox import one_line, template_variables

ON, OFF = "on", "off"
EFFORTS = ("low", "medium", "high")  # GPT-OSS's reasoning_effort, least first
THINK_VALUES = (ON, OFF, *EFFORTS)
_SPELLINGS = {"true": ON, "false": OFF}  # Ollama's --think=true, --think=false
ON_OFF_SWITCHES = ("enable_thinking", "thinking")  # True or False; not given: the template's default
EFFORT_SWITCH = "reasoning_effort"  # low, medium or high; not given: the template's default (GPT-OSS's medium)
RUN_HINT = "--hide-thinking leaves its reasoning out of the output"
CHAT_HINT = "/thinking off hides its reasoning"


def parse_think(text: str, given_to: str) -> str:
    """A --think or /think value as localgen names it: on, off, low, medium or high (true and false as on and off)."""
    value = text.strip().lower()
    value = _SPELLINGS.get(value, value)
    if value not in THINK_VALUES:
        raise UsageError(f"{given_to} takes on, off, low, medium or high, not {one_line(text, 40)!r}",
                         hint=f"{given_to} off answers without thinking, on as the model's chat template has it")
    return value


@lru_cache(maxsize=8)
def think_switch(template: str | None) -> str | None:
    """The variable through which a chat template turns thinking on or off or sets its effort, else None (found
    once for a template)."""
    if template is None:
        return None
    read = template_variables(template)
    return next((name for name in (*ON_OFF_SWITCHES, EFFORT_SWITCH) if name in read), None)


def think_problem(template: str | None, think: str, *, flag: str = "--think", hide_hint: str = RUN_HINT
                  ) -> tuple[str, str] | None:
    """Why think (given with flag) cannot apply to a chat template, as a message and a hint (hide_hint: how to hide
    the reasoning instead), else None: the template lacks a switch for it, or has another kind."""
    switch = think_switch(template)
    if switch is None:  # where thinking is asked for, hiding it is no help
        return ("this model's chat template has no switch for thinking",
                hide_hint if think == OFF else _as_trained_hint(flag))
    if switch == EFFORT_SWITCH and think == OFF:
        return ("this model's chat template sets a reasoning effort (low, medium, high) and cannot turn thinking off",
                f"{flag} {EFFORTS[0]} thinks least; {hide_hint}")
    if switch != EFFORT_SWITCH and think in EFFORTS:
        return ("this model's chat template turns thinking on or off, and sets no effort",
                f"{flag} {ON} or {flag} {OFF}")
    return None


def think_values(template: str | None) -> tuple[str, ...]:
    """The --think and /think values a chat template can take (none where it has no switch), as /think's Tab offers
    them."""
    return tuple(value for value in THINK_VALUES if think_problem(template, value) is None)


def think_variables(template: str | None, think: str | None) -> dict[str, object]:
    """What a chat template is given to render with think: nothing where think is None (its default) or cannot
    apply to it (think_problem)."""
    if think is None or think_problem(template, think) is not None:
        return {}
    switch = think_switch(template)
    assert switch is not None
    if switch == EFFORT_SWITCH:
        return {} if think == ON else {switch: think}
    return {switch: think == ON}


def _as_trained_hint(flag: str) -> str:
    """The next step where thinking was asked of a template with no switch: none is needed, as it thinks as trained."""
    if flag.startswith("--"):
        return f"leave out {flag}: this model thinks as it was trained to, if at all"
    return f"send your message as it is: this model thinks as it was trained to, if at all, whatever {flag} says"


def refuse_think(template: str | None, think: str | None, *, model_name: str, flag: str = "--think",
                 hide_hint: str = RUN_HINT) -> None:
    """Refuse think (given with flag: --think, /think) where it cannot apply to the chat template."""
    problem = None if think is None else think_problem(template, think, flag=flag, hide_hint=hide_hint)
    if problem is not None:
        raise UsageError(f"{one_line(model_name)}: {flag} {think}: {problem[0]}", hint=problem[1])


def think_line(template: str | None, think: str | None) -> str:
    """What a chat's /think and /show say of thinking: the switch's setting, or that the chat template has none."""
    switch = think_switch(template)
    if switch is None:
        return f"thinking: this model's chat template has no switch for it ({CHAT_HINT})"
    if switch == EFFORT_SWITCH:
        effort = think if think in EFFORTS else "as the chat template has it"
        return f"thinking: reasoning effort {effort} (/think low, medium or high sets it)"
    if think is None:
        return f"thinking: as the chat template has it (/think {ON} or {OFF} sets it)"  # DeepSeek-V3.1's: off
    other = OFF if think == ON else ON
    return f"thinking: {think} (/think {other} turns it {other})"

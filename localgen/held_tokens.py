"""A chat prompt that keeps the KV cache's own tokens for the text it shares with them (an answer as generated)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from localgen.tokens import common_prefix

if TYPE_CHECKING:
    from localgen.engine import Engine

UNIT_MOST_TOKENS = 4  # a UTF-8 character split over tokens spans at most 4 byte tokens
_REPLACED = "\ufffd"


def with_held_tokens(engine: Engine, prompt: Sequence[int]) -> list[int]:
    """prompt with the tokens the KV cache holds for the text they share with it, then prompt's own for the rest.

    A model's answer is the tokens it generated, which its text, tokenized again, often does not give back (' travel',
    'er' for ' traveler'): the next turn's prompt would then part from the cache inside that answer and compute the
    rest of it again. Here the cached tokens stand in for prompt's wherever both spell the same text and part at
    the same place, so the prompt's text stays exactly the rendered one; past where the texts differ (a template
    that drops an answer's reasoning, an earlier exchange moved out of the context), prompt's own tokens go on.
    Only plain text is matched: a control token, or a character the tokens do not spell whole, ends the match.
    """
    prompt = list(prompt)
    if not engine.is_open:
        return prompt
    held = engine.kv_token_list
    start = common_prefix(held, prompt)
    if start >= len(held) or start >= len(prompt):
        return prompt
    held_end = prompt_end = start
    surplus, held_ahead = "", False  # text one side has beyond the other's, and whether it is the cache's
    best = (start, start)
    while True:
        if not surplus:  # both sides part here: the same tokens after it (the template's own) are kept as they are
            while held_end < len(held) and prompt_end < len(prompt) and held[held_end] == prompt[prompt_end]:
                held_end, prompt_end = held_end + 1, prompt_end + 1
            best = (held_end, prompt_end)
        unit = _unit(engine, prompt if held_ahead else held, prompt_end if held_ahead else held_end)
        if unit is None:
            break
        end, text = unit
        if held_ahead:
            prompt_end = end
        else:
            held_end = end
        shared = min(len(text), len(surplus))
        if text[:shared] != surplus[:shared]:
            break
        if len(text) > len(surplus):
            surplus, held_ahead = text[shared:], not held_ahead
        else:
            surplus = surplus[shared:]
    kept, resumed = best
    return held[:kept] + prompt[resumed:] if kept > start else prompt


def _unit(engine: Engine, tokens: Sequence[int], begin: int) -> tuple[int, str] | None:
    """The plain tokens from tokens[begin] that spell whole characters, as (end, text): one token, or the few that
    share a character's bytes; None at the end, at a control token, or at bytes no character completes."""
    end = begin
    while end < len(tokens):
        token = tokens[end]
        text = engine.detokenize([token])
        if not text or text != engine.token_text(token):  # a control token reads as text only with special
            return None
        end += 1
        text = engine.detokenize(tokens[begin:end])
        if _REPLACED not in text:
            return end, text
        if end - begin >= UNIT_MOST_TOKENS:
            return None
    return None


def drops_held(engine: Engine, prompt: Sequence[int], other: Sequence[int]) -> bool:
    """Whether computing prompt would drop tokens of the KV cache that other shares with it (prompt shares fewer)."""
    if not engine.is_open:
        return False
    held = engine.kv_token_list
    return common_prefix(held, prompt) < common_prefix(held, other)

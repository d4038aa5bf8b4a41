"""Speculative decoding by prompt lookup under a grammar: a --json-schema, a GBNF grammar and the grammar that waits
for the reasoning's </think>, with penalties and stop strings, give plain decoding's tokens on the real model.

The engine runs a q8_0 KV cache, whose attention rounds a verified batch as one-token steps do at any length, so
every drafted position's logits equal plain decoding's bit for bit and any difference is the sampler's: the grammar's
state at a drafted position holds the accepted tokens before it and none of a rejected draft, the penalties count each
token once, and the reasoning's grammar starts at the position whose token completes </think>.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from localgen.engine import Engine
from localgen.engine import core as engine_core
from localgen.events import Finished
from localgen.json_schema import schema_grammar
from localgen.params import GenerationLimits, Grammar, LoadOptions, SamplingParams
from localgen.speculative import PromptLookup
from tests.conftest import chat_prompt

GREEDY = SamplingParams(temperature=0.0, repeat_penalty=1.0)
PERSON = {"name": "Margaret Thompson", "age": 42, "city": "Springfield", "email": "margaret.thompson@example.com"}
PERSON_SCHEMA = json.dumps({"type": "object", "required": list(PERSON),
                            "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                           "city": {"type": "string"}, "email": {"type": "string"}}})
LINE_GRAMMAR = Grammar('root ::= "{" [^\\n]+', "--grammar")  # one line that opens with a brace: the JSON, copied


def _schema(text: str) -> Grammar:
    """The grammar --json-schema makes of a schema."""
    return Grammar(schema_grammar(text, []), "--json-schema", is_json_schema=True)


@pytest.fixture(scope="module")
def engine(bundled_model: Path) -> Iterator[Engine]:
    # one thread, as in test_speculative: two spin beside another worker's test
    options = LoadOptions(n_ctx=1024, n_threads=1, n_threads_batch=1, flash_attn="on", kv_type="q8_0")
    with Engine(bundled_model, options) as eng:
        yield eng


@pytest.fixture(autouse=True)
def always_draft(monkeypatch: pytest.MonkeyPatch) -> None:
    """Draft six tokens wherever the lookup matches, whatever the measured costs: the drafts and the batches they
    are verified in do not depend on the machine's speed."""
    monkeypatch.setattr(engine_core, "PromptLookup", functools.partial(PromptLookup, fixed_length=6))


def _generate(engine: Engine, prompt: list[int], sampling: SamplingParams, limits: GenerationLimits,
              draft: str) -> tuple[Finished, list[int]]:
    """One generation from an empty KV cache: its Finished event and the tokens the KV cache holds after it."""
    engine.reset()
    done = [event for event in engine.generate(prompt, sampling, limits, draft=draft) if isinstance(event, Finished)]
    return done[0], engine.kv_token_list


def _assert_lookup_is_plain(engine: Engine, prompt: list[int], sampling: SamplingParams,
                            limits: GenerationLimits) -> Finished:
    """Decode with and without drafts; both must give the same text, tokens and end. Returns lookup's Finished."""
    plain, plain_kv = _generate(engine, prompt, sampling, limits, "none")
    fast, fast_kv = _generate(engine, prompt, sampling, limits, "lookup")
    assert (fast.text, fast.finish_reason, fast.usage.completion_tokens) == (
        plain.text, plain.finish_reason, plain.usage.completion_tokens)
    assert fast_kv == plain_kv, "the KV cache must hold exactly the tokens plain decoding left there"
    assert fast.draft is not None
    return fast


def test_greedy_lookup_with_a_json_schema_past_256_cells_is_plain_decoding(engine: Engine) -> None:
    others = "\n".join(json.dumps(dict(PERSON, age=age)) for age in (37, 51, 29, 64, 45))
    prompt = chat_prompt(engine, f"{others}\n{json.dumps(PERSON)}\n\nReturn the last JSON object above unchanged.")
    assert len(prompt) > 256
    fast = _assert_lookup_is_plain(engine, prompt, replace(GREEDY, grammar=_schema(PERSON_SCHEMA)),
                                   GenerationLimits(max_tokens=80))
    assert json.loads(fast.text).keys() == PERSON.keys(), fast.text
    assert fast.draft is not None and fast.draft.accepted > 20, fast.draft
    assert fast.draft.accepted < fast.draft.drafted, "some drafts are rejected, and the grammar must forget them"


@pytest.mark.parametrize(("grammar", "sampling", "max_tokens"), [
    (_schema(PERSON_SCHEMA), SamplingParams(temperature=0.0, repeat_penalty=1.3), 60),  # its one draft past the 40th
    (_schema(PERSON_SCHEMA), SamplingParams(temperature=0.0, frequency_penalty=0.5, presence_penalty=0.5), 60),
    (_schema(PERSON_SCHEMA), SamplingParams(temperature=0.0, repeat_penalty=1.2, repeat_last_n=-1), 40),  # llama.cpp's
    (_schema(PERSON_SCHEMA), SamplingParams(seed=7, frequency_penalty=0.3), 60),
    (LINE_GRAMMAR, SamplingParams(temperature=0.0, repeat_penalty=1.05, presence_penalty=0.1), 60),
], ids=["repeat", "frequency-presence", "whole-context", "sampled", "gbnf"])
def test_lookup_with_a_grammar_and_penalties_samples_as_plain_decoding(engine: Engine, grammar: Grammar,
                                                                       sampling: SamplingParams,
                                                                       max_tokens: int) -> None:
    """Each ends before 60 tokens but the whole-context case, which never closes its JSON: its drafts come in its
    first 40."""
    prompt = chat_prompt(engine, f"Return this JSON unchanged: {json.dumps(PERSON)}")
    fast = _assert_lookup_is_plain(engine, prompt, replace(sampling, grammar=grammar),
                                   GenerationLimits(max_tokens=max_tokens))
    assert fast.draft is not None and fast.draft.drafted > 0, fast.draft


@pytest.mark.parametrize("stop", ['", "', "Springfield"])
def test_lookup_with_a_grammar_stops_where_plain_decoding_does(engine: Engine, stop: str) -> None:
    prompt = chat_prompt(engine, f"Return this JSON unchanged: {json.dumps(PERSON)}")
    limits = GenerationLimits(max_tokens=80, stop=(stop,))
    fast = _assert_lookup_is_plain(engine, prompt, replace(GREEDY, grammar=_schema(PERSON_SCHEMA)), limits)
    assert fast.finish_reason == "stop" and fast.draft is not None and fast.draft.accepted > 0, fast


@pytest.mark.parametrize(("sampling", "max_tokens"), [(GREEDY, 100), (SamplingParams(seed=7, repeat_penalty=1.2), 80)],
                         ids=["greedy", "sampled"])
def test_lookup_with_the_grammar_after_the_reasoning_is_plain_decoding(engine: Engine, sampling: SamplingParams,
                                                                       max_tokens: int) -> None:
    """The prompt opens a <think> block, so the schema applies from the </think> the answer writes (several tokens
    on this model); the example's reasoning and answer copy the JSON, so drafts run across the </think>. The greedy
    answer needs its 90 tokens to close the JSON after the </think>; the sampled one strays from the example's copy
    and writes no </think> in 100, and its first 80 hold 20 drafted tokens accepted and 20 rejected."""
    example = dict(PERSON, name="John Smith", age=37, email="john.smith@example.com")
    text = (f"Q: Return this JSON unchanged: {json.dumps(example)}\nA: <think>I copy the JSON object as it is, every "
            f"field: {json.dumps(example)}</think>{json.dumps(example)}\n"
            f"Q: Return this JSON unchanged: {json.dumps(PERSON)}\nA: <think>")
    prompt = engine.tokenize(text, add_special=False)
    fast = _assert_lookup_is_plain(engine, prompt, replace(sampling, grammar=_schema(PERSON_SCHEMA)),
                                   GenerationLimits(max_tokens=max_tokens))
    assert fast.draft is not None and fast.draft.accepted > 10, fast.draft
    if sampling is GREEDY:
        reasoning, _, answer = fast.text.partition("</think>")
        assert reasoning and json.loads(answer) == PERSON, fast.text

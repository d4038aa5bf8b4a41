"""A grammar or JSON schema with a chat template whose generation prompt opens the <think> block (DeepSeek-R1's
distills, QwQ): the reasoning runs free and the grammar applies from its </think> on, as llama.cpp's server does
where thinking is forced open."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_localgen
from tests.gguf_builders import tiny_family_model

# The bundled model follows the examples: it reasons, closes the block, then answers in JSON.
THINKS_THEN_JSON = """\
{% for m in messages %}{% if m.role == 'user' %}Q: What is 1+1?
A: <think>One plus one is two.</think>{"answer": 2}
Q: What is 2+2?
A: <think>Two plus two is four.</think>{"answer": 4}
Q: {{ m.content }}
A: {% else %}{{ m.content }}
{% endif %}{% endfor %}{% if add_generation_prompt %}<think>{% endif %}
"""
ANSWER_SCHEMA = '{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]}'


def test_a_json_schema_applies_after_the_reasoning_the_prompt_opened(tmp_path: Path) -> None:
    template = tmp_path / "think.jinja"
    template.write_text(THINKS_THEN_JSON)
    ask = ("run", "--chat-template", str(template), "--temperature", "0", "--json-schema", ANSWER_SCHEMA,
           "--hide-thinking", "What is 3+3?")
    record = json.loads(run_localgen(*ask, "--json").out)
    assert record["thinking"] == "Three plus three is six.", "the reasoning is the model's own text"
    assert json.loads(record["text"]) == {"answer": 6} and record["finish_reason"] == "stop", record
    cut = run_localgen(*ask, "-n", "8")
    assert cut.returncode == 1 and cut.out == "", "-n counts the reasoning's tokens too"
    assert "the answer ended inside its <think> reasoning" in cut.err and "not complete JSON" in cut.err


# The examples end the answer inside the reasoning: the bundled model follows them, never writing </think>.
ENDS_IN_REASONING = """\
<|im_start|>user
What is 1+1?<|im_end|>
<|im_start|>assistant
<think>One plus one is two.<|im_end|>
{% for m in messages %}{% if m.role == 'user' %}<|im_start|>user
{{ m.content }}<|im_end|>
{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
<think>{% endif %}
"""


def test_an_answer_the_model_ends_inside_its_reasoning_is_an_error(tmp_path: Path) -> None:
    """Its grammar never began: the prose it wrote is no answer in it, though the model ended it."""
    template = tmp_path / "ends.jinja"
    template.write_text(ENDS_IN_REASONING)
    ask = ("run", "--chat-template", str(template), "--temperature", "0", "--json-schema", ANSWER_SCHEMA,
           "What is 3+3?")
    printed = run_localgen(*ask)
    assert printed.returncode == 1 and printed.out.startswith("Three plus three"), (printed.out, printed.err)
    assert printed.err == ("localgen: error: the model ended the answer inside its <think> reasoning, before the "
                           "grammar of --json-schema began (hint: the grammar applies after the reasoning's </think>, "
                           "which the model never wrote: reword the prompt, or try another --seed with --temperature "
                           "above 0)\n"), printed.err
    hidden = run_localgen(*ask, "--hide-thinking", "--json")
    record = json.loads(hidden.out)
    assert hidden.returncode == 1 and "before the grammar of --json-schema began" in hidden.err, hidden.err
    assert (record["text"], record["finish_reason"], record["grammar_complete"]) == ("", "stop", False), record


def test_a_grammar_waits_for_the_reasoning_where_the_template_opens_it_with_a_control_token(tmp_path: Path) -> None:
    """DeepSeek-R1's template on a tiny model whose <think> and </think> are control tokens: the reasoning the
    random model writes is its own, not the grammar's one answer."""
    from tests.test_reasoning_turns import R1_SPECIALS, R1_TEMPLATE

    model = tiny_family_model(tmp_path / "r1.gguf", specials=R1_SPECIALS, template=R1_TEMPLATE,
                              bos="<｜begin▁of▁sentence｜>", eos="<｜end▁of▁sentence｜>", add_bos=True)
    result = run_localgen("run", "-m", str(model), "--grammar", 'root ::= "x"', "--temperature", "0", "-n", "6",
                          "--hide-thinking", "--json", "hi")
    record = json.loads(result.out)
    assert (record["text"], record["finish_reason"]) == ("", "length") and record["thinking"] not in ("", "x"), record


class ForcedSampling:
    """A tiny model's context whose last logits are set so that greedy sampling picks the token asked for, where a
    grammar allows it; else the one ranked next (FALLBACK)."""

    FALLBACK = "x"

    def __init__(self, model: Path) -> None:
        from localgen.engine.native import lc

        self.lc = lc
        params = lc.llama_model_default_params()
        self.model = lc.llama_model_load_from_file(str(model).encode(), params)
        self.vocab = lc.llama_model_get_vocab(self.model)
        context = lc.llama_context_default_params()
        context.n_ctx, context.n_batch, context.n_threads, context.n_threads_batch = 32, 32, 1, 1
        self.ctx = lc.llama_init_from_model(self.model, context)
        one = (lc.llama_token * 1)(self.tokens("a")[0])
        assert lc.llama_decode(self.ctx, lc.llama_batch_get_one(one, 1)) == 0
        self.logits = lc.llama_get_logits_ith(self.ctx, -1)
        self.n_vocab = lc.llama_vocab_n_tokens(self.vocab)

    def tokens(self, text: str) -> list[int]:
        """The text's tokens, control tokens parsed."""
        data = text.encode()
        ids = (self.lc.llama_token * (len(data) + 4))()
        return list(ids[:self.lc.llama_tokenize(self.vocab, data, len(data), ids, len(ids), False, True)])

    def sample(self, sampler: object, token: int) -> int:
        """What the sampler gives where the model's logits favour token, then FALLBACK."""
        for other in range(self.n_vocab):
            self.logits[other] = 0.0
        self.logits[self.tokens(self.FALLBACK)[0]] = 50.0
        self.logits[token] = 100.0
        return sampler.sample(self.ctx, -1)  # type: ignore[attr-defined]

    @contextlib.contextmanager
    def grammar_sampler(self, grammar: str) -> Iterator[object]:
        """A greedy sampler whose grammar applies after the reasoning the prompt opened, as a run builds it."""
        from localgen.engine.sampling import build_sampler
        from localgen.params import Grammar, SamplingParams

        sampling = SamplingParams(temperature=0, repeat_penalty=1.0, grammar=Grammar(text=grammar, source="--grammar"))
        sampler = build_sampler(self.vocab, sampling, [], 32, reasoning_open=True)
        try:
            yield sampler
        finally:
            sampler.free()

    def __enter__(self) -> ForcedSampling:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Free the context and the model."""
        self.lc.llama_free(self.ctx)
        self.lc.llama_model_free(self.model)


@pytest.mark.parametrize("close_is_one_token", [True, False])
def test_a_long_reasoning_costs_the_lazy_grammar_linear_work_and_the_grammar_applies_after_it(
        tmp_path: Path, close_is_one_token: bool) -> None:
    """llama.cpp's lazy sampler matched its </think> pattern against all the reasoning so far after every token:
    3,000 tokens of reasoning took minutes; they take well under a second."""
    from tests.test_reasoning_turns import R1_SPECIALS, R1_TEMPLATE

    specials = R1_SPECIALS if close_is_one_token else ("<|endoftext|>",)
    model = tiny_family_model(tmp_path / "m.gguf", specials=specials, template=R1_TEMPLATE, eos=specials[-1])
    with ForcedSampling(model) as forced, forced.grammar_sampler('root ::= "x"') as sampler:
        assert (len(forced.tokens("</think>")) == 1) == close_is_one_token
        word = forced.tokens(" the")[0]
        started = time.perf_counter()
        reasoning = [forced.sample(sampler, word) for _ in range(3000)]
        assert time.perf_counter() - started < 10, "linear work: 3,000 tokens took minutes before"
        assert set(reasoning) == {word}, "the reasoning runs free"
        _applies_after(forced, sampler, forced.tokens("</think>\n"))


@pytest.mark.parametrize(("pieces", "grammar"), [
    (["</think", ">,"], 'root ::= ",x"'),  # the grammar takes the ',' the last token carries: it goes on from it
    (["</think", ">,"], 'root ::= "x"'),  # it does not: the grammar applies from the next token
    (["</", "think", ">',"], 'root ::= "x"'),  # the last token carries two bytes more after the '>'
    (["<", "/", "think", ">,"], 'root ::= "x"'),  # </think> in four tokens
], ids=["taken", "rejected", "two-more-bytes", "four-tokens"])
def test_a_reasoning_end_whose_last_token_carries_more_text_starts_the_grammar(bundled_model: Path, pieces: list[str],
                                                                               grammar: str) -> None:
    """The bundled model's '>,' ends </think> and starts the answer: a grammar that takes ',' goes on from it; one that
    does not applies from the next token, where llama.cpp aborted the process. A last token with two or more bytes
    after its '>', or a </think> in four tokens, starts it too, where the tokens that opened it were let go before the
    last one came and the answer went on unconstrained."""
    with ForcedSampling(bundled_model) as forced, forced.grammar_sampler(grammar) as sampler:
        assert len(forced.tokens(pieces[-1])) == 1, "the last piece is one token of the bundled model"
        _applies_after(forced, sampler, [token for piece in pieces for token in forced.tokens(piece)])


def _applies_after(forced: ForcedSampling, sampler: object, reasoning_end: list[int]) -> None:
    """Sample the tokens that end the reasoning, then check the grammar (root ::= "x" or ",x") turns a y into its x."""
    for token in reasoning_end:
        assert forced.sample(sampler, token) == token
    assert forced.sample(sampler, forced.tokens("y")[0]) == forced.tokens("x")[0], "the grammar applies"

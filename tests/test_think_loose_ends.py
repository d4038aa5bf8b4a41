"""Reasoning at its edges: text glued after a </think> that a grammar rejects, bytes that are no UTF-8 around it, the
variable a chat template only sets (no think switch), the origin of a models.toml template a --think is refused for,
the think switch as run --json reports it, a --think without its value, harmony markup an answer ends in."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from localgen.think_switch import think_switch
from localgen.thinking import ThinkingSplitter
from tests.conftest import REPO_ROOT, run_localgen, user_registry
from tests.gguf_builders import (
    TINY_MERGES,
    TINY_VOCAB,
    _write_tiny_weights,
    copy_with_metadata,
    tiny_family_model,
    tiny_model,
)
from tests.test_reasoning_turns import R1_TEMPLATE
from tests.test_repl import Chat, _shown_since
from tests.test_repl_harmony import HARMONY_TEMPLATE
from tests.test_think_switch import DEEPSEEK_V31, GPT_OSS, QWEN3

# The bundled model follows the examples: it reasons, closes the block and glues a ',' to its '>' (one token, '>,'),
# then answers in JSON.
GLUES_AFTER_THINK = """\
{% for m in messages %}{% if m.role == 'user' %}Q: What is 1+1?
A: <think>One plus one is two.</think>, {"answer": 2}
Q: What is 2+2?
A: <think>Two plus two is four.</think>, {"answer": 4}
Q: {{ m.content }}
A: {% else %}{{ m.content }}
{% endif %}{% endfor %}{% if add_generation_prompt %}<think>{% endif %}
"""
ANSWER_SCHEMA = '{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]}'


def test_text_glued_after_the_reasoning_s_end_that_the_json_schema_rejects_is_left_out_of_the_answer(
        tmp_path: Path) -> None:
    """llama.cpp would abort on it (llama-server fails the request): the grammar applies from the next token, and
    the answer is only what it took, where the ',' stayed in front of the JSON."""
    template = tmp_path / "glues.jinja"
    template.write_text(GLUES_AFTER_THINK)
    ask = ("run", "--chat-template", str(template), "--temperature", "0", "-n", "40", "--json-schema", ANSWER_SCHEMA,
           "--json", "What is 3+3?")
    free = run_localgen(*ask[:5], "-n", "10", *ask[9:])  # '…six.</think>,{"' of 40 the schema's answer may take
    assert "</think>," in json.loads(free.out)["text"], "without the schema the model glues ',' to its </think>"
    hidden = json.loads(run_localgen(*ask, "--hide-thinking").out)
    assert (hidden["thinking"], json.loads(hidden["text"])) == ("Three plus three is six.", {"answer": 6}), hidden
    assert hidden["text"].startswith("{"), hidden
    shown = json.loads(run_localgen(*ask).out)
    assert shown["text"] == "Three plus three is six.</think>" + hidden["text"], shown


# Four like examples: the answer copies the prompt, so --draft lookup drafts the '>,' after the reasoning and what
# follows it in one batch.
COPIES = ("{% for m in messages %}{% if m.role == 'user' %}"
          + 'Q: What is 2+2?\nA: <think>Two plus two is four.</think>, {"answer": 4}\n' * 4
          + "Q: {{ m.content }}\nA: {% else %}{{ m.content }}\n{% endif %}{% endfor %}"
          "{% if add_generation_prompt %}<think>{% endif %}\n")


@pytest.mark.parametrize("hide", [False, True])
def test_a_lookup_draft_accepted_across_the_cut_leaves_the_rejected_text_out(tmp_path: Path, hide: bool) -> None:
    """The batch stops at the token the grammar cut ('>,', its ',' rejected): where it went on past it, the cut token
    was not the last sampled, and the ',' stayed in the answer."""
    template = tmp_path / "copies.jinja"
    template.write_text(COPIES)
    ask = ["run", "--chat-template", str(template), "--temperature", "0", "-n", "40", "--json-schema", ANSWER_SCHEMA,
           "--json", "--draft", "lookup", *(["--hide-thinking"] if hide else []), "What is 2+2?"]
    said = json.loads(run_localgen(*ask).out)
    assert said["draft"]["accepted"] > 0, said
    assert said["text"].endswith('</think>{"answer": 4}' if not hide else '{"answer": 4}'), said
    assert "," not in said["text"], said


# Tokens of a byte-level vocabulary that carry bytes no UTF-8 text has: 'ÿ' is the byte 0xFF, 'À' 0xC0 (neither
# starts a character); the model's own logits are set so that it picks them.
ODD_TOKENS = ("ÿ", ">ÿ", ">À", "ÿ</think>,", "ÿ</think>x", "ÿ</think>ÿ", ">,", "</think")
FORCED = """\
import sys
from pathlib import Path
from test_reasoning_grammar import ForcedSampling

vocab, pieces = sys.argv[2].split("\\x1f"), sys.argv[3].split("\\x1f")
with ForcedSampling(Path(sys.argv[1])) as forced, forced.grammar_sampler('root ::= "x"') as sampler:
    for piece in pieces:
        token = vocab.index(piece) if piece in vocab else forced.tokens(piece)[0]
        assert forced.sample(sampler, token) == token, piece
    cut = sampler.cut  # the last token's
    after = forced.sample(sampler, forced.tokens("y")[0])
    ends = forced.lc.llama_vocab_is_eog(forced.vocab, after)
    print("x" if after == forced.tokens("x")[0] else "end" if ends else "other", False if cut is None else cut)
"""


@pytest.fixture(scope="module")
def odd_bytes_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A tiny random byte-level model with ODD_TOKENS, its </think> of several tokens, and its vocabulary."""
    import gguf
    import numpy as np

    vocab = [token for token in TINY_VOCAB if not token.startswith("<|")] + [*ODD_TOKENS, "<|endoftext|>"]
    path = tmp_path_factory.mktemp("odd") / "odd.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("odd")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    for add, value in ((writer.add_context_length, 512), (writer.add_embedding_length, 64),
                       (writer.add_block_count, 2), (writer.add_feed_forward_length, 128),
                       (writer.add_head_count, 4), (writer.add_head_count_kv, 2),
                       (writer.add_rope_dimension_count, 16), (writer.add_vocab_size, len(vocab))):
        add(value)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(vocab)
    writer.add_token_types([3 if token.startswith("<|") else 1 for token in vocab])
    writer.add_token_merges(TINY_MERGES)
    writer.add_eos_token_id(vocab.index("<|endoftext|>"))
    writer.add_add_bos_token(False)
    _write_tiny_weights(writer, np.random.default_rng(0), n_vocab=len(vocab), n_embd=64, n_head=4, n_head_kv=2,
                        n_layer=2, n_ff=128)
    return path, vocab


@pytest.mark.parametrize(("pieces", "kept", "then"), [
    (["</think", ">ÿ"], 1, "x"),  # a byte no character starts with, at the end of the token that ends </think>
    (["</think", ">À"], 1, "x"),
    (["ÿ", "</think", ">,"], 1, "x"),  # in a token before: the grammar reads from </think> on
    (["ÿ</think>,"], 9, "x"),  # before </think> in its own token, which no grammar can spell: llama.cpp aborted
    (["ÿ</think>x"], False, "end"),  # there, with text after that the grammar takes: kept, not written twice
    (["ÿ</think>ÿ"], 9, "x"),  # and no UTF-8 after it either
    (["ÿ", "</think", ">"], False, "x"),  # in a token before, nothing after: llama.cpp's pattern reads past it
], ids=["ff-after", "c0-after", "ff-before", "ff-in-token", "ff-in-token-taken", "ff-in-token-ff-after",
        "ff-before-nothing-after"])
def test_bytes_that_are_no_utf8_around_the_reasoning_s_end_start_the_grammar_and_never_abort(
        odd_bytes_model: tuple[Path, list[str]], pieces: list[str], kept: int | bool, then: str) -> None:
    """The tail watch finds </think> in bytes; text after it that the grammar cannot take (read from the </think> on,
    as llama.cpp reads it, whatever bytes come before) is left out (its token's first `kept` bytes are kept), and the
    grammar applies from the next token (`then`: what it gives next), where llama.cpp aborted the process
    ('Unexpected empty grammar stack'); text it takes is kept, the grammar going on after it."""
    model, vocab = odd_bytes_model
    script = textwrap.dedent(FORCED)
    result = subprocess.run([sys.executable, "-c", script, str(model), "\x1f".join(vocab), "\x1f".join(pieces)],
                            capture_output=True, text=True, timeout=60, cwd=REPO_ROOT / "tests",
                            env={"PYTHONPATH": f"{REPO_ROOT}:{REPO_ROOT / 'tests'}", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr[-500:]
    assert result.stdout.split() == [then, str(kept)], result.stdout


SMOLLM3_DEFAULT = ("{%- if enable_thinking is not defined -%}{%- set enable_thinking = true -%}{%- endif -%}"
                   "{%- if enable_thinking -%}{%- set reasoning_mode = '/think' -%}{%- else -%}"
                   "{%- set reasoning_mode = '/no_think' -%}{%- endif -%}"
                   "{{ 'Reasoning Mode: ' + reasoning_mode }}")  # SmolLM3's: set where not given, then read
ONLY_SETS = ("{% for m in messages %}{% if m.role == 'system' %}{% set enable_thinking = false %}{% endif %}"
             "{{ m.content }}{% endfor %}")  # set in an {% if %}, never read: no switch


@pytest.mark.parametrize(("template", "switch"), [
    (QWEN3, "enable_thinking"), (SMOLLM3_DEFAULT, "enable_thinking"), (DEEPSEEK_V31, "thinking"),
    (GPT_OSS, "reasoning_effort"), (R1_TEMPLATE, None), (ONLY_SETS, None),
    ("{% if x %}{% set thinking = true %}{% endif %}{{ 'on' if thinking }}", "thinking"),  # read: the context's
])
def test_the_think_switch_is_a_variable_the_template_reads_not_one_it_only_sets(template: str,
                                                                                switch: str | None) -> None:
    assert think_switch(template) == switch


def test_think_is_refused_for_a_template_that_only_sets_the_variable(tmp_path: Path) -> None:
    template = tmp_path / "sets.jinja"
    template.write_text(ONLY_SETS)
    result = run_localgen("run", "--chat-template", str(template), "--think", "off", "hi", timeout=60)
    assert (result.returncode, result.out) == (2, "")
    assert f"{template}: --think off: this model's chat template has no switch for thinking" in result.err


def test_a_models_toml_template_refused_for_think_is_named_by_its_entry(home: Path, bundled_model: Path) -> None:
    registry = user_registry(home, f'[models.plain]\npath = "{bundled_model}"\ntemplate = "{{{{ messages }}}}"\n'
                                   f'[models.broken]\npath = "{bundled_model}"\ntemplate = "{{{{ messages }}"\n')
    result = run_localgen("run", "-m", "plain", "--think", "off", "hi", env={"LOCALGEN_HOME": str(home)})
    assert (result.returncode, result.out) == (2, "")
    assert result.err.startswith(f"localgen: error: plain ([models.plain] in {registry}): --think off: this model's "
                                 "chat template has no switch for thinking"), result.err
    result = run_localgen("run", "-m", "broken", "--think", "on", "hi", env={"LOCALGEN_HOME": str(home)})
    assert result.returncode == 1 and result.err.startswith(  # as when it loads: its syntax, not the switch it lacks
        f"localgen: error: broken ([models.broken] in {registry}): the chat template is not valid Jinja"), result.err


def test_a_model_s_own_template_that_is_not_valid_jinja_is_refused_for_that_before_think(
        tmp_path: Path, home: Path) -> None:
    """As without --think, and as a broken --chat-template file or models.toml entry: its syntax, not the switch it
    lacks."""
    broken = copy_with_metadata(tiny_model(tmp_path / "tiny.gguf"), tmp_path / "broken.gguf",
                                set_values={"tokenizer.chat_template": "{{ messages }"})
    env = {"LOCALGEN_HOME": str(home)}
    plain, think = (run_localgen("run", "-m", str(broken), "-n", "2", *given, "hi", env=env, timeout=60)
                    for given in ([], ["--think", "on"]))
    said = f"localgen: error: {tmp_path / 'broken.gguf'}: the chat template is not valid Jinja"
    assert (plain.returncode, plain.out) == (1, "") and plain.err.startswith(said), plain.err
    assert (think.returncode, think.out, think.err) == (plain.returncode, "", plain.err)


@pytest.fixture(scope="module")
def qwen3_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model carrying Qwen3's template, its switch enable_thinking."""
    folder = tmp_path_factory.mktemp("qwen3")
    return copy_with_metadata(tiny_model(folder / "tiny.gguf"), folder / "qwen3.gguf",
                              set_values={"tokenizer.chat_template": QWEN3})


def test_run_json_says_how_the_think_switch_was_set(qwen3_model: Path, home: Path) -> None:
    env = {"LOCALGEN_HOME": str(home)}
    ask = ("run", "-m", str(qwen3_model), "-n", "2", "--json")
    records = [json.loads(run_localgen(*ask, *given, "hi", env=env, timeout=60).out)
               for given in ([], ["--think=false"], ["--think", "on", "--conversation", "c"])]
    assert [record.get("think") for record in records] == [None, "off", "on"]
    saved = home / "data" / "conversations" / "c.json"  # as a chat's /think off saves it
    saved.write_text(json.dumps(json.loads(saved.read_text()) | {"settings": {"think": "off"}}))
    record = json.loads(run_localgen(*ask, "--conversation", "c", "hi", env=env, timeout=60).out)
    assert record["think"] == "off", "the continued conversation's"


@pytest.mark.parametrize(("words", "said"), [
    (("run", "--think", "hi"), "--think takes on, off, low, medium or high, not 'hi' (hint: --think takes a value, "
     "where Ollama's alone turns thinking on: `localgen run --think on hi`)"),
    (("run", "hi", "--think"), "option '--think' requires an argument (hint: give --think one of on, off, low, "
     "medium, high: `localgen run hi --think on`)"),
    (("chat", "--think"), "option '--think' requires an argument (hint: give --think one of on, off, low, medium, "
     "high: `localgen chat --think on`)"),
    (("run", "--think", "-n", "5", "hi"), "--think needs a value (on|off|low|medium|high), and the word after it is "
     "the option -n (hint: give --think one of on, off, low, medium, high: `localgen run --think on -n 5 hi`)"),
])
def test_a_bare_think_is_refused_in_one_line_naming_its_values(words: tuple[str, ...], said: str) -> None:
    result = run_localgen(*words, timeout=60)
    assert (result.returncode, result.out, result.err) == (2, "", f"localgen: error: {said}\n")


VALUES_HINT = "--think off answers without thinking, on as the model's chat template has it"


@pytest.mark.parametrize(("words", "stdin", "hint"), [
    (("run", "-m", "M", "-n", "5", "--json-schema", '{"type":"object"}', "--think", "what is 2+2"), None,
     "--think takes a value, where Ollama's alone turns thinking on: `localgen run -m M -n 5 --json-schema "
     "'{\"type\":\"object\"}' --think on 'what is 2+2'`"),  # every option typed kept
    (("run", "--think", "hgh"), b"hi", VALUES_HINT),  # the prompt comes from stdin: a typo
    (("run", "--think", "hgh", "-f", "notes.txt"), None, VALUES_HINT),
    (("run", "--think=hi"), None, VALUES_HINT),  # no bare --think
], ids=["options-kept", "stdin", "file", "equals"])
def test_the_prompt_taken_for_a_bare_think_s_value_is_hinted_only_where_no_other_prompt_came(
        words: tuple[str, ...], stdin: bytes | None, hint: str) -> None:
    result = run_localgen(*words, stdin=stdin, timeout=60)
    assert (result.returncode, result.out) == (2, "")
    assert result.err.endswith(f"(hint: {hint})\n"), result.err


@pytest.mark.parametrize(("limit", "reasoning"), [
    ("10", ""),  # cut inside the first header: '<|channel|>analysis<|message|'
    ("19", "Three plus three is six."),  # cut inside the analysis message's end: '…six.<|end'
    ("30", "Three plus three is six."),  # cut inside the next header: '<|end|><|start|>assistant<|channel'
])
def test_a_chat_shows_a_cut_harmony_answer_without_the_markup_it_was_cut_in(home: Path, tmp_path: Path, limit: str,
                                                                            reasoning: str) -> None:
    """Markup that -n cut short is dropped, as run --hide-thinking drops it (and llama-server's parser holds back a
    header that never reached its <|message|> where a limit ended the answer), where the chat showed it: the first
    header as the answer, '<|end' dimmed with the reasoning."""
    template = tmp_path / "harmony.jinja"
    template.write_text(HARMONY_TEMPLATE)
    chat = Chat(home, "--chat-template", str(template), "--temperature", "0", "-n", limit, "--no-markdown")
    mark = len(chat.transcript.getvalue())
    chat.ask("What is 3+3?")
    dimmed, text = _shown_since(chat, mark)
    assert dimmed.partition("[stopped at the limit")[0] == reasoning and "<|" not in text, (dimmed, text)
    assert chat.quit() == 0


# The bundled model follows the examples: ' <think>Three plus three is six.</think>' as ' <', 'think', '>', ... '.</'
OPENS_ITS_THINKING = """\
{% for m in messages %}{% if m.role == 'user' %}Q: What is 1+1?
A: <think>One plus one is two.</think> 2
Q: What is 2+2?
A: <think>Two plus two is four.</think> 4
Q: What is 4+4?
A: <think>Four plus four is eight.</think> 8
Q: {{ m.content }}
A:{% else %}{{ m.content }}
{% endif %}{% endfor %}"""


@pytest.mark.parametrize(("limit", "reasoning", "answer", "in_chat"), [
    ("1", "", "<", True),  # no tag yet: text, as plain run shows it
    ("2", "", "<think", False),  # as '<': the chat flushes the same splitter as run (cut_off)
    ("10", "Three plus three is six.", "", True),  # '</' began the reasoning's end tag: markup, cut off
])
def test_a_chat_cut_off_in_what_only_may_be_markup_shows_it_as_run_does(home: Path, tmp_path: Path, limit: str,
                                                                       reasoning: str, answer: str,
                                                                       in_chat: bool) -> None:
    """A '<' or a '<th' an answer was cut off in may be text: shown, as plain run shows it (and saved), where the
    chat and run --hide-thinking showed nothing; only a tag begun past its '<' ('</', '<|end') is markup, left
    out. A chat checks one cut of each kind: '<think' is held back and cut as '<' is."""
    template = tmp_path / "opens.jinja"
    template.write_text(OPENS_ITS_THINKING)
    ask = ("--chat-template", str(template), "--temperature", "0", "-n", limit)
    plain = run_localgen("run", *ask, "What is 3+3?", env={"LOCALGEN_HOME": str(home)})
    assert plain.out.strip().endswith(answer or "</"), plain.out
    hidden = json.loads(run_localgen("run", *ask, "--hide-thinking", "--json", "What is 3+3?",
                                     env={"LOCALGEN_HOME": str(home)}).out)
    assert (hidden["thinking"], hidden["text"].strip()) == (reasoning, answer), hidden
    if not in_chat:
        return
    chat = Chat(home, *ask, "--no-markdown")
    mark = len(chat.transcript.getvalue())
    saved = chat.ask("What is 3+3?")["turns"][0]["answer"]
    dimmed, text = _shown_since(chat, mark)
    shown = text.rpartition("What is 3+3?")[2].partition("[stopped")[0].replace(reasoning, "", 1).strip()
    assert (dimmed.partition("[stopped")[0].strip(), shown, saved) == (reasoning, answer, plain.out[:-1]), text
    assert chat.quit() == 0


@pytest.mark.parametrize(("text", "inside", "segments"), [
    ("<th", False, [(False, "<th")]),
    ("so a <", True, [(True, "so a "), (True, "<")]),
    ("six.</thi", True, [(True, "six.")]),
    ("<|channel|>analysis<|message|>so a <", False, [(True, "so a "), (True, "<")]),
    ("<|channel|>analysis<|message|>six.<|end", False, [(True, "six.")]),
    ("<|channel|>analysis<|mess", False, []),
])
def test_text_held_back_at_a_cut_is_dropped_only_where_it_began_markup(text: str, inside: bool,
                                                                       segments: list[tuple[bool, str]]) -> None:
    splitter = ThinkingSplitter(inside=inside)
    assert splitter.feed(text) + splitter.flush(cut=True) == segments


ENDS_IN_A_HEADER = "<|channel|>final<|message|>Hello!<|end|><|start|>assistant<|channel|>fin"


@pytest.mark.parametrize("limit", [None, "33"], ids=["model-ended", "cut-by-n"])
def test_a_header_after_the_final_message_that_never_reached_its_message_is_left_out(
        tmp_path_factory: pytest.TempPathFactory, limit: str | None) -> None:
    """GPT-OSS's tokens, forced: the answer is the final channel's text whether the model ended inside the next
    header or -n cut it there (llama-server's parser holds back such a header where a limit ends the answer)."""
    from tests.test_gpt_oss import GPT_OSS_SPECIALS, GPT_OSS_TEMPLATE, GREEDY

    model = tiny_family_model(tmp_path_factory.mktemp("gpt-oss") / "gpt-oss.gguf", specials=GPT_OSS_SPECIALS,
                              template=GPT_OSS_TEMPLATE, bos="<|startoftext|>", eos="<|return|>")
    ask = ("run", "-m", str(model), "--grammar", f'root ::= "{ENDS_IN_A_HEADER}"', *GREEDY, "--json")
    given = ["-n", limit] if limit else []
    raw = json.loads(run_localgen(*ask, *given, "hi").out)
    written = ENDS_IN_A_HEADER[:-1] if limit else ENDS_IN_A_HEADER  # one letter a token, the tiny model's
    assert (raw["text"], raw["finish_reason"]) == (written, "length" if limit else "stop"), raw
    record = json.loads(run_localgen(*ask, *given, "--hide-thinking", "hi").out)
    assert (record["text"], record["thinking"]) == ("Hello!", ""), record

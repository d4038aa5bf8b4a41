"""What the chat writes where text is cut or typed part way: an answer cut off inside a character."""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from localgen.engine import Engine
from localgen.events import Finished, TextChunk
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
from tests.conftest import chat_prompt, run_localgen
from tests.test_repl import Chat

GREEDY = SamplingParams(temperature=0.0)  # with the default repeat penalty: a list of characters, not the words
MANY_BYTES = "Write the word 'hello' in Chinese, Japanese and Korean characters only."


@pytest.fixture(scope="module")
def engine(bundled_model: Path) -> Iterator[Engine]:
    with Engine(bundled_model, LoadOptions(n_ctx=1024, n_threads=1, n_threads_batch=1, n_batch=64)) as eng:
        yield eng


def _whole_characters(pieces: list[bytes]) -> str:
    """The text of these bytes up to the last whole character (bytes that are only a character's start left out)."""
    return codecs.getincrementaldecoder("utf-8")(errors="replace").decode(b"".join(pieces))


def _cut_inside_a_character(engine: Engine, prompt: list[int]) -> tuple[int, list[int], list[bytes]]:
    """How many tokens of the greedy answer end inside a character, the answer's tokens and their bytes."""
    engine.reset()
    _answer(engine, prompt, max_tokens=24)
    tokens = engine.kv_token_list[len(prompt):]
    pieces = [engine._vocab.piece(token) for token in tokens]
    cut = next(n for n in range(1, len(pieces)) if _whole_characters(pieces[:n]) != b"".join(pieces[:n]).decode(
        "utf-8", "replace"))
    return cut, tokens, pieces


def _answer(engine: Engine, prompt: list[int], max_tokens: int) -> tuple[str, Finished]:
    """The streamed text and the end of a greedy answer."""
    chunks, done = [], None
    for event in engine.generate(prompt, GREEDY, GenerationLimits(max_tokens=max_tokens)):
        if isinstance(event, TextChunk):
            chunks.append(event.text)
        elif isinstance(event, Finished):
            done = event
    assert done is not None
    return "".join(chunks), done


def test_an_answer_the_token_limit_cuts_inside_a_character_ends_at_the_last_whole_one(engine: Engine) -> None:
    """The start of a character the limit cut off is no character the model wrote: it is left out, not U+FFFD; the
    KV cache keeps the model's tokens."""
    prompt = chat_prompt(engine, MANY_BYTES)
    cut, tokens, pieces = _cut_inside_a_character(engine, prompt)
    engine.reset()
    streamed, done = _answer(engine, prompt, max_tokens=cut)
    assert streamed == done.text == _whole_characters(pieces[:cut]) and "\ufffd" not in done.text
    assert done.finish_reason == "length"
    assert engine.kv_token_list[len(prompt):] == tokens[:cut - 1], "the cache holds the tokens fed (the last is not)"


def test_an_answer_stopped_inside_a_character_ends_at_the_last_whole_one(engine: Engine,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C between a character's tokens leaves its start out too."""
    prompt = chat_prompt(engine, MANY_BYTES)
    cut, _, pieces = _cut_inside_a_character(engine, prompt)
    real, read = engine._vocab.piece, []

    def piece_then_stop(token: int, **options: bool) -> bytes:
        read.append(token)
        if len(read) == cut:  # the stop comes as the cut token is read: the loop ends before the next
            engine.request_stop()
        return real(token, **options)

    monkeypatch.setattr(engine._vocab, "piece", piece_then_stop)
    engine.reset()
    streamed, done = _answer(engine, prompt, max_tokens=24)
    assert done.finish_reason == "interrupted" and done.usage.completion_tokens == cut
    assert streamed == done.text == _whole_characters(pieces[:cut]) and "\ufffd" not in done.text


def test_run_cut_inside_an_emoji_writes_the_whole_characters_alone(tmp_path: Path) -> None:
    """`run -n 5` on a prompt whose answer's fifth token is an emoji's first bytes: stdout and --json hold the
    characters before it, not U+FFFD."""
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    plain = run_localgen("run", "-n", "5", "--temperature", "0", "from chat A", env=env)
    assert plain.returncode == 0 and plain.out == "\U0001f31f\n", plain.out
    answer = run_localgen("run", "-n", "5", "--temperature", "0", "--json", "from chat A", env=env)
    shown = json.loads(answer.out)
    assert shown["text"] == "\U0001f31f" and shown["finish_reason"] == "length", shown


def test_a_chat_answer_cut_inside_an_emoji_is_shown_and_saved_without_u_fffd(tmp_path: Path) -> None:
    chat = Chat(tmp_path / "home", "--temperature", "0", "-n", "5")
    try:
        state = chat.ask("from chat A")
        assert state["turns"][-1]["answer"] == "\U0001f31f"
        assert "\ufffd" not in chat.transcript.getvalue() and "\U0001f31f" in chat.transcript.getvalue()
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


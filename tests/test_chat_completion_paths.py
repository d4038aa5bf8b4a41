"""What the chat writes where text is cut or typed part way: an answer cut off inside a character, and the path
Tab completes after /file in the quoting typed."""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from localgen.engine import Engine
from localgen.events import Finished, TextChunk
from localgen.params import GenerationLimits, LoadOptions, SamplingParams
from localgen.repl_input import SlashCompleter
from localgen.shell_words import one_argument
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


def test_an_answer_the_context_s_end_cuts_inside_a_character_ends_at_the_last_whole_one(engine: Engine,
                                                                                       bundled_model: Path) -> None:
    prompt = chat_prompt(engine, MANY_BYTES)
    cut, _, pieces = _cut_inside_a_character(engine, prompt)
    options = LoadOptions(n_ctx=len(prompt) + cut - 1, n_threads=1, n_threads_batch=1, n_batch=64)
    with Engine(bundled_model, options) as small:  # full once the cut token is sampled (the last is not fed)
        streamed, done = _answer(small, prompt, max_tokens=24)
    assert done.finish_reason == "context" and done.usage.completion_tokens == cut
    assert streamed == done.text == _whole_characters(pieces[:cut]) and "\ufffd" not in done.text


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


SPECIAL = "it's $5 (a).txt"


@pytest.fixture
def notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with a file whose name has a blank, one with a shell's specials, and a folder with a blank."""
    folder = tmp_path / "files"
    (folder / "sub dir").mkdir(parents=True)
    (folder / "my notes.txt").write_text("The secret word is plum.\n")
    (folder / SPECIAL).write_text("Five.\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NOTES", str(folder))
    return folder


def _completions(line: str) -> list[str]:
    """The line as each completion Tab offers at its end writes it."""
    found = SlashCompleter(lambda: True).get_completions(Document(line), CompleteEvent(completion_requested=True))
    return [line[:len(line) + completion.start_position] + completion.text for completion in found]


@pytest.mark.parametrize(("typed", "completed"), [
    ("/file {}/my", "/file {}/my\\ notes.txt"),  # the rest escaped, as a shell's Tab writes it
    ("/file {}/my\\ ", "/file {}/my\\ notes.txt"),
    ("/file {}/my\\ n", "/file {}/my\\ notes.txt"),
    ("/file {}/my\\", "/file {}/my\\ notes.txt"),  # the backslash typed escapes the blank to come
    ("/file {}/my n", "/file {}/my notes.txt"),  # /file reads a blank typed as it is
    ('/file "{}/my ', '/file "{}/my notes.txt"'),  # plain inside the quote, closed after the file
    ("/file '{}/my ", "/file '{}/my notes.txt'"),
    ('/file "{}/"my\\ ', '/file "{}/"my\\ notes.txt'),
    ("/file {}/it", "/file {}/it\\'s\\ \\$5\\ \\(a\\).txt"),
    ('/file "{}/it', "/file \"{}/it's $5 (a).txt\""),
    ("/file '{}/it", "/file '{}/it'\\''s $5 (a).txt'"),
    ("/file {}/su", "/file {}/sub\\ dir/"),  # a folder: its slash, to go on inside it
    ('/file "{}/su', '/file "{}/sub dir/'),
    ('/model "{}/my ', '/model "{}/my notes.txt"'),
])
def test_tab_reads_a_path_typed_in_a_shell_s_quoting_and_writes_the_rest_in_it(notes: Path, typed: str,
                                                                               completed: str) -> None:
    assert _completions(typed.format(notes)) == [completed.format(notes)]
    argument = completed.format(notes).split(" ", 1)[1]
    if not argument.endswith("/"):
        assert Path(one_argument(argument, "/file PATH")).is_file(), "what /file reads names the file"


def test_tab_expands_a_home_and_a_variable_as_file_does_and_keeps_them_as_typed(notes: Path) -> None:
    assert _completions("/file ~/files/my\\ n") == ["/file ~/files/my\\ notes.txt"]
    assert _completions('/file "~/files/my') == ['/file "~/files/my notes.txt"'], "as /file reads ~ quoted"
    assert _completions("/file $NOTES/my\\ n") == ["/file $NOTES/my\\ notes.txt"]
    assert _completions('/file "${NOTES}/my ') == ['/file "${NOTES}/my notes.txt"']


def test_tab_completes_nothing_after_a_quoted_path_and_another_word(notes: Path) -> None:
    """/file takes one path: a second word after a quoted one is refused, and Tab writes nothing there."""
    assert _completions(f'/file "{notes}/my notes.txt" {notes}/my') == []
    assert _completions(f'/file "{notes}/my notes.txt" ') == []


def test_tab_in_the_chat_completes_an_escaped_and_a_quoted_name_that_file_then_attaches(notes: Path) -> None:
    chat = Chat(notes.parent / "home", "--temperature", "0", "--no-markdown", "-n", "2", cwd=notes)
    try:
        chat.tab_completed("/file my\\ n", ["otes.txt"], "attached my notes.txt (25 characters) to the next message")
        chat.tab_completed('/file "it', ["'s $5 (a).txt\""],
                           "attached it's $5 (a).txt (6 characters) to the next message")
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


@pytest.mark.parametrize(("offline", "typed", "offered"), [
    (True, "/model smollm2-135m:", ["/model smollm2-135m:Q4_1 "]), (False, "/model SmolLM2-135M:q", [
        "/model smollm2-135m:Q4_1 "]), (True, "/model qwen2.5-0.5b:", []),
    (False, "/model qwen2.5-0.5b:", ["/model qwen2.5-0.5b:Q4_K_M "])])
def test_model_completes_the_quant_of_a_registry_model_after_its_colon(home: Path, offline: bool, typed: str,
                                                                     offered: list[str]) -> None:
    """/model smollm2-135m: Tab offered nothing, though the bundled model's Q4_1 is on disk."""
    found = SlashCompleter(lambda: offline).get_completions(Document(typed), CompleteEvent(completion_requested=True))
    assert [typed[:len(typed) + completion.start_position] + completion.text for completion in found] == offered

"""Conversation state, the context-dropping policy, slash-command parsing and <think> splitting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localgen.chat import Message
from localgen.conversation import Conversation, Turn
from localgen.conversation_store import load_conversation, save_conversation
from localgen.errors import ContextOverflowError, LocalgenError, UsageError
from localgen.events import TextChunk
from localgen.repl_input import COMMANDS_OFFERED, SlashCommand, block_is_open, continuation, parse_command, unwrap_block
from localgen.thinking import ThinkingSplitter, prompt_opens_thinking, without_thinking


def _count(messages: list[Message]) -> int:
    """A fake tokenizer: one token per character."""
    return sum(len(m.content) for m in messages)


def test_old_exchanges_leave_the_context_but_stay_in_the_conversation() -> None:
    conv = Conversation(name="c", system="S" * 10,
                        turns=[Turn("a" * 30, "b" * 30), Turn("c" * 30, "d" * 30), Turn("new" * 5)])
    dropped = conv.fit(_count, budget=100, longest_token=16)
    assert dropped == 2 and conv.context_start == 2, "down to half the budget: only the new question fits in 50"
    assert [t.user[0] for t in conv.turns] == ["a", "c", "n"], "nothing is deleted"
    assert conv.messages() == [Message("system", "S" * 10), Message("user", "new" * 5)]


def test_the_context_moves_once_to_half_the_budget_so_later_turns_extend_the_same_prompt() -> None:
    conv = Conversation(name="c", turns=[Turn("q" * 5, "a" * 5) for _ in range(30)])
    conv.turns.append(Turn("x" * 5))
    assert conv.fit(_count, budget=200, longest_token=16) > 0
    assert 40 < _count(conv.messages()) <= 100
    kept = conv.messages()
    drops = []
    for _ in range(5):  # the next turns fit after the kept ones: their prompts extend it (the KV cache holds it)
        conv.turns[-1].answer = "a" * 5
        conv.turns.append(Turn("y" * 5))
        drops.append(conv.fit(_count, budget=200, longest_token=16))
        assert conv.messages()[:len(kept)] == kept
    assert drops == [0] * 5


def test_a_message_over_half_the_budget_keeps_what_fits_beside_it() -> None:
    conv = Conversation(name="c", turns=[Turn("a" * 15, "b" * 15), Turn("c" * 5, "d" * 5), Turn("x" * 70)])
    assert conv.fit(_count, budget=100, longest_token=16) == 1
    assert [t.user[0] for t in conv.in_context()] == ["c", "x"]


def test_making_room_in_a_long_conversation_renders_it_a_few_times_not_once_per_turn() -> None:
    calls = []

    def counting(messages: list[Message]) -> int:
        calls.append(len(messages))
        return _count(messages)

    conv = Conversation(name="c", turns=[Turn("q" * 50, "a" * 50) for _ in range(2000)] + [Turn("new")])
    assert conv.fit(counting, budget=1000, longest_token=16) > 1900
    assert len(calls) <= 15, f"{len(calls)} renders"
    assert len(conv.turns) == 2001


def test_a_long_history_is_not_tokenized_where_its_size_alone_shows_it_cannot_fit() -> None:
    counted: list[int] = []

    def counting(messages: list[Message]) -> int:
        counted.append(_count(messages))
        return counted[-1]

    conv = Conversation(name="c", turns=[Turn("q" * 50, "a" * 50) for _ in range(3000)] + [Turn("new")])
    assert conv.fit(counting, budget=1000, longest_token=16) > 2900
    assert max(counted) <= 16 * 1000, "nothing over the budget's bytes at 16 a token (300,000 were)"
    assert _count(conv.messages()) <= 500


def test_a_context_start_past_the_end_after_undo_is_clamped() -> None:
    conv = Conversation(name="c", turns=[Turn("a", "b")], context_start=5)
    conv.turns.append(Turn("new"))
    assert conv.fit(_count, budget=100, longest_token=16) == 0 and conv.context_start == 1
    assert conv.messages() == [Message("user", "new")]


def test_the_last_exchange_stays_in_context_when_undo_removed_the_ones_after_context_start() -> None:
    conv = Conversation(name="c", turns=[Turn("a", "b"), Turn("c", "d"), Turn("e", "f")], context_start=2)
    conv.turns.pop()
    assert conv.messages() == [Message("user", "c"), Message("assistant", "d")], "/regen has a question to answer"


def test_a_message_that_can_never_fit_is_an_error_not_truncation() -> None:
    conv = Conversation(name="c", system="S", turns=[Turn("x" * 500)])
    with pytest.raises(ContextOverflowError, match="this message and the system prompt need 501 tokens"):
        conv.fit(_count, budget=100, longest_token=16)
    assert conv.turns[0].user == "x" * 500


def test_a_message_whose_size_alone_cannot_fit_is_refused_before_it_is_counted() -> None:
    def never(_: list[Message]) -> int:
        raise AssertionError("counted a message that cannot fit")

    conv = Conversation(name="c", turns=[Turn("a", "b"), Turn("x" * 3200)])
    with pytest.raises(ContextOverflowError, match="this message needs at least 200 tokens but only 100 are free"):
        conv.fit(never, budget=100, longest_token=16)  # 16 bytes a token at the most (longest_token)
    assert conv.context_start == 0


def test_a_message_that_can_never_fit_moves_no_earlier_exchange_out() -> None:
    conv = Conversation(name="c", system="S", turns=[Turn("a" * 20, "b" * 20), Turn("c" * 20, "d" * 20),
                                                     Turn("x" * 500)])
    with pytest.raises(ContextOverflowError, match="this message and the system prompt need 501 tokens"):
        conv.fit(_count, budget=100, longest_token=16)
    assert [t.user[0] for t in conv.turns] == ["a", "c", "x"] and conv.context_start == 0


def test_messages_alternate_and_end_with_the_open_question() -> None:
    conv = Conversation(name="c", turns=[Turn("q1", "a1"), Turn("q2")])
    assert [m.role for m in conv.messages()] == ["user", "assistant", "user"]


def test_save_and_load_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import config

    monkeypatch.setenv("LOCALGEN_HOME", str(tmp_path))
    monkeypatch.setattr(config, "_settings", None)
    conv = Conversation(name="trip", system="be brief",
                        turns=[Turn("old", "one"), Turn("hi", "hello", interrupted=True)],
                        model="smollm2-135m", settings={"temperature": 0.2}, context_start=1)
    path = save_conversation(conv)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    loaded = load_conversation("trip")
    assert loaded.turns == conv.turns and loaded.system == "be brief" and loaded.settings == {"temperature": 0.2}
    assert loaded.context_start == 1 and loaded.messages() == conv.messages()
    assert json.loads(path.read_text())["format"] == 1
    path.write_text("{not json")
    with pytest.raises(LocalgenError, match="not a valid saved conversation"):
        load_conversation("trip")
    with pytest.raises(UsageError):
        load_conversation("../escape")


@pytest.mark.parametrize("start", [-1, "1", True, 1.0])
def test_a_saved_context_start_that_is_not_a_turn_index_is_refused(start: object, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _home(tmp_path, monkeypatch)
    path = save_conversation(Conversation(name="bad", turns=[Turn("a", "b"), Turn("c", "d")]))
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "context_start": start}))
    with pytest.raises(LocalgenError, match="'context_start' is not a turn index"):
        load_conversation("bad")
    path.write_text(json.dumps({k: v for k, v in record.items() if k != "context_start"}))
    assert load_conversation("bad").context_start == 0, "files saved before context_start existed load"
    path.write_text(json.dumps({**record, "context_start": 7}))
    assert load_conversation("bad").context_start == 1, "past the end: the last exchange stays in context"


@pytest.mark.parametrize(("text", "reason"), [
    ("", "the file is empty"), ("\n  \n", "the file is empty"), ("[]", "not a JSON object"),
    ('{"name": "a", "turns": []}', "no 'format'"), ('{"format": "1", "name": "a", "turns": []}', "unknown format"),
    ('{"format": 1, "name": "a"}', "no 'turns'"), ('{"format": 1, "turns": [{"answer": "x"}]}', "a turn has no 'user'"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"), ('{"format": 1, "turns": []}', "no 'name'"),
    ('{"format": 1, "name": "a", "turns": [\n', "its JSON ends before it is complete"),
    ('{"format": 1, "name": "a"}x', "not JSON at line 1, column 27: extra data"),  # a whole value, then more
    ("\0\1\0 data", "it holds NUL bytes: binary data, not JSON"),
    ('{"format": 1,\n "name": a}', "not JSON at line 2, column 10: expecting value"),
    ('{\n  "format": 1,\n  "name": "a",\n  "turns": [{"user": "How long do eg', "its JSON ends before it is complete"),
    ('{"format": 1, "name": "a", "turns": [{"user": "a", "interrupted": fal', "its JSON ends before it is complete"),
    ('{"format": 1, "name": "a", "turns": [{"user": "a", "answer": "caf\\u00', "its JSON ends before it is complete"),
    ('{"format": 1,\n "name": "a\tb"}', "not JSON at line 2, column 12: invalid control character"),
    ('{"format": 1,\n "name": "a\\qb"}', "not JSON at line 2, column 12: invalid \\escape"),
    ('{"format": 1, "name": "a", "turns": [], "settings": {"stop": "###"}}', "setting 'stop' is not a list of "
                                                                            "stop strings"),
    ('{"format": 1, "name": "a", "turns": [], "settings": {"stop": ["#", 3]}}', "setting 'stop' is not a list of "
                                                                              "stop strings"),
    ('{"format": 1, "name": "a", "turns": [], "settings": {"stop": ["#", ""]}}', "a stop string is empty"),
])
def test_a_damaged_file_says_what_is_wrong_with_it_in_words(text: str, reason: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen.conversation_store import conversations_dir, read_conversation

    _home(tmp_path, monkeypatch)
    conversations_dir().mkdir(parents=True)
    (conversations_dir() / "hand.json").write_text(text)
    with pytest.raises(LocalgenError) as info:
        read_conversation("hand")
    assert info.value.message.endswith(f"hand.json is not a valid saved conversation ({reason})"), info.value.message


def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import config

    monkeypatch.setenv("LOCALGEN_HOME", str(tmp_path))
    monkeypatch.setattr(config, "_settings", None)


def test_conversations_started_in_the_same_second_get_their_own_files(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _home(tmp_path, monkeypatch)
    first, second = Conversation.new(system=None, model="m"), Conversation.new(system=None, model="m")
    second.name = first.name  # started in the same second
    first.turns.append(Turn("from the first", "a"))
    second.turns.append(Turn("from the second", "b"))
    assert save_conversation(first).name == f"{first.name}.json"
    assert save_conversation(second).name == f"{first.name}-2.json" and second.name == f"{first.name}-2"
    first.turns.append(Turn("again", "c"))
    save_conversation(first)  # later saves go to its own file
    assert [t.user for t in load_conversation(first.name).turns] == ["from the first", "again"]
    assert [t.user for t in load_conversation(second.name).turns] == ["from the second"]


def test_save_as_never_overwrites_another_conversation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _home(tmp_path, monkeypatch)
    save_conversation(Conversation(name="other", turns=[Turn("keep me", "ok")]))
    mine = Conversation(name="mine", turns=[Turn("q", "a")])
    save_conversation(mine)
    with pytest.raises(UsageError, match="'other' already exists"):
        save_conversation(mine, "other")
    assert load_conversation("other").turns[0].user == "keep me" and mine.name == "mine"
    saved_as = save_conversation(mine, "renamed")
    assert saved_as.name == "renamed.json" and mine.name == "renamed"
    assert json.loads(saved_as.read_text())["name"] == "renamed", "the new file records its own name"
    mine.turns.append(Turn("q2", "a2"))
    save_conversation(mine, "renamed")  # its own name: an ordinary save
    assert len(load_conversation("renamed").turns) == 2


def test_save_as_the_name_of_a_damaged_file_does_not_offer_to_load_it(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen.conversation_store import conversations_dir

    _home(tmp_path, monkeypatch)
    mine = Conversation(name="mine", turns=[Turn("q", "a")])
    save_conversation(mine)
    (conversations_dir() / "broken.json").write_text('{"turns": [')
    with pytest.raises(UsageError, match="'broken' already exists, and cannot be read") as info:
        save_conversation(mine, "broken")
    assert info.value.hint == ("choose another name (/list says what is wrong with it; `localgen conversations rm "
                               "broken` deletes it)")
    assert (conversations_dir() / "broken.json").read_text() == '{"turns": [' and mine.name == "mine"
    with pytest.raises(UsageError) as readable:
        save_conversation(Conversation(name="other", turns=[Turn("q", "a")]), "mine")
    assert readable.value.hint == "choose another name, or /load mine to continue it"


def test_save_as_the_name_of_a_newer_format_s_conversation_leaves_it_to_that_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It was called unreadable, with `conversations rm` to delete it: another localgen's conversation is kept."""
    from localgen.conversation_store import conversations_dir

    _home(tmp_path, monkeypatch)
    mine = Conversation(name="mine", turns=[Turn("q", "a")])
    save_conversation(mine)
    newer = '{"format": 99, "name": "future", "turns": []}'
    (conversations_dir() / "future.json").write_text(newer)
    with pytest.raises(UsageError) as info:
        save_conversation(mine, "future")
    assert info.value.message == ("a conversation named 'future' already exists, saved by a newer localgen version "
                                  "(format 99)")
    assert info.value.hint == "it is left as it is for that version; choose another name"
    assert (conversations_dir() / "future.json").read_text() == newer and mine.name == "mine"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/set temperature 0.5", SlashCommand("/set", "temperature 0.5")),
        ("  /HELP  ", SlashCommand("/help", "")),
        ("hello", None),
        ("//not a command", None),
        ("/file ~/notes.md", SlashCommand("/file", "~/notes.md")),
    ],
)
def test_parse_command(line: str, expected: SlashCommand | None) -> None:
    assert parse_command(line) == expected


def test_triple_quote_blocks() -> None:
    assert block_is_open('"""') and block_is_open('"""\nfirst')
    assert not block_is_open('"""\nfirst\n"""') and not block_is_open("plain")
    assert unwrap_block('"""\nfirst\nsecond"""') == "first\nsecond"
    assert unwrap_block("plain") == "plain"


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        (["<think>hmm</think>Answer"], [(True, "hmm"), (False, "Answer")]),
        (["<thi", "nk>deep", " thought</th", "ink>", "Yes"], [(True, "deep"), (True, " thought"), (False, "Yes")]),
        (["no tags at all"], [(False, "no tags at all")]),
        (["a <", "b"], [(False, "a <"), (False, "b")]),
        ([" \n<th", "ink>a</think>b"], [(False, " \n"), (True, "a"), (False, "b")]),  # blank space, then the block
        (["Use <think>", " tags.</think>"], [(False, "Use <think>"), (False, " tags.</think>")]),  # text, not a block
        (["<think>a</think>b <think>c</think>"], [(True, "a"), (False, "b <think>c</think>")]),  # one block at most
        (["</think>x"], [(False, "</think>x")]),
    ],
)
def test_thinking_splitter(chunks: list[str], expected: list[tuple[bool, str]]) -> None:
    splitter = ThinkingSplitter()
    segments = [seg for chunk in chunks for seg in splitter.feed(chunk)] + splitter.flush()
    assert segments == expected


def test_generation_prompt_that_opens_thinking() -> None:
    assert prompt_opens_thinking("<|Assistant|><think>\n")
    assert ThinkingSplitter(inside=True).feed("reasoning</think>done") == [(True, "reasoning"), (False, "done")]


@pytest.mark.parametrize(("chunks", "opens", "shown", "thinking"), [
    (["<think>hmm", "</think>\n\nAns", "wer"], False, ["Ans", "wer"], "hmm"),
    (["step one\n</thi", "nk>", " Yes"], True, ["Yes"], "step one"),  # the template opened it
    (["<think>still thinking"], False, [], "still thinking"),  # cut off inside it
    (["plain answer"], False, ["plain answer"], ""),
    ([" sat on the mat"], False, [" sat on the mat"], ""),  # no think block: a continuation keeps its space
    (["<think>ab</th"], False, [], "ab"),  # cut off (-n) inside a tag: the piece of the tag is no text
    (["Paris <th"], False, ["Paris <th"], ""),  # text: a tag later than the start opens no block
    (["The tag ", "<think> opens it."], False, ["The tag ", "<think> opens it."], ""),
    (["ok</think> See <think>x"], True, ["See <think>x"], "ok"),
    (["<think></think>", "\n\nYes"], False, ["Yes"], ""),
])
def test_without_thinking_streams_only_the_answer(chunks: list[str], opens: bool, shown: list[str],
                                                 thinking: str) -> None:
    from localgen.events import Finished, Timings, Usage

    reason = "length" if chunks[-1].endswith("<th") or chunks[-1].endswith("</th") else "stop"
    done = Finished("".join(chunks), reason, Usage(1, 0, len(chunks)), Timings(0.1, 0.1, 10.0, 0.1, 10.0))
    events = list(without_thinking(iter([*(TextChunk(c) for c in chunks), done]), lambda: opens))
    assert [e.text for e in events if isinstance(e, TextChunk)] == shown
    assert (events[-1].text, events[-1].thinking) == ("".join(shown), thinking)
    assert events[-1].to_dict()["thinking"] == thinking


def test_only_a_real_new_line_gets_the_continuation_prompt() -> None:
    assert continuation(4, 1, False) == "... " and continuation(4, 1, True) == "    "


def test_a_missing_conversation_s_hint_fits_where_it_was_asked_for(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """In a chat, /list shows the names; at the shell (`chat --resume NAME`), `localgen conversations` does."""
    _home(tmp_path, monkeypatch)
    with pytest.raises(LocalgenError, match="no saved conversation named 'gone'") as in_chat:
        load_conversation("gone")
    assert in_chat.value.hint == "/list shows the saved conversations"
    with pytest.raises(LocalgenError, match="no saved conversation named 'gone'") as at_shell:
        load_conversation("gone", shell=True)
    hint = at_shell.value.hint or ""
    assert "/list" not in hint and "`localgen conversations` lists the saved ones" in hint
    for name in ("notes", "chat-20261203-164821"):
        save_conversation(Conversation(name=name, turns=[Turn("a", "b")]))
    for typed, meant in (("Notes", "notes"), ("nots", "notes"), ("chat-20261203-16482", "chat-20261203-164821")):
        with pytest.raises(LocalgenError) as slip:  # another case, a slip, a digit left out: the name meant
            load_conversation(typed, shell=True)
        assert slip.value.hint == f"did you mean {meant}?", typed
    with pytest.raises(LocalgenError) as unlike:
        load_conversation("gone")
    assert unlike.value.hint == "/list shows the saved conversations"


@pytest.mark.parametrize("size", [0, -5, 5, 10_000_001, "512", True, 512.0])
def test_a_saved_ctx_size_that_is_not_a_context_size_is_refused(size: object, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _home(tmp_path, monkeypatch)
    path = save_conversation(Conversation(name="sized", turns=[Turn("a", "b")], ctx_size=512))
    assert load_conversation("sized").ctx_size == 512
    path.write_text(json.dumps({**json.loads(path.read_text()), "ctx_size": size}))
    with pytest.raises(LocalgenError, match="'ctx_size' is not a context size"):
        load_conversation("sized")


@pytest.mark.parametrize("model", ["", "  "])
def test_a_saved_model_that_is_empty_is_refused(model: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _home(tmp_path, monkeypatch)
    path = save_conversation(Conversation(name="modelled", turns=[Turn("a", "b")], model="smollm2-135m"))
    path.write_text(json.dumps({**json.loads(path.read_text()), "model": model}))
    with pytest.raises(LocalgenError, match=r"modelled.json is not a valid saved conversation \('model' is empty\)"):
        load_conversation("modelled")


def test_a_completed_command_is_followed_by_a_space_and_file_paths_complete(tmp_path: Path) -> None:
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    from localgen.repl_input import SlashCompleter

    def complete(text: str) -> list[str]:
        return [c.text for c in SlashCompleter().get_completions(Document(text), CompleteEvent())]

    assert complete("/fi") == ["/file "]
    assert complete("/s") == ["/system ", "/set ", "/show ", "/stats ", "/save "]
    (tmp_path / "notes.txt").write_text("x")
    assert complete(f"/file {tmp_path}/no") == ["tes.txt"]
    assert complete("hello") == []
    assert complete("/set te") == ["temperature "] and complete("/set --top-") == ["top_k ", "top_p "]
    save_conversation(Conversation(name="trip-plans"))
    assert complete("/load trip") == ["trip-plans "]
    assert complete("/model smollm") == ["smollm2-135m "] and "qwen2.5-7b " in complete("/model qwen")
    assert complete(f"/model {tmp_path}/no") == ["tes.txt"], "a path after /model completes as a path"
    assert complete("/show ") == ["info ", "settings ", "system ", "template ", "license "]
    assert complete("/show te") == ["template "] and complete("/thinking o") == ["on ", "off "]
    assert complete("/markdown of") == ["off "] and complete("/show info x") == []
    assert complete("/set st") == ["stop "]
    assert complete("/help sh") == ["shortcuts ", "show "] and complete("/help sa") == ["save "], "/help save too"
    assert complete("/help ") == ["shortcuts ", *(f"{name[1:]} " for name in COMMANDS_OFFERED)]


@pytest.mark.parametrize("width", [0, 1, 10, 23, 24, 40, 100])
def test_help_fits_any_terminal(width: int) -> None:
    from localgen.repl_input import COMMAND_HELP, help_lines

    lines = help_lines(width)
    assert all(f"  {usage}" in "\n".join(lines) for usage in COMMAND_HELP)
    if width >= 24:
        assert all(len(line) < width for line in lines), lines
    else:  # too narrow to lay out: one line per command, for the terminal to break
        assert len(lines) == len(COMMAND_HELP) + 1


def test_a_name_that_starts_with_a_dot_is_refused_with_a_hint_that_says_why() -> None:
    from localgen.conversation_names import check_name

    with pytest.raises(UsageError, match=r"'\.hidden' is not a valid conversation name") as info:
        check_name(".hidden")
    with pytest.raises(UsageError, match="is not a valid conversation name"):
        check_name("nl\n")  # $ matches before a final newline: a name must match whole
    assert (info.value.hint or "").startswith("start with an ASCII letter or digit")
    assert check_name("notes.v2-final_1") == "notes.v2-final_1"


def test_an_empty_name_is_said_to_be_empty_with_what_a_name_may_be() -> None:
    from localgen.conversation_names import check_name

    with pytest.raises(UsageError, match=r"^the conversation name is empty$") as info:
        check_name("")
    assert info.value.hint == ("give one: start with an ASCII letter or digit, then use ASCII letters, digits, '.', "
                               "'_' and '-' (up to 100 characters), e.g. notes")


@pytest.mark.parametrize(("typed", "like"), [("my notes", "my-notes"), ("café", "cafe"),
                                             ("Q&A: round 2!", "Q-A-round-2"), ("../notes", None), ("a/b", None),
                                             ("日本語", "notes"), ("  ", "notes"), (".json", "notes"),
                                             ("my notes.JSON", "my-notes"), (".notes.json", "notes")])
def test_a_name_that_is_not_valid_gets_a_valid_one_close_to_it_as_its_example(typed: str, like: str | None) -> None:
    from localgen.conversation_names import check_name

    with pytest.raises(UsageError) as info:
        check_name(typed)
    hint = info.value.hint or ""
    assert hint.endswith(f"(up to 100 characters), e.g. {like}" if like else "(up to 100 characters)"), hint
    if like:
        assert check_name(like) == like


def test_save_as_over_something_that_is_no_file_does_not_offer_to_load_it(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen.conversation_store import conversations_dir

    _home(tmp_path, monkeypatch)
    (conversations_dir() / "dir.json").mkdir(parents=True)
    with pytest.raises(UsageError, match=r"dir\.json is in the way of a conversation named 'dir'") as info:
        save_conversation(Conversation(name="mine", turns=[Turn("a", "b")]), "dir")
    assert "/load" not in (info.value.hint or "")


def test_a_hand_edited_file_with_a_bom_or_a_minus_one_limit_loads(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _home(tmp_path, monkeypatch)
    path = save_conversation(Conversation(name="edited", turns=[Turn("a", "b")]))
    record = json.loads(path.read_text())
    record["settings"] = {"max_tokens": -1, "seed": -1, "temperature": 0.5}  # -1 as -n and --seed take it
    path.write_text("\ufeff" + json.dumps(record), encoding="utf-8")  # a BOM, as Windows editors write
    assert load_conversation("edited").settings == {"max_tokens": None, "seed": None, "temperature": 0.5}


def test_the_conversations_folder_is_private_from_a_run_s_first_lock(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen.conversation_store import conversations_dir, load_or_start

    _home(tmp_path, monkeypatch)
    load_or_start("first")  # holds the name (its lock) before anything is saved
    assert conversations_dir().stat().st_mode & 0o777 == 0o700


def test_a_summary_line_keeps_a_long_multi_line_text_on_one_line() -> None:
    from localgen.repl_text import brief

    assert brief("Be terse.\nAnswer in French.") == "Be terse. Answer in French."
    assert brief("word\n" * 40, limit=20).startswith("word word word word") and "\n" not in brief("word\n" * 40)


def test_fields_added_by_hand_survive_the_next_save(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _home(tmp_path, monkeypatch)
    path = save_conversation(Conversation(name="tagged", turns=[Turn("a", "b")]))
    record = json.loads(path.read_text())
    record["tags"] = ["work"]
    record["turns"][0]["rating"] = 5
    path.write_text(json.dumps(record))
    loaded = load_conversation("tagged")
    loaded.turns.append(Turn("c", "d"))
    save_conversation(loaded)
    saved = json.loads(path.read_text())
    assert saved["tags"] == ["work"] and saved["turns"][0]["rating"] == 5 and "extra" not in saved
    assert [set(turn) for turn in saved["turns"]] == [{"user", "answer", "interrupted", "rating"},
                                                     {"user", "answer", "interrupted"}]


def test_hand_added_fields_named_like_inner_ones_are_kept_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _home(tmp_path, monkeypatch)
    path = save_conversation(Conversation(name="inner", turns=[Turn("a", "b")]))
    record = json.loads(path.read_text())
    record["extra"], record["on_disk"], record["turns"][0]["extra"] = {"project": "alpha"}, "mine", "a note"
    record["turns"][0]["format"] = "markdown"
    path.write_text(json.dumps(record))
    save_conversation(load_conversation("inner"))
    saved = json.loads(path.read_text())
    assert (saved["extra"], saved["on_disk"], saved["turns"][0]["extra"]) == ({"project": "alpha"}, "mine", "a note")
    assert saved["turns"][0]["format"] == "markdown" and saved["format"] == 1


def test_half_of_a_utf16_pair_alone_loads_as_a_replacement_character(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _home(tmp_path, monkeypatch)
    path = save_conversation(Conversation(name="cut", turns=[Turn("a", "b")]))
    path.write_text(path.read_text().replace('"user": "a"', '"user": "emoji cut \\ud83c here \\ud83c\\udf89"'))
    loaded = load_conversation("cut")
    assert loaded.turns[0].user == "emoji cut \ufffd here \U0001f389"
    save_conversation(loaded)  # and it can be written as UTF-8 again


def test_an_empty_system_prompt_is_sent_as_one() -> None:
    assert Conversation(name="x", system="", turns=[Turn("hi")]).messages()[0] == Message("system", "")
    assert Conversation(name="x", system=None, turns=[Turn("hi")]).messages()[0].role == "user"


def test_each_answer_s_details_are_saved_beside_it_and_older_turns_load_without_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen.conversation import AnswerDetails

    _home(tmp_path, monkeypatch)
    details = AnswerDetails(finish_reason="length", model="smollm2-135m", prompt_tokens=31, completion_tokens=212,
                            duration_s=3.104, decode_tokens_per_s=68.3)
    path = save_conversation(Conversation(name="detailed", turns=[Turn("old", "one"), Turn("q", "a", details=details)]))
    old, new = json.loads(path.read_text())["turns"]
    assert old == {"user": "old", "answer": "one", "interrupted": False}, "a turn without details saves as before"
    assert new == {"user": "q", "answer": "a", "interrupted": False, "finish_reason": "length",
                   "model": "smollm2-135m", "prompt_tokens": 31, "completion_tokens": 212, "duration_s": 3.104,
                   "decode_tokens_per_s": 68.3}
    loaded = load_conversation("detailed")
    assert [t.details for t in loaded.turns] == [None, details] and loaded.turns[1].extra == {}
    record = json.loads(path.read_text())
    record["turns"][1] = {"user": "q", "answer": "a", "finish_reason": "stop", "details": "by hand"}
    path.write_text(json.dumps(record))
    partial = load_conversation("detailed").turns[1]
    assert partial.details == AnswerDetails(finish_reason="stop") and partial.extra == {"details": "by hand"}


@pytest.mark.parametrize(("field", "value"), [("finish_reason", 3), ("model", ["m"]), ("prompt_tokens", 1.5),
                                              ("completion_tokens", True), ("duration_s", -1),
                                              ("decode_tokens_per_s", "fast"), ("duration_s", float("inf"))])
def test_details_of_the_wrong_kind_make_a_saved_conversation_damaged(field: str, value: object, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _home(tmp_path, monkeypatch)
    path = save_conversation(Conversation(name="odd", turns=[Turn("q", "a")]))
    record = json.loads(path.read_text())
    record["turns"][0][field] = value
    path.write_text(json.dumps(record))
    with pytest.raises(LocalgenError, match=f"a turn's '{field}' is not"):
        load_conversation("odd")


def test_an_answer_s_details_read_as_one_line() -> None:
    from localgen.conversation import AnswerDetails
    from localgen.conversation_summary import cut_short, details_line

    full = AnswerDetails(finish_reason="length", model="smollm2-135m", prompt_tokens=31, completion_tokens=212,
                         duration_s=3.104, decode_tokens_per_s=68.3)
    assert details_line(Turn("q", "a", details=full)) == \
        "smollm2-135m · 212 tokens · 3.1 s · 68 tok/s · stopped at the token limit"
    local = AnswerDetails(finish_reason="stop", model="/models/tiny.gguf", completion_tokens=1, duration_s=125.4)
    assert details_line(Turn("q", "a", details=local)) == "tiny.gguf · 1 token · 2 min 5 s", "a whole answer"
    cut = AnswerDetails(finish_reason="error", model="smollm2-135m")
    assert details_line(Turn("q", "a", True, details=cut)) == "smollm2-135m · cut short by an error"
    assert details_line(Turn("q", "a", True)) == "(interrupted)" and details_line(Turn("q", "a")) is None
    assert cut_short(Turn("q", "a", details=AnswerDetails(finish_reason="context"))) == \
        "stopped at the end of the context"
    assert cut_short(Turn("q", "a", details=AnswerDetails(finish_reason="refused"))) == "refused", "a later reason"


def test_a_model_path_that_is_not_utf8_is_saved_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen.conversation import AnswerDetails

    _home(tmp_path, monkeypatch)
    path = "/models/bad" + b"\xff".decode("utf-8", "surrogateescape") + "name.gguf"
    conversation = Conversation(name="odd-path", model=path,
                                turns=[Turn("q", "a", details=AnswerDetails(finish_reason="stop", model=path))])
    saved = save_conversation(conversation)
    assert "\\udcff" in saved.read_text(encoding="utf-8")
    loaded = load_conversation("odd-path")
    assert loaded.model == loaded.turns[0].details.model == path, "its bytes back, as os.fsencode reads the escape"


@pytest.mark.parametrize("kept", [{}, {"updated": "2026-03-04T05:06:07+00:00"}])
def test_a_file_without_its_start_time_gives_the_latest_time_known_not_the_time_it_is_read(
        kept: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    _home(tmp_path, monkeypatch)
    path = save_conversation(Conversation(name="by-hand", turns=[Turn("a", "b")]))
    record = {key: value for key, value in json.loads(path.read_text()).items() if key not in ("created", "updated")}
    path.write_text(json.dumps(record | kept))
    os.utime(path, (1767225600, 1767225600))  # 2026-01-01 00:00 UTC
    loaded = load_conversation("by-hand")
    latest = kept.get("updated", "2026-01-01T00:00:00+00:00")
    assert (loaded.created, loaded.updated) == (latest, latest)

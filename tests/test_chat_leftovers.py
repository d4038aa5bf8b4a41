"""The chat's leftovers: the input history as a start reads and trims it, whatever an older localgen did to it."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CliResult, run_localgen
from tests.test_cli_completion import _bash_lines, _shells, _zsh_or_fish_lines
from tests.test_repl import Chat

HUGE_HEADER = b"\n# 2026-01-01 10:00:01\n"


def _older_version_start(history: Path) -> bool:
    """What the start of a localgen from before the trim's mark did to a history whose last bytes hold no entry's
    header: keep its newest entry alone, from its header's line, where anything is before that line; whether it
    rewrote the file."""
    data = history.read_bytes()
    start = data.rfind(b"\n#")
    if start <= 0:
        return False
    history.write_bytes(data[start:])
    return True


def _this_version_start(history: Path) -> bool:
    """A start of this localgen's trim; whether it rewrote the file (put another in its place)."""
    from localgen.history_bound import check_and_trim_history

    before = history.stat().st_ino
    check_and_trim_history(history)
    return history.stat().st_ino != before


@pytest.mark.parametrize("older_first", [False, True])
def test_a_huge_entry_kept_alone_is_rewritten_once_whatever_an_older_localgen_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, older_first: bool) -> None:
    """A history of one huge entry that this localgen and an older one (which keeps the newest entry from its header's
    line, the trim's mark before it a line to drop) both start chats on is rewritten at most once, then left by
    both (each start of either rewrote it, back and forth); Up still reads the entry as it was written."""
    from prompt_toolkit.history import FileHistory

    from localgen import history_bound

    monkeypatch.setattr(history_bound, "READ_BYTES", 4096)
    history = tmp_path / "history"
    text = b"+pasted text\n" * 1000
    history.write_bytes(b"\n# 2026-01-01 10:00:00\n+old\n" + HUGE_HEADER + text)
    rewrites = []
    for _ in range(3):
        if older_first:
            rewrites.append(("older", _older_version_start(history)))
        rewrites.append(("this", _this_version_start(history)))
        if not older_first:
            rewrites.append(("older", _older_version_start(history)))
    assert [who for who, rewrote in rewrites if rewrote] in (["this"], ["older", "this"]), rewrites
    assert history.read_bytes() == history_bound.ALONE_MARK % len(text) + text
    assert list(FileHistory(str(history)).load_history_strings()) == ["pasted text\n" * 999 + "pasted text"]


def _bytes_read() -> int:
    """Bytes this process has read from files so far (Linux's count of its read calls)."""
    text = Path("/proc/self/io").read_text()
    return int(re.search(r"^rchar: (\d+)", text, re.MULTILINE)[1])  # type: ignore[index]


def _entries_text(count: int, text: str = "old {}") -> bytes:
    """A history file's data of count entries, each one line of text (numbered by {})."""
    return "".join(f"\n# 2026-01-01 10:00:00\n+{text.format(i)}\n" for i in range(count)).encode()


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counts reads by Linux's /proc/self/io")
@pytest.mark.parametrize("huge_last", [False, True])
def test_up_reads_a_long_history_from_its_last_bytes_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          huge_last: bool) -> None:
    """The lines Up recalls are read from a history's last bytes, as a trim reads it, whatever its size (the whole
    file was read and held, 1.7 s and 735 MB at a chat's start for a 200 MB entry a trim had kept alone): those of
    the whole entries there, newest first; none of an entry longer than them, which stays in the file."""
    from localgen import history_bound
    from localgen.repl_input import SafeFileHistory

    monkeypatch.setattr(history_bound, "READ_BYTES", 64 * 1024)
    history = tmp_path / "history"
    data = _entries_text(200_000)  # 4.4 MB
    history.write_bytes(history_bound.ALONE_MARK % len(data) + data.replace(b"\n# 2026-01-01 10:00:00\n", b"")
                        if huge_last else data)
    before = _bytes_read()
    recalled = list(SafeFileHistory(history).load_history_strings())
    assert _bytes_read() - before < 1024 * 1024, "the whole history was read"
    if huge_last:
        assert recalled == []
    else:
        assert recalled[0] == "old 199999" and 1000 < len(recalled) < 3000
        assert recalled == [f"old {i}" for i in range(199_999, 199_999 - len(recalled), -1)]


def test_up_reads_entries_as_prompt_toolkit_writes_and_reads_them(tmp_path: Path) -> None:
    """The entries Up recalls are those prompt-toolkit's FileHistory reads from the same file: lines of several
    lines, a carriage return, an empty line, bytes that are not UTF-8, headers of any kind, no last newline."""
    from prompt_toolkit.history import FileHistory

    from localgen.repl_input import SafeFileHistory

    history = tmp_path / "history"
    writer = FileHistory(str(history))
    for entry in ("one", "two\nlines", "", "tab\tand\rreturn", "\n", "café"):
        writer.store_string(entry)
    with history.open("ab") as file:
        file.write(b"# another header\n+caf\xe9 \xf0\x9f\n+last, no newline")
    assert list(SafeFileHistory(history).load_history_strings()) == list(writer.load_history_strings())
    assert list(SafeFileHistory(tmp_path / "none").load_history_strings()) == []


def test_up_in_a_chat_whose_history_is_one_huge_entry_recalls_the_lines_sent_since(tmp_path: Path) -> None:
    """A chat whose history is an entry longer than a start reads, which the trim keeps alone, starts and recalls
    with Up the line sent in it (Up went on to the huge entry, read whole as the chat started)."""
    from localgen.history_bound import ALONE_MARK, READ_BYTES

    history = tmp_path / "home" / "data" / "history"
    history.parent.mkdir(parents=True)
    text = b"+pasted text\n" * (READ_BYTES // 13 + 1000)
    history.write_bytes(ALONE_MARK % len(text) + text)
    chat = Chat(tmp_path / "home", "--no-markdown")
    try:
        chat.command("/wrap", "answers' lines")
        chat.child.send("\x1b[A\x1b[A\r")  # Up twice: the line sent, and nothing older
        chat.child.expect_exact("answers' lines")
        chat.sync()
        assert "pasted text" not in chat.transcript.getvalue()
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
    assert history.read_bytes().startswith(ALONE_MARK % len(text) + text)


def test_set_and_run_write_a_number_in_its_shortest_form(tmp_path: Path) -> None:
    """/set temperature 500 is refused as 500 out of range (it said 500.0, a float's text), as run --temperature 500
    is; /set temperature 100 says 100, /set top_p 0.50 says 0.5, and /set NAME alone and /show write them alike."""
    from tests.conftest import run_localgen

    chat = Chat(tmp_path / "home", "--no-markdown")
    try:
        chat.command_words("/set temperature 500", "error: temperature 500 is out of range")
        chat.command("/set temperature 100", "temperature = 100")
        chat.command("/set top_p 0.50", "top_p = 0.5")
        chat.command("/set temp", "(/set temperature VALUE")
        shown = " ".join(chat.command("/show settings", "max_tokens=").split())
        said = chat.transcript.getvalue()
        assert ".0" not in said.replace("0.05", ""), said
        assert "temperature = 100 (/set temperature VALUE" in said, said
        assert "temperature=100," in shown and "top_p=0.5," in shown and "presence_penalty=0," in shown, shown
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
    refused = run_localgen("run", "--temperature", "500", "--top-p", "2", "hi", env={"LOCALGEN_HOME": str(tmp_path)})
    assert refused.returncode == 2 and b"error: temperature 500 is out of range" in refused.stderr, refused.stderr


def hinted_command(said: str, pattern: str) -> list[str]:
    """The command a hint in said gives (pattern's first group), word by word as bash reads it back."""
    typed = re.search(pattern, said)[1]  # type: ignore[index]
    return subprocess.run(["bash", "-c", f"printf '%s\\0' {typed}"], capture_output=True, text=True,
                          check=True).stdout.split("\0")[:-1]


def _said(chat: Chat, command: str) -> str:
    """What a command says, its lines joined, without the terminal's escapes."""
    start = len(chat.transcript.getvalue())
    chat.child.sendline(command)
    chat.sync()
    said = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", chat.transcript.getvalue()[start:]).partition("\n")[2]
    return " ".join(said.replace(">>>", " ").split())


SHOWN = ("/show settings", "/show system", "/set stop", "/wrap", "/markdown", "/thinking")


def test_a_chat_with_nothing_to_resume_is_given_the_command_that_starts_it_again_as_it_stands(
        tmp_path: Path, bundled_model: Path) -> None:
    """/model of a model whose largest context is smaller than that of a chat with no exchange gives the command that
    starts the chat again with that model and context, its options and the /set, /system, /set stop, /wrap and
    /stats changes made since (it said to start it again with the options it started with, /set's lost): that
    command's chat shows the same settings."""
    from tests.gguf_builders import copy_with_metadata

    small = tmp_path / "small model.gguf"
    copy_with_metadata(bundled_model, small, set_values={"llama.context_length": 1024})
    chat = Chat(tmp_path / "home", "-s", "Be brief.", "--temperature", "0", "-n", "3", "-c", "4096", "--stop", "x y",
                "--no-markdown", "--kv-type", "q8_0", "--flash-attn", "on")
    try:
        for command in ("/set top_k 7", "/set temperature 0.25", "/system It's 'quoted'.", "/set stop END, \\n",
                        "/wrap off", "/thinking off"):
            chat.child.sendline(command)
            chat.sync()
        shown = [_said(chat, command) for command in SHOWN]
        said = _said(chat, f"/model {shlex.quote(str(small))}")
        assert "as it has no exchange saved to resume" in said, said
        command = hinted_command(said, r"/exit, then start the chat again with `([^`]*)`")
        assert command[:2] == ["localgen", "chat"] and command[-2:] == ["-c", "1024"], command
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
    again = Chat(tmp_path / "home", *command[2:])
    try:
        assert [_said(again, command) for command in SHOWN] == shown
        assert "small model" in _said(again, "/show info")
        assert again.quit() == 0
    finally:
        if again.child.isalive():
            again.child.terminate(force=True)


ODD_NAMES = ("my notes", "it's", "-dash", "tab\tx")


def _home_with_odd_names(home: Path) -> None:
    """A home whose conversations folder holds a conversation and files copied in under names against the rule."""
    folder = home / "data" / "conversations"
    folder.mkdir(parents=True)
    (folder / "good.json").write_text('{"turns": []}')
    for name in ODD_NAMES:
        (folder / f"{name}.json").write_text('{"turns": []}')


@pytest.mark.parametrize("shell", _shells("bash", "zsh", "fish"))
def test_shell_completion_offers_the_odd_names_conversations_lists_as_the_shell_types_them(
        tmp_path: Path, shell: str) -> None:
    """conversations show, rm and mv complete the names the listing gives that break the naming rule (my notes, it's,
    a tab, -dash after --), which they take, quoted as the shell reads them back (they were not offered); chat
    --resume, which refuses them, is not offered them."""
    _home_with_odd_names(tmp_path)
    typed = ("localgen conversations show my", "localgen conversations rm 'my", "localgen conversations mv it",
             "localgen conversations show ta", "localgen conversations rm -- -d", "localgen chat --resume my")
    lines = _bash_lines(tmp_path, *typed, exact=True) if shell == "bash" else \
        _zsh_or_fish_lines(shell, tmp_path, *typed)
    if shell == "bash":  # bash puts an answer as given: quoted as a shell types it, but in a quote opened
        assert lines == ["localgen conversations show 'my notes' ", "localgen conversations rm 'my notes' ",
                         "localgen conversations mv 'it'\"'\"'s' ", "localgen conversations show $'tab\\tx' ",
                         "localgen conversations rm -- -dash ", "localgen chat --resume my"], lines
    else:  # zsh and fish quote an answer themselves; one with a tab is left out (the scripts' lines split at tabs)
        assert lines == ["localgen conversations show my\\ notes ", "localgen conversations rm 'my notes' ",
                         "localgen conversations mv it\\'s ", "localgen conversations show ta",
                         "localgen conversations rm -- -dash ", "localgen chat --resume my"], lines


def _run_under_address_limit(home: Path, kib: int, *args: str) -> CliResult:
    """`localgen run ARGS` under an address space of KIB (`ulimit -v`: one llama.cpp's allocations may not outgrow),
    forked by tests/zygote.py."""
    return run_localgen("run", "--no-cache", "-n", "1", *args, "hi", env={"LOCALGEN_HOME": str(home)},
                        limits={"RLIMIT_AS": kib * 1024})


def test_a_context_llama_cpp_cannot_allocate_is_hinted_options_that_load_it(tmp_path: Path) -> None:
    """Under an address-space limit that holds a 4,096-token context but not an 8,192 one, run -c 8192 says llama.cpp
    could not create the context, and each way its hint gives loads the model there: a smaller --ctx-size, and
    --kv-type q8_0 (flash attention is not off)."""
    low, high = 200 * 1024, 4 * 1024 * 1024  # KiB: the least limit that holds -c 4096 lies between
    while high - low > 16 * 1024:
        middle = (low + high) // 2
        low, high = (low, middle) if _run_under_address_limit(tmp_path, middle, "-c", "4096").returncode == 0 else \
            (middle, high)
    limit = high + 16 * 1024
    refused = _run_under_address_limit(tmp_path, limit, "-c", "8192")
    assert refused.returncode == 1 and "could not create a context of 8192 tokens" in refused.err and \
        "(hint: try a smaller --ctx-size, or --kv-type q8_0, or raise `ulimit -v`)" in refused.err, refused.err
    for helped in (("-c", "4096"), ("-c", "8192", "--kv-type", "q8_0")):
        loaded = _run_under_address_limit(tmp_path, limit, *helped)
        assert loaded.returncode == 0 and loaded.out.strip(), (helped, loaded.err)


def test_a_start_holds_little_more_than_the_history_bytes_it_reads(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A start's check, trim and load of a history far longer than they read (one huge entry kept alone) hold at most
    about twice the bytes read at once (they held the bytes read three times over, with a list of their lines,
    seven times: 50 MB more at a chat's start)."""
    import tracemalloc

    from localgen import history_bound
    from localgen.repl_input import SafeFileHistory

    monkeypatch.setattr(history_bound, "READ_BYTES", 1024 * 1024)
    history = tmp_path / "history"
    text = b"+pasted text\n" * (4 * 1024 * 1024 // 13)
    history.write_bytes(history_bound.ALONE_MARK % len(text) + text)
    tracemalloc.start()
    try:
        assert history_bound.check_and_trim_history(history) is None
        assert list(SafeFileHistory(history).load_history_strings()) == []
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2.5 * 1024 * 1024, f"{peak:,} bytes held at once"


def test_the_command_that_resumes_a_chat_with_another_context_keeps_the_options_it_does_not_save(
        tmp_path: Path) -> None:
    """The hint to a message too long for a saved chat's context resumes it with the loading options and the way it
    shows answers that the conversation does not keep (--kv-type, --flash-attn, --threads, /wrap off: it gave
    --resume NAME -c N alone, and the chat resumed with those lost); that command's chat shows the same."""
    chat = Chat(tmp_path / "home", "--no-markdown", "-n", "4", "-c", "256", "--kv-type", "q8_0", "--flash-attn", "on",
                "--threads", "1", "--temperature", "0")
    try:
        name = chat.ask("Say hi.")["name"]
        chat.child.sendline("/wrap off")
        chat.sync()
        shown = [_said(chat, command) for command in (*SHOWN, "/show info")]
        said = _said(chat, "Count these words: " + "word " * 300)
        typed = re.search(r"/exit, then `([^`]*)`", said)[1]  # type: ignore[index]
        assert typed.startswith(f"localgen chat --resume {name} --threads 1 --flash-attn on --kv-type q8_0 "
                                "--no-markdown --no-wrap -c "), typed
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
    again = Chat(tmp_path / "home", *shlex.split(typed)[2:])
    try:
        now = [_said(again, command) for command in (*SHOWN, "/show info")]
        assert now[:-1] == shown[:-1], now
        assert "threads: 1; KV type: q8_0" in now[-1], now[-1]
        assert again.quit() == 0
    finally:
        if again.child.isalive():
            again.child.terminate(force=True)


def _run_under_data_limit(home: Path, kib: int, *args: str) -> CliResult:
    """`localgen run ARGS hi` under a data limit of KIB (`ulimit -d`: a limit on the private memory Linux lets it
    map), forked by tests/zygote.py."""
    return run_localgen("run", "--no-cache", "-n", "1", *args, "hi", env={"LOCALGEN_HOME": str(home)},
                        limits={"RLIMIT_DATA": kib * 1024})


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs a data limit, which Linux holds memory maps to")
def test_under_a_data_limit_a_context_that_does_not_fit_is_refused_at_load(tmp_path: Path) -> None:
    """Under `ulimit -d` that holds a 4,096-token context but not an 8,192 one, run -c 8192 is refused as the model
    loads, with the hint of a smaller --ctx-size, as under `ulimit -v` (it started with a small KV cache, whose growth
    llama.cpp could then not allocate part way through an answer, or C++'s bad_alloc ended the chat)."""
    low, high = 100 * 1024, 2 * 1024 * 1024  # KiB: the least limit that holds -c 4096 lies between
    while high - low > 16 * 1024:
        middle = (low + high) // 2
        low, high = (low, middle) if _run_under_data_limit(tmp_path, middle, "-c", "4096").returncode == 0 else \
            (middle, high)
    refused = _run_under_data_limit(tmp_path, high + 16 * 1024, "-c", "8192")
    assert refused.returncode == 1 and "could not create a context of 8192 tokens" in refused.err and \
        "(hint: try a smaller --ctx-size" in refused.err, refused.err

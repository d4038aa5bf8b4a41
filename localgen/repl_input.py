"""What the chat prompt reads: slash commands and their completion, \"\"\" blocks, history, /help."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shlex
import stat
import textwrap
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.history import DummyHistory, FileHistory, History, InMemoryHistory

from localgen.chat_settings import SETTING_NAMES
from localgen.config import settings
from localgen.control_chars import NOT_TEXT_CONTROLS
from localgen.errors import UsageError, os_reason
from localgen.history_bound import DAMAGED_SUFFIX, check_and_trim_history, history_lock, recalled_entries
from localgen.input_text import argument_text
from localgen.offered_names import conversations_offered, models_offered, starting_with
from localgen.repl_show import SHOW_PARTS
from localgen.shell_words import names_a_path, path_completions
from localgen.slips import meant_name
from localgen.storage import file_in_the_way, in_the_way
from localgen.think_switch import THINK_VALUES

PROMPT = ">>> "
LIST_NEWEST = 20  # conversations /list shows, the newest (/list all: every one)
BLOCK_QUOTE = '"""'
COMMAND_HELP = {
    "/help [COMMAND]": "show this help (COMMAND: only its own, as /help save; shortcuts: only the keys, as "
                       "Ollama's /? shortcuts)",
    "/system [TEXT|none]": "show the system prompt, set it to TEXT, clear it (none or off), or make it empty (\"\")",
    "/set PARAM VALUE": f"change a setting ({', '.join(SETTING_NAMES)}; or by its option name: temp, top-p, n; "
                        "Ollama's /set parameter and num_predict work too); /set stop TEXT... for stop strings",
    "/show [PART]": "model, settings, context size, GPU layers, path; or one part: info, settings (parameters), "
                    "system, template, license",
    "/stats [on|off]": "last answer's TTFT, prefill and decode speed, cached tokens, context used; on: after every "
                       "answer",
    "/reset": "start a new conversation (same system prompt; the current one is saved already if it changed)",
    "/undo": "drop the last exchange",
    "/regen": "answer the last question again (or send the message Ctrl-C stopped before its answer)",
    "/file [PATH|none]": "attach a file's text to the next message; none drops the attached files; alone, lists "
                         "them",
    "/save [NAME]": "save the conversation (it is also autosaved after every answer); NAME renames one still under "
                    "its automatic name (chat-...), and saves a copy of one you named, going on in the copy",
    "/load NAME": "continue a saved conversation",
    "/list [all]": f"list the newest {LIST_NEWEST} saved conversations (all: every one)",
    "/history [N]": "print the conversation's last N exchanges, as `localgen conversations show` does (alone: every "
                    "one)",
    "/model [REF]": "switch model, keeping the conversation (alone: name the model in use)",
    "/think [on|off]": "let the model think before it answers, or not, where its chat template has a switch for it "
                       "(GPT-OSS's: low, medium or high) (alone: say which)",
    "/thinking [on|off]": "show or hide the reasoning the model writes (alone: say which)",
    "/markdown [on|off]": "render answers as Markdown, or print them exactly as written (alone: say which)",
    "/wrap [on|off]": "break answers' lines between words at the window's edge, or keep them whole for the terminal "
                      "to break (alone: say which)",
    "/exit": "quit (or Ctrl-D); so do /quit and a line of just exit or quit",
}
KEYS_HELP = ("Alt-Enter or Esc Enter (Shift-Enter where the terminal tells it apart, or \\ at the end of a line, "
             'then Enter): newline; """ opens and closes a multi-line block; Ctrl-X Ctrl-E edits the message in '
             "$VISUAL or $EDITOR (Enter then sends it); Ctrl-C stops an answer; Ctrl-R searches history (Ctrl-G gives "
             "up the search); Tab completes a command (on an empty line, writes the / and lists the commands; in a "
             "message, a tab); Ctrl-Z suspends; Ctrl-D on an empty line quits; Ctrl-\\ quits at once, an answer it "
             "stops kept. Ollama's /bye, /clear and /? work too")
MIN_HELP_TEXT = 30  # narrower than this beside the commands, a command's text goes under it
MIN_HELP_WIDTH = 24  # a terminal narrower than this gets one line per command, left to it to break
NARROW_HELP_INDENT = "    "  # a command's text under it, on a terminal too narrow to have it beside
COMMANDS = tuple(usage.split()[0] for usage in COMMAND_HELP)
OWN_ALIASES = {"/quit": "/exit"}  # named in /help, and offered by Tab as its commands are
ALIASES = {**OWN_ALIASES, "/bye": "/exit", "/clear": "/reset", "/?": "/help"}  # with other tools' names (Ollama's)
COMMANDS_OFFERED = (*COMMANDS, *OWN_ALIASES)
LEAVING_WORDS = frozenset({"exit", "quit"})  # alone on a typed line, they end the chat, as in llm's chat
SLASH_HABITS = {  # other tools' commands that localgen names otherwise
    "/retry": "/regen", "/redo": "/regen", "/new": "/reset", "/sessions": "/list",
    "/context": "/stats", "/tokens": "/stats", "/params": "/show parameters", "/models": "/model REF",
    "/stop": "/set stop TEXT", "/read": "/file PATH",
}
WITHOUT_ARGUMENT = frozenset({usage for usage in COMMAND_HELP if " " not in usage})
WITHOUT_ARGUMENT |= {alias for alias, name in ALIASES.items() if name in WITHOUT_ARGUMENT}  # /bye, /clear
_CONTROL = re.compile(f"[{NOT_TEXT_CONTROLS}]")
PATH_COMMANDS = frozenset({"/file", "/model"})  # the commands that take a file's path (/model: or a model's name)


@dataclass(frozen=True)
class SlashCommand:
    """A parsed slash command: its name and the rest of the line."""

    name: str
    argument: str


def parse_command(line: str) -> SlashCommand | None:
    """Parse '/name rest'; None when the line is a message, not a command: it does not start with one slash, or
    its first word looks like a path (/etc/hosts, /tmp.log: another slash or a dot)."""
    stripped = line.strip()
    if not stripped.startswith("/") or stripped.startswith("//"):
        return None
    name = stripped.split(maxsplit=1)[0]
    if "/" in name[1:] or "." in name:
        return None
    return SlashCommand(name=name.lower(), argument=stripped[len(name):].strip())


def typed_text(line: str, warnings: list[str], *, pasted: bool) -> str:
    """A line read at the prompt as text: a typed /file or /model line keeps the bytes that were not UTF-8 (a file's
    name, as Tab completes it) as the command line keeps them, for its path to reach the file; any other line's (a
    line that began with a paste is a message, /file at its start too) become U+FFFD, with a warning."""
    command = None if pasted else parse_command(line)
    return line if command is not None and command.name in PATH_COMMANDS else argument_text(line, "the input", warnings)


def without_controls(text: str) -> tuple[str, list[str]]:
    """The text without control characters (tabs and newlines stay), and the ones dropped in caret notation."""
    dropped = [f"^{chr(ord(char) ^ 0x40)}" for char in _CONTROL.findall(text)]
    return (_CONTROL.sub("", text), dropped) if dropped else (text, [])


def unwrap_block(text: str) -> str:
    """The text of a \"\"\"…\"\"\" block, or the text itself."""
    stripped = text.strip()
    if stripped.startswith(BLOCK_QUOTE) and stripped.endswith(BLOCK_QUOTE) and len(stripped) >= 6:
        return stripped[3:-3].strip("\n")
    return text


def message_text(line: str, *, pasted: bool) -> str | None:
    """The message a line sends, or None when it is a command: a line that began with a paste is sent as pasted;
    a \"\"\" block is sent without its quotes; // at the start sends a message that starts with / (// alone, a
    word with another slash, is sent as it is, as a path is)."""
    if pasted:
        return line
    if parse_command(line) is not None:
        return None
    text = unwrap_block(line)
    return text.replace("/", "", 1) if text.lstrip().startswith("//") and text.strip() != "//" else text


def means_leaving(line: str, *, pasted: bool) -> bool:
    """Whether a typed line is a bare `exit` or `quit`, which ends the chat rather than going to the model."""
    return not pasted and line.strip().lower() in LEAVING_WORDS


def meant_commands(command: SlashCommand, known: Iterable[str]) -> list[str]:
    """For an unknown slash command: localgen's command for another tool's (with the argument typed in place of
    what it takes: /stop ### is /set stop ###), the commands it begins (an abbreviation: /l is /load or /list, /q
    /quit or its /exit), or a close one (a typo); none when nothing is near."""
    if command.name == "/" and command.argument:  # a space after the slash: / help
        spaced = "/" + command.argument.split()[0].lower()
        return [spaced] if spaced in known else []
    habit = SLASH_HABITS.get(command.name)
    if habit is not None:
        head, _, takes = habit.rpartition(" ")
        return [f"{head} {command.argument}" if command.argument and takes.isupper() else habit]
    names = list(known)
    begun = [name for name in names if len(command.name) > 1 and name.startswith(command.name)]
    begun += [ALIASES[name] for name in begun if ALIASES.get(name) in names and ALIASES[name] not in begun]
    slip = meant_name(command.name, names)
    return begun or ([slip] if slip else [])


def typed_message(line: str, *, pasted: bool) -> str | None:
    """What the message will be once the line being typed is sent, as far as it can be told (see message_text):
    an open \"\"\" block goes without its opening quotes."""
    if not pasted and block_is_open(line):
        return line.strip()[len(BLOCK_QUOTE):].lstrip("\n")
    return message_text(line, pasted=pasted)


def block_is_open(text: str) -> bool:
    """True while a \"\"\" block has been opened but not closed."""
    stripped = text.strip()
    return stripped.startswith(BLOCK_QUOTE) and (len(stripped) < 6 or not stripped.endswith(BLOCK_QUOTE))


BLOCK_COMMANDS = frozenset({"/system", "/set"})  # take a triple-quoted block, as Ollama's /set system does


def command_block_is_open(text: str) -> bool:
    """True while /system or /set has opened a \"\"\" block in its argument (/set system \"\"\") but not closed
    it."""
    command = parse_command(text)
    if command is None or command.name not in BLOCK_COMMANDS or BLOCK_QUOTE not in command.argument:
        return False
    if command.name == "/set" and command.argument.split(maxsplit=1)[0].lower() != "system":
        return False
    return not command.argument.partition(BLOCK_QUOTE)[2].rstrip().endswith(BLOCK_QUOTE)


ARGUMENT_WORDS = {"/help": ("shortcuts", *(name[1:] for name in COMMANDS_OFFERED)), "/show": SHOW_PARTS,
                  "/stats": ("on", "off"), "/thinking": ("on", "off"),
                  "/markdown": ("on", "off"), "/wrap": ("on", "off"), "/list": ("all",)}  # words they take


class SlashCompleter(Completer):
    """Completes slash command names, file paths after /file, setting names after /set, saved conversations after
    /load, model names or paths after /model, and the words of /help (shortcuts and the command names), /show, /stats,
    /think, /thinking, /markdown, /wrap and /list.

    After /model: the downloaded models and, unless offline() (where only they can load), the registry's others,
    the downloaded ones marked so. After /think: think_values(), the values the model in use's chat template takes.
    """

    def __init__(self, offline: Callable[[], bool] = lambda: settings().offline,
                 think_values: Callable[[], Iterable[str]] = lambda: THINK_VALUES) -> None:
        self._paths = PathCompleter(expanduser=True)
        self._offline = offline
        self._think_values = think_values

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        """Command names after a leading slash; then what the command takes."""
        text = document.text_before_cursor
        if text.startswith("/file ") or (text.startswith("/model ") and names_a_path(text[len("/model "):])):
            yield from path_completions(text.split(" ", 1)[1], self._paths, complete_event)
        elif text.startswith("/load ") and " " not in text[len("/load "):]:
            yield from _words(conversations_offered(), text[len("/load "):])
        elif text.startswith("/model ") and " " not in text[len("/model "):]:
            typed, offline = text[len("/model "):], self._offline()
            models = dict(models_offered(offline=offline, typed=typed))
            meta = {} if offline else {name: "downloaded" for name, downloaded in models.items() if downloaded}
            yield from _words(models, typed, meta=meta)
        elif text.startswith("/set ") and " " not in text[len("/set "):]:
            typed = text[len("/set "):]  # a setting's name, or its option name (--top-p completes to top_p)
            yield from _words((*SETTING_NAMES, "stop"), typed, typed.lstrip("-").replace("-", "_"))
        elif text.startswith("/think ") and " " not in text[len("/think "):]:
            yield from _words(self._think_values(), text[len("/think "):])
        elif text.count(" ") == 1 and text.split(" ")[0] in ARGUMENT_WORDS:
            command, typed = text.split(" ")
            yield from _words(ARGUMENT_WORDS[command], typed)
        elif text.startswith("/") and " " not in text:
            yield from _words(COMMANDS_OFFERED, text)


def _words(words: Iterable[str], typed: str, key: str | None = None, *,
           meta: Mapping[str, str] | None = None) -> Iterator[Completion]:
    """The words that start with what was typed (or with key, its normal form), in any case, each replacing it, with
    the space that follows it (and its meta, shown beside it in the menu)."""
    for word in starting_with(words, typed if key is None else key):
        yield Completion(f"{word} ", start_position=-len(typed), display=word, display_meta=(meta or {}).get(word))


class SafeFileHistory(FileHistory):
    """prompt-toolkit's FileHistory, except that a history file it cannot read or write never ends the session."""

    def __init__(self, path: Path) -> None:
        super().__init__(str(path))
        self.problem: str | None = None  # reported once, between prompts
        self._reported = False
        self.read_only_said = False  # the chat's start said the file is read-only: an append it refuses is not noted
        self._unsaved: set[str] = set()  # lines Up finds that the file does not hold

    def load_history_strings(self) -> Iterable[str]:
        """The saved lines Up recalls (recalled_entries: a bounded part of the file), or none (noted once) when the
        file cannot be read."""
        try:
            return recalled_entries(Path(self.filename))
        except FileNotFoundError:  # not made yet: the first line sent makes it
            return []
        except Exception as exc:  # raised in prompt-toolkit's task, it would put a traceback on the screen
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or repr(exc)
            self._note(f"cannot read the input history {self.filename!s}: {reason}")
            return []

    def append_string(self, string: str) -> None:
        """Remember a line as the message got it: without control characters (saved, so no longer unsaved)."""
        line = without_controls(string)[0]
        self._unsaved.discard(line)
        super().append_string(line)

    def remember_unsaved(self, string: str) -> None:
        """Remember a line for Up in this chat alone, not in the file (text Ctrl-C cleared, which was never sent)."""
        self._loaded_strings.insert(0, without_controls(string)[0])
        self._unsaved.add(self._loaded_strings[0])

    def sent(self, line: str) -> None:
        """Save a line sent as Up brought it back from the unsaved ones: the prompt adds no line equal to the newest
        entry, so the file would never get it."""
        if line in self._unsaved and self._loaded_strings[:1] == [line]:
            self._unsaved.discard(line)
            self.store_string(line)

    def store_string(self, string: str) -> None:
        """Append a line to the file; a failure is noted once and the chat goes on."""
        try:  # bytes a non-UTF-8 terminal sent arrive as lone surrogates, which UTF-8 cannot store
            _refuse_read_only(Path(self.filename))
            with history_lock(Path(self.filename)):  # written whole, never into a file another chat trims
                super().store_string(string.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
        except OSError as exc:
            if not (isinstance(exc, _ReadOnly) and self.read_only_said):
                self._note(f"could not save input history to {self.filename!s}: {os_reason(exc)}")

    def _note(self, message: str) -> None:
        """Keep the first problem for the REPL to print (printing inside prompt-toolkit garbles the screen)."""
        if not self._reported:
            self.problem, self._reported = message, True


class _ReadOnly(PermissionError):
    """The refusal of an append to a history file whose mode lets no one write it."""


def _refuse_read_only(path: Path) -> None:
    """Raise PermissionError where the history file's mode lets no one write it (444): as it refuses a user, it
    refuses root, whom no mode stops."""
    with contextlib.suppress(FileNotFoundError):  # (not made yet: the append makes it)
        mode = stat.S_IMODE(os.stat(path).st_mode)
        if not mode & stat.S_IWUSR:
            raise _ReadOnly(errno.EACCES, f"it is read-only (mode {mode:o})", str(path))


def _read_only_warning(path: Path, mode: int) -> str:
    """What a chat's start says of a history file made read-only (mode), which it leaves as it is."""
    return (f"input history is not saved to {path}: it is read-only (mode {stat.S_IMODE(mode):o}) (hint: it is kept "
            f"as it is; `chmod u+w {shlex.quote(str(path))}` lets a chat save it)")


class UnrecalledFileHistory(SafeFileHistory):
    """The history file for a terminal whose prompt cannot show a recalled line before Enter sends it (TERM=dumb:
    Emacs' shell): each line sent is saved to it, for Up in chats on other terminals, but Up offers none here."""

    def load_history_strings(self) -> Iterable[str]:
        """None of the saved lines: Up recalls nothing on such a terminal."""
        return []

    async def load(self) -> AsyncGenerator[str, None]:
        """Nothing for Up to recall, not even the lines sent in this chat (kept, as sent, only to skip a repeat)."""
        return
        yield  # an async generator that yields nothing


def keep_cleared(history: History, text: str) -> None:
    """Keep text Ctrl-C cleared from the prompt where Up finds it, for this chat alone (the history file keeps what
    was sent), unless it is the newest entry already (recalled, then cleared)."""
    if history.get_strings()[-1:] == [text]:
        return
    if isinstance(history, SafeFileHistory):
        history.remember_unsaved(text)
    else:  # in memory, or none kept (a dumb terminal)
        history.append_string(text)


def history_path() -> Path:
    """The file of the chat's input history."""
    return settings().data_dir / "history"


def open_history(*, recall: bool = True) -> tuple[History, str | None]:
    """The persistent input history, kept private (0600: it holds everything typed, as a shell's history does; what
    its group or others may do with it is taken away) but for one made read-only by its mode (for root too), left
    as it is, unchecked, untrimmed, never set aside, appended to by no chat; and a warning when the file had to be
    set aside or is read-only (said here, not at each line sent); without recall (a terminal whose prompt cannot
    show a recalled line), lines are saved but never offered for Up."""
    path = history_path()
    in_memory: Callable[[], History] = InMemoryHistory if recall else DummyHistory
    warning, read_only = None, False
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not path.exists():
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        status = path.stat()
        mode = status.st_mode
        if stat.S_ISDIR(mode):
            return in_memory(), f"{path} is a directory; input history is not saved this session"
        if not stat.S_ISREG(mode) and not os.path.samestat(status, os.stat(os.devnull)):  # a FIFO would never end
            return in_memory(), f"{path} is not a regular file; input history is not saved this session"
        # a link to /dev/null, a common way to turn history off, is left alone, as is one made read-only by its mode
        # (which binds root too): the user's to keep as it is, damaged or not
        if stat.S_ISREG(mode) and mode & stat.S_IWUSR:
            if mode & 0o077:
                os.chmod(path, stat.S_IMODE(mode) & 0o700)
            damage = check_and_trim_history(path)
            if damage:
                aside = path.with_name(path.name + DAMAGED_SUFFIX)
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
                warning = f"the input history {path} is damaged ({damage}); moved it to {aside} and started anew"
        elif stat.S_ISREG(mode):
            warning, read_only = _read_only_warning(path, mode), True
    except OSError as exc:
        blocker = file_in_the_way(path.parent)  # a file where the data folder goes: said as the chat's start says it
        reason = in_the_way(blocker)[0] if blocker is not None else os_reason(exc)
        return in_memory(), f"cannot use the input history {path}: {reason}; not saving it"
    history = (SafeFileHistory if recall else UnrecalledFileHistory)(path)
    history.read_only_said = read_only
    return history, warning


def continuation(width: int, _line_number: int, is_soft_wrap: bool) -> str:
    """The prompt of a continued line: '... ' after a newline, blank where a long line merely wraps."""
    return " " * width if is_soft_wrap else "... ".rjust(width)


def help_lines(width: int, *, commands: bool = True, only: str | None = None) -> list[str]:
    """/help's lines for a terminal this wide (0: no terminal, one line each): each command's text wrapped beside
    it with a hanging indent, or under it when the terminal is too narrow for that; then the keys (alone, without
    commands); only: that command's lines alone (/help save)."""
    width = width if width >= MIN_HELP_WIDTH else 0
    column = max(len(usage) for usage in COMMAND_HELP) + 4
    lines = []
    for usage, text in COMMAND_HELP.items() if commands else ():
        if only is not None and usage.split()[0] != only:
            continue
        if not width or width - column >= MIN_HELP_TEXT:
            lines += _wrapped(text, width, f"  {usage:<{column - 4}}  ", " " * column)
        else:
            lines += [f"  {usage}", *_wrapped(text, width, NARROW_HELP_INDENT, NARROW_HELP_INDENT)]
    return lines if only is not None else lines + _wrapped(KEYS_HELP, width, "  ", "  ")


def usage_error(command: str, problem: str) -> UsageError:
    """The error for a command given an argument it cannot take, or none where it needs one: the problem, and as the
    hint the command's usage as /help gives it."""
    usage = next(usage for usage in COMMAND_HELP if usage.split()[0] == command)
    return UsageError(problem, hint=f"{usage}: {COMMAND_HELP[usage]}")


def help_topic(argument: str) -> str | None:
    """The command /help ARGUMENT asks about (/help save, /help /bye: /exit), or None for no command."""
    name = "/" + argument.strip().lower().removeprefix("/")
    name = ALIASES.get(name, name)
    return name if name in COMMANDS else None


def _wrapped(text: str, width: int, first: str, rest: str) -> list[str]:
    """Help text wrapped between words to width (0: on one line), its first line and the rest indented so."""
    if not width:
        return [first + text]
    return textwrap.wrap(text, width - 1, initial_indent=first, subsequent_indent=rest,
                         break_long_words=False, break_on_hyphens=False)  # frequency_penalty, and top-p, whole


"""The chat's slash commands: which handler each name runs, and running one as typed (an unknown name, or an
argument to a command that takes none, is told so)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from localgen import console
from localgen.chat_commands_conversation import (
    file_command,
    history_command,
    list_command,
    load_command,
    model_command,
    regen_command,
    reset_command,
    save_command,
    undo_command,
)
from localgen.chat_commands_settings import (
    markdown_command,
    set_command,
    settings_text,
    stats_command,
    system_command,
    think_command,
    thinking_command,
    wrap_command,
)
from localgen.errors import UsageError
from localgen.repl_input import ALIASES, WITHOUT_ARGUMENT, SlashCommand, help_lines, help_topic, meant_commands
from localgen.repl_show import show
from localgen.repl_state import ChatState
from localgen.units import alternatives
from localgen.wordwrap import terminal_width

Handler = Callable[[ChatState, str], None]
BANG_HABITS = {**dict.fromkeys(("!multi", "!end"), 'Alt-Enter or Esc Enter starts a new line, and """ alone opens '
                               "and closes a block of lines"),  # llm chat's commands, which a model would get as text
               "!edit": "Ctrl-X Ctrl-E edits the message in $VISUAL or $EDITOR",
               "!fragment": "/file PATH attaches a file"}


def help_command(_state: ChatState, argument: str) -> None:
    """/help [COMMAND]: list the commands and the keys, one command alone, or (shortcuts) the keys alone."""
    keys = argument.lower() in ("shortcuts", "keys")
    topic = help_topic(argument) if argument and not keys else None
    if argument and not keys and topic is None:
        typed = SlashCommand("/" + argument.split()[0].lower().removeprefix("/"), "")  # /help set stop: /set
        meant = meant_commands(typed, [*HANDLERS, "/shortcuts", "/keys"])  # /help sav: save, /help retry: regen
        topics = [f"/help {name.split()[0].removeprefix('/')}" for name in meant]
        raise UsageError(f"/help has no topic '{argument}'",
                         hint=(f"did you mean {alternatives(topics)}? " if topics else "")
                         + "/help alone, /help COMMAND for one command (/help save), or /help shortcuts for the keys")
    for line in help_lines(terminal_width(sys.stderr)(), commands=not keys, only=topic):
        console.say(line)


def show_command(state: ChatState, argument: str) -> None:
    """/show [PART]: what this chat runs with (the model, settings, system prompt, template or license)."""
    show(state.session, argument.strip(), settings_text(state.session))


def exit_command(state: ChatState, _: str) -> None:
    """/exit: end the chat."""
    state.running = not state.leaving.may_leave("/exit", state.typed)


HANDLERS: dict[str, Handler] = {
    "/help": help_command, "/system": system_command, "/set": set_command, "/show": show_command,
    "/stats": stats_command, "/reset": reset_command, "/undo": undo_command, "/regen": regen_command,
    "/file": file_command, "/save": save_command, "/load": load_command, "/list": list_command,
    "/history": history_command,
    "/model": model_command, "/think": think_command, "/thinking": thinking_command, "/markdown": markdown_command,
    "/wrap": wrap_command,
    "/exit": exit_command,
}
HANDLERS |= {alias: HANDLERS[name] for alias, name in ALIASES.items()}  # Ollama's /bye, /clear and /?


def run_command(state: ChatState, command: SlashCommand) -> None:
    """Run a slash command, or say why it cannot run; then say why a change it made is not saved, if it is not."""
    handler = HANDLERS.get(command.name)
    if handler is None:
        meant = meant_commands(command, HANDLERS)
        console.error(f"unknown command {command.name}",
                      hint=(f"did you mean {alternatives(meant)}? " if meant else "")
                      + "/help lists the commands; // at the start sends a message that starts with /")
        return
    if command.argument and command.name in WITHOUT_ARGUMENT:
        console.error(f"{command.name} takes no argument", hint=f"type {command.name} alone; /help lists the rest")
        return
    state.typed = command.name
    try:
        handler(state, command.argument)
    finally:  # a change the command made and said, then why it is not saved
        error, state.session.save_error = state.session.save_error, None
        if error is not None:
            state.leaving.say_unsaved(error)


def refuse_bang_habit(line: str, *, pasted: bool) -> None:
    """Refuse a typed line that is one of llm chat's commands (!multi, !edit, !fragment NAME), which the model would
    get as a message, with localgen's way."""
    word = line.split(maxsplit=1)[0].lower() if line.strip() and not pasted else ""
    if word in BANG_HABITS and (word == "!fragment" or line.strip().lower() == word):
        raise UsageError(f"{word} is llm chat's command, not localgen's: nothing was sent", hint=BANG_HABITS[word])

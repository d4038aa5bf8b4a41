"""llm's -c, continue the latest conversation, which is --ctx-size in `run` and `chat`: the hint that says so and
writes the command that continues, with --continue in -c's place, or without -c where an option typed continues a
conversation already (run's --conversation NAME, chat's --resume NAME), never one that would be refused."""

from __future__ import annotations

import shlex
from typing import Any

from localgen.cli_args import arity, options_given, read_words, words_given
from localgen.cli_extra_words import suggested
from localgen.cli_option_values import runs_as_written

CONTINUE_LATEST = "-c is --ctx-size; to continue the latest conversation use --continue"
_CONTINUING = {"run": ("--continue", "--conversation"), "chat": ("--resume", "--continue")}  # the options that do


def continue_hint(command: Any, words: list[str], at: int) -> str:
    """For llm's -c at words[at] (command: run's or chat's click command; words: those after its name, as main gave
    them, chat's --resume alone as --resume=RESUME_LATEST): what -c is, and the command that continues, led by ": "
    (run's prompt "..." where none was typed); the lead alone where that command would be refused (chat -c WORD:
    chat takes no words; run -c --resume hi: run has no --resume)."""
    name, takes_value = command.name, arity(command.params)
    rest = [*words[:at], *words[at + 1:]]  # the word after -c, its value for click, now an option or a prompt word
    continuing = _continuing_options(name, rest, takes_value)
    if continuing:
        option, conversation = continuing[-1]  # chat's last --resume is the one it takes
        lead, fixed = f"-c is --ctx-size; {option} already continues {conversation}", rest
    else:
        lead, fixed = CONTINUE_LATEST, [*words[:at], _continue_option(name), *words[at + 1:]]
    prompt = words_given(fixed, takes_value)
    written = suggested(name, options_given(fixed, takes_value), prompt, takes_value)
    if not runs_as_written(command, shlex.split(written)[2:]):
        return lead
    return f'{lead}: `{written} "..."`' if name == "run" and not prompt else f"{lead}: `{written}`"


def _continue_option(command: str) -> str:
    """The word that continues the latest conversation in command's words as main gives them."""
    from localgen.cli_options import RESUME_LATEST

    return f"--continue={RESUME_LATEST}" if command == "chat" else "--continue"


def _continuing_options(command: str, words: list[str], takes_value: dict[str, bool]) -> list[tuple[str, str]]:
    """The options among command's words that continue a conversation, in the order typed: each as typed (with its
    value), and the conversation it continues (the latest, or conversation NAME)."""
    from localgen.cli_options import RESUME_LATEST

    found: list[tuple[str, str]] = []
    parts = list(read_words(words, takes_value))
    for at, (word, part) in enumerate(parts):
        name, equals, value = word.partition("=")
        if part != "option" or name not in _CONTINUING[command]:
            continue
        if not equals and takes_value.get(name, False):  # --conversation NAME, chat's --resume NAME
            value = parts[at + 1][0] if at + 1 < len(parts) else ""
            word = shlex.join([word, value])
        latest = (not equals and not takes_value.get(name, False)) or value == RESUME_LATEST
        found.append((word, "the latest conversation" if latest else f"conversation {shlex.quote(value)}"))
    return found

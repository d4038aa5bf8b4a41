"""The answers every shell's completion gets, as whole words: the word being completed, each way it can end (click
answers `--model=smo` with smollm2-135m alone, the value, which the shell then takes for the whole word)."""

from __future__ import annotations

from typing import Any


def whole_words(shell: Any, args: list[str], incomplete: str) -> list[tuple[str, str]]:
    """The words that complete incomplete after args, each with its help (""): a long option's value after `=` with
    the option kept (--model=smollm2-135m); none for a short option's (-m=NAME: localgen refuses it)."""
    if incomplete[:1] == "-" and incomplete[:2] != "--" and "=" in incomplete:
        return []
    value = incomplete.partition("=")[2] if incomplete[:2] == "--" and "=" in incomplete else incomplete
    option = incomplete[:len(incomplete) - len(value)]  # --model= (bash may pass the word whole: its breaks)
    return [(option + item.value, item.help or "") for item in shell.get_completions(args, incomplete)]

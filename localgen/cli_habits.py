"""Options other programs have that a localgen command has not, and what does their work here: a setting of the
environment (--debug: LOCALGEN_DEBUG=1)."""

from __future__ import annotations

import shlex

ENVIRONMENT_INSTEAD = {  # options people guess, and the environment's setting that does their work
    "--debug": "LOCALGEN_DEBUG=1", "--offline": "LOCALGEN_OFFLINE=1", "--no-color": "NO_COLOR=1",
    "--no-colour": "NO_COLOR=1",
}


def habit_hint(command: str, typed: str, words: list[str]) -> str | None:
    """For an option typed that command lacks ("" for localgen itself; `models list`), words the command's words after
    its name: what does that option's work here, or None."""
    if typed.partition("=")[0] in ENVIRONMENT_INSTEAD:
        return environment_hint(command.split(), words)
    return None


def environment_hint(names: list[str], words: list[str]) -> str | None:
    """For options typed in words (a command's, names its name) that the environment sets here: the command with
    those set in its environment; None where words hold none."""
    given = [word for word in words if word.partition("=")[0] in ENVIRONMENT_INSTEAD]
    if not given:
        return None
    settings = list(dict.fromkeys(ENVIRONMENT_INSTEAD[word.partition("=")[0]] for word in given))
    rest = [word for word in words if word not in given]
    written = " ".join([*settings, shlex.join(["localgen", *names, *rest]) if names else "localgen COMMAND ..."])
    shown = " ".join(["localgen", *names])
    return f"`{shown}` has no {' or '.join(given)}: the environment's {' and '.join(settings)} does it, `{written}`"

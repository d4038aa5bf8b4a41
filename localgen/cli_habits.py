"""Options other programs have that a localgen command has not, and what does their work here: a setting of the
environment (--debug: LOCALGEN_DEBUG=1), what `models show` prints (Ollama's show --modelfile), --version (-v, or
given a command: run --version)."""

from __future__ import annotations

import shlex

from localgen.cli_args import option_name, read_words

ENVIRONMENT_INSTEAD = {  # options people guess, and the environment's setting that does their work
    "--debug": "LOCALGEN_DEBUG=1", "--offline": "LOCALGEN_OFFLINE=1", "--no-color": "NO_COLOR=1",
    "--no-colour": "NO_COLOR=1",
}
VERSION_FLAGS = ("-v", "-V")  # Ollama's -v, and many tools' -V
_ENTRY = "its models.toml entry gives"
_SHOWN = {  # Ollama's `show` options, and what `models show` prints of them
    "--modelfile": f"localgen has no Modelfile: `{{}}` prints what {_ENTRY} (system prompt, settings, stop strings) "
                   "and the GGUF's details; --template prints the chat template",
    "--parameters": f"`{{}}` prints the settings {_ENTRY}, with the GGUF's details",
    "--system": f"`{{}}` prints the system prompt {_ENTRY}, with the GGUF's details",
    "--license": "`{}` prints the license, with the GGUF's details",
}


def habit_hint(command: str, typed: str, words: list[str], takes_value: dict[str, bool]) -> str | None:
    """For an option typed that command lacks ("" for localgen itself; `models show`), words the command's words after
    its name and takes_value its options: what does that option's work here, or None."""
    if typed.partition("=")[0] in ENVIRONMENT_INSTEAD:
        return environment_hint(command.split(), words, takes_value)
    if not command and words == [typed] and typed in VERSION_FLAGS:
        return "use `localgen --version`"
    if command and typed.partition("=")[0] == "--version":  # localgen's own option, given to a command
        return f"`localgen {command}` has no --version: use `localgen --version`"
    if command == "models show" and typed in _SHOWN:
        model = [word for word in words if not word.startswith("-")][:1]
        return _SHOWN[typed].format(shlex.join(["localgen", "models", "show", *model]))  # none: the default model
    return None


def environment_hint(names: list[str], words: list[str], takes_value: dict[str, bool]) -> str | None:
    """For options typed in words (a command's, names its name, takes_value its options) that the environment sets
    here: the command with those set in its environment; None where words hold none (an option's value or a word
    after -- is none: run -s --debug, run -- --debug)."""
    parts = list(read_words(words, takes_value))
    given = [word for word, part in parts if part == "option" and word.partition("=")[0] in ENVIRONMENT_INSTEAD]
    if not given:
        return None
    settings = list(dict.fromkeys(ENVIRONMENT_INSTEAD[word.partition("=")[0]] for word in given))
    rest = [word for word, part in parts if part != "option" or word not in given]
    shown = " ".join(["localgen", *names])
    lacked = " or ".join(dict.fromkeys(word.partition("=")[0] for word in given))
    verb = "does" if len(settings) == 1 else "do"
    unknown = [word for word, part in parts if part == "option" and word not in given and names
               and option_name(word, takes_value) not in takes_value]  # the command with the settings fails on it
    if unknown:
        return (f"`{shown}` has no {lacked} (the environment's {' and '.join(settings)} {verb} its work) nor "
                f"{unknown[0]}: see `{shown} --help`")
    written = " ".join([*settings, shlex.join(["localgen", *names, *rest]) if names else "localgen COMMAND ..."])
    return f"`{shown}` has no {lacked}: the environment's {' and '.join(settings)} {verb} it, `{written}`"

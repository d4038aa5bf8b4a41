"""Another tool's option given with its value (--quant Q8_0, --conversation NAME, -o FILE), and localgen's way to say
it with that value: in -m's reference, as chat's --resume NAME, through the shell's >."""

from __future__ import annotations

import shlex
from collections.abc import Callable


def _option_value(words: list[str], at: int, takes: Callable[[str], bool]) -> tuple[str, str, list[str]]:
    """The option at words[at] as typed (--quant, -q), its value (in that word after = or, where takes accepts it,
    after a short option's letter; else the next word where takes accepts it; "" for none), and the other words.
    A word that is no short option with its value (-output, read by click as -o) is the option whole."""
    word = words[at]
    option, equals, value = word.partition("=")
    if not equals and not word.startswith("--") and len(word) > 2 and takes(word[2:]):  # -qQ8_0, -ofile.txt
        option, value = word[:2], word[2:]
    rest = [*words[:at], *words[at + 1:]]
    if not equals and not value and at + 1 < len(words) and takes(words[at + 1]):
        value, rest = words[at + 1], [*words[:at], *words[at + 2:]]
    return option, value, rest


def quant_apart_hint(option: str) -> str:
    """The hint for a quant given in option (--quant, or pull's -q) where no model is named for it."""
    return f"the quant goes in the reference, not in {option}: NAME:QUANT or ORG/REPO:QUANT"


def quant_option_hint(command: str, words: list[str], at: int) -> str:
    """For `pull ORG/REPO --quant Q8_0` (or fit's, or huggingface-cli download's --include "*Q8_0*"): the quant goes in
    the reference, and the command so written where the quant and a model named without one were given."""
    option, quant, rest = quant_option(words, at)
    model = next((word for word in rest if not word.startswith("-") and ":" not in word
                  and not word.lower().endswith(".gguf")), None)  # a name or a repo given without a quant
    if quant is None or model is None:
        return quant_apart_hint(option)
    written = [f"{model}:{quant}" if word == model else word for word in rest]
    return f"the quant goes in the reference: `{shlex.join(['localgen', command, *written])}`"


def resume_hint(words: list[str], at: int) -> str:
    """For `chat --conversation NAME` (as run takes it): chat's --resume NAME, the command so written (with a valid
    name offered for one that is not: my-work for 'my work'); for the option alone (llama-cli's conversation mode),
    that chat is one."""
    _, name, rest = _option_value(words, at, lambda word: not word.startswith("-"))
    if not name:
        return ("`localgen chat` is a conversation already; --resume NAME reopens a saved one, --resume alone the "
                "latest")
    valid = _offered_name(name)
    if valid is None:  # a path
        return "chat's is --resume NAME, a saved conversation's name (`localgen conversations` lists them)"
    if not _saved(valid):  # --resume would fail: no saved conversation named so
        return f"chat's --resume NAME reopens a saved conversation, and none is saved as {valid}: a chat is named " \
            f"with /save NAME in it (`{shlex.join(['localgen', 'chat', *rest])}`, then `/save {valid}`)"
    written = f"`{shlex.join(['localgen', 'chat', '--resume', valid, *rest])}`"
    return f"chat's is --resume NAME: {written}" if valid == name else \
        f"chat's is --resume NAME, and {shlex.quote(name)} is no valid name: {written}"


def conversation_hint(words: list[str], at: int) -> str:
    """For `run --resume NAME "..."` (as chat takes it): run's --conversation NAME, the command so written (with a
    valid name offered for one that is not: my-work for 'my work'); for the option alone, or followed by a prompt alone
    (a word that is no valid name and names no saved conversation, the command's only word but for options and their
    values), run's --continue, which goes on with the latest, that prompt kept where it was typed."""
    _, name, rest = _option_value(words, at, lambda word: not word.startswith("-"))
    valid = _offered_name(name) if name else None
    prompt_alone = bool(name) and valid != name and not (valid and _saved(valid)) and \
        not _run_words(rest)  # `run --resume "What next?" -n 5`: the latest, and that prompt
    if not name or prompt_alone:
        written = _run_written(["--continue"], [*rest[:at], name, *rest[at:]] if name else rest)
        return f"run's --continue goes on with the latest conversation: `{written}`"
    if valid is None:  # a path: what to name it is the user's to say
        return "run's is --conversation NAME, a conversation's name, and --continue goes on with the latest " \
            "(`localgen conversations` lists them)"
    written = f"`{_run_written(['--conversation', valid], rest)}`"
    lead = "run's is --conversation NAME (--continue goes on with the latest)"
    return f"{lead}: {written}" if valid == name else f"{lead}, and {shlex.quote(name)} is no valid name: {written}"


def _offered_name(name: str) -> str | None:
    """name where it is a valid conversation name, else the one offered for it (my-work for 'my work', as run's error
    offers it); None for a path, whose name is the user's to say."""
    from localgen.conversation_names import NAME_PATTERN, suggested_name

    return name if NAME_PATTERN.fullmatch(name) else suggested_name(name)


def _run_written(option: list[str], rest: list[str]) -> str:
    """`localgen run` with option (the conversation's) and the other words typed, a prompt "..." where they give
    none."""
    return shlex.join(["localgen", "run", *option, *rest]) + ("" if _run_words(rest) else ' "..."')


def _run_words(words: list[str]) -> list[str]:
    """The words of a run command line that are neither options nor their values: its prompt's."""
    from localgen.cli import app
    from localgen.cli_args import option_arity, words_given

    return words_given(words, option_arity(app, "run"))


def _saved(name: str) -> bool:
    """Whether a conversation is saved as name, the one chat --resume NAME reopens."""
    from localgen.conversation_store import given_name, saved_path
    from localgen.errors import LocalgenError

    try:
        return saved_path(given_name(name)).is_file()
    except (OSError, LocalgenError):
        return False


def model_quant_option_hint(command: str, words: list[str], at: int) -> str:
    """For `run --quant Q8_0 "..."` (or chat's): the quant goes in -m's reference, and the command so written with the
    model -m names, or the default model where -m is not given; None for a -q that names no quant."""
    option, quant, rest = quant_option(words, at)
    if quant is None and option == "-q":  # no quant: run's -q, --quiet (chat's hint: other_command_option_hint)
        return None
    given = next((index for index, word in enumerate(rest)
                  if word in ("-m", "--model") or word.startswith("--model=") or word[:2] == "-m"), None)
    if given is None:
        from localgen.default_model import default_model_without_quant

        model, written = default_model_without_quant(), rest
    elif rest[given] in ("-m", "--model"):
        model = rest[given + 1] if given + 1 < len(rest) else None
        written = [*rest[:given], *rest[given + 2:]]
    else:  # --model=REF, -mREF
        model = rest[given].removeprefix("--model=").removeprefix("-m").removeprefix("=")
        written = [*rest[:given], *rest[given + 1:]]
    if quant is None or not model or ":" in model or model.lower().endswith(".gguf"):
        return f"the quant goes in -m's reference, not in {option}: -m NAME:QUANT or -m ORG/REPO:QUANT"
    at_model = given if given is not None else 0
    written = [*written[:at_model], "-m", f"{model}:{quant}", *written[at_model:]]
    return f"the quant goes in -m's reference: `{shlex.join(['localgen', command, *written])}`"


def quant_option(words: list[str], at: int) -> tuple[str, str | None, list[str]]:
    """The quant option at words[at] (--quant Q8_0, --quant=Q8_0, --include "*Q8_0*"): its name, the quant its value
    names (None: none), and the other words."""
    from localgen.references import quant_of_filename

    option, value, rest = _option_value(words, at, lambda word: quant_of_filename(word) is not None)
    return option, quant_of_filename(value) if value else None, rest


def output_hint(command: str, words: list[str], at: int) -> str | None:
    """For an output file option (words[at], the command's words after its name): run writes the answer to stdout,
    which the shell's > sends to the file (the command typed, without it); chat keeps its conversation."""
    if command == "chat":
        return ("chat saves the conversation: `localgen conversations show NAME` prints it; "
                '`localgen run "..." > FILE` writes one answer to a file')
    if command != "run":
        return None
    _, file, rest = _option_value(words, at, writes_a_file_or_json)
    command_line = shlex.join(["localgen", "run", *rest]) if rest else 'localgen run "..."'
    if file.lower() == "json":  # az's and gh's --output json
        return f"localgen run --json writes the answer as a JSON record: `{command_line} --json`"
    if not file:
        return 'localgen writes the answer to stdout: send it to a file with >, `localgen run "..." > FILE`'
    return f"localgen writes the answer to stdout: send it to a file with >, `{command_line} > {shlex.quote(file)}`"


def writes_a_file_or_json(word: str) -> bool:
    """Whether the word after an output option names a file to write, or JSON (--output json)."""
    return names_a_file_to_write(word) or word.lower() == "json"


def names_a_file_to_write(word: str) -> bool:
    """Whether a word after -o reads as a file's name (answer.txt, out/a), not llm's setting (-o temperature 0.2)."""
    if word.startswith("-") or any(char.isspace() for char in word):
        return False
    try:
        float(word)
    except ValueError:
        return "." in word or "/" in word
    return False


def setting_option_hint(command: str, words: list[str], at: int) -> str | None:
    """For llm's `-o KEY VALUE` given to run or chat (words[at], of the command's words after its name): the option
    here for the setting KEY, as chat's /set reads its name (max_tokens: -n, num_ctx: -c), with VALUE, and the command
    with each -o so written where it runs; None where no option sets KEY."""
    from localgen.cli import app
    from localgen.cli_args import arity, click_command, words_given
    from localgen.cli_option_values import runs_as_written

    clicked = click_command(app).commands[command]
    first = _setting_given(clicked, words, at)
    if first is None:
        return None
    said = f"localgen's is {shlex.join(first)}"
    written: list[str] = []
    while words and words[0] != "--":  # after it, the prompt's words
        given = _setting_given(clicked, words, 0)
        written, words = ([*written, *given], words[3:]) if given else ([*written, words[0]], words[1:])
    written += words
    if not runs_as_written(clicked, written):
        return said
    prompt = ' "..."' if command == "run" and not words_given(written, arity(clicked.params)) else ""
    return f"{said}: `{shlex.join(['localgen', command, *written])}{prompt}`"


def _setting_given(clicked: object, words: list[str], at: int) -> list[str] | None:
    """llm's `-o KEY VALUE` at words[at] as the option here that sets KEY, with VALUE; None for other words, or a KEY
    no option of the click command sets."""
    if at + 2 >= len(words) or words[at] not in ("-o", "--option"):  # not -o=KEY: llm's takes KEY and VALUE apart
        return None
    option = _setting_option(clicked, words[at + 1])
    return None if option is None else [option, words[at + 2]]


def _setting_option(clicked: object, key: str) -> str | None:
    """The option of a click command that sets the setting named key as /set reads it (temp, num_predict; num_ctx, a
    setting the chat starts with), its short name where it has one; None for a key no option of it sets."""
    from localgen.chat_settings import SETTING_NAMES, STARTUP_ONLY, setting_name

    name = setting_name(key)
    if name in STARTUP_ONLY:
        return STARTUP_ONLY[name][1].split()[0]  # "-c N (--ctx-size)": -c
    names = next((param.opts for param in getattr(clicked, "params", ())
                  if param.name == name and name in (*SETTING_NAMES, "stop")), None)
    return None if names is None else next((option for option in names if option[1] != "-"), names[0])

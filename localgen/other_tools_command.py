"""A `localgen run` command line typed with llama-cli's or llm's options (run -m M.gguf -p "Hi" -n 128 -no-cnv), written
with localgen's, for the hint that refuses the first of them."""

from __future__ import annotations

import shlex

_SAME_VALUE = {  # the other tool's option, and localgen's that takes its value as it is
    **dict.fromkeys(("-r", "--reverse-prompt"), "--stop"), **dict.fromkeys(("-sys", "--system-prompt"), "-s"),
    **dict.fromkeys(("--system-prompt-file", "--sf", "--system-fragment"), "--system-file"),
    **dict.fromkeys(("--n-predict", "--predict"), "-n"), "-tb": "--threads-batch", "-ub": "--ubatch-size",
    "-b": "--batch-size", **dict.fromkeys(("--schema", "-j", "-jf", "--json-schema-file"), "--json-schema"),
    "--cid": "--conversation", "--fragment": "-f", **dict.fromkeys(("-hf", "-hfr", "--hf-repo"), "-m"),
}
_PROMPT = ("-p", "--prompt")
_FLASH_ATTN = ("-fa",)  # llama-cli's takes on, off or auto, as localgen's --flash-attn does
_LLM_OTHER_MEANING = ("-t", "-n", "-c", "-q", "-p")  # llm prompt's template, no-log, continue, query, param
_DROPPED = (  # options that take no value and ask for what localgen does anyway
    "-no-cnv", "--no-conversation", "-st", "--single-turn", "--jinja", "--log-disable", "--no-display-prompt",
    "--no-warmup", "--mlock", "--mmap", "--no-mmap", "--simple-io", "--no-perf",
)


def _value_follows(args: list[str], at: int, takes_value: dict[str, bool]) -> bool:
    """Whether a word follows args[at] that is no option's name (-n 3, --stop --END--, not -n last or -n --json)."""
    from localgen.other_tools import OTHER_TOOLS_OPTIONS as other_tools

    names = (*takes_value, *other_tools, *_SAME_VALUE, *_PROMPT, *_FLASH_ATTN, *_DROPPED)
    return at + 1 < len(args) and args[at + 1].partition("=")[0] not in names


def run_in_localgen_s_words(args: list[str], takes_value: dict[str, bool]) -> str | None:
    """The run command args (its words after `run`) with each of the other tools' options above as localgen's, and
    -p's prompt as the argument; None where one has no such like (-cnv, -e), the words cannot be read whole, or the
    command written would be refused (-b hi: --batch-size hi, hi no number)."""
    from localgen.other_tools import OTHER_TOOLS_OPTIONS as other_tools

    options: list[str] = []
    prompt: list[str] = []
    at = 0
    while at < len(args):
        word = args[at]
        name, equals, value = word.partition("=")
        if word == "--":
            prompt += args[at + 1:]
            break
        if not word.startswith("-") or word == "-":
            prompt.append(word)
        elif name in (*_SAME_VALUE, *_PROMPT, *_FLASH_ATTN):
            if not equals:
                if not _value_follows(args, at, takes_value):
                    return None
                at, value = at + 1, args[at + 1]
            if name in _FLASH_ATTN and value.lower() not in ("on", "off", "auto"):
                return None
            if name in _PROMPT and prompt:  # a second prompt: llama-cli takes the last, never two
                return None
            if name in _PROMPT:
                prompt.append(value)
            else:
                options += [_SAME_VALUE.get(name, "--flash-attn"), value]
        elif word in _DROPPED:
            pass
        elif word in takes_value:  # localgen's own, with its value
            if takes_value[word] and not _value_follows(args, at, takes_value):
                return None
            options += args[at:at + 1 + takes_value[word]]
            at += takes_value[word]
        elif (name in takes_value and name.startswith("--")) or (
                word[:2] in takes_value and takes_value[word[:2]] and name not in other_tools):
            options.append(word)  # --temp=0, -n5 (not -cnv, llama-cli's)
        else:
            return None
        at += 1
    text = " ".join(prompt)
    words = [*options, *(["--"] if text.startswith("-") else []), *[text][:bool(text)]]
    return shlex.join(["localgen", "run", *words]) if _run_runs(words) else None  # not -b hi: --batch-size hi


def _run_runs(words: list[str]) -> bool:
    """Whether `localgen run WORDS` runs as written (cli_option_values.runs_as_written)."""
    from localgen.cli import app
    from localgen.cli_args import click_command
    from localgen.cli_option_values import runs_as_written

    return runs_as_written(click_command(app).commands["run"], words)


def llm_prompt_in_localgen_s_words(args: list[str], takes_value: dict[str, bool]) -> str | None:
    """The words after llm's `prompt` as a run command (--cid as --conversation); None where an option has no like in
    run's or a different meaning there (llm's -t is a template, run's --threads)."""
    if any(word.partition("=")[0] in _LLM_OTHER_MEANING for word in args[:args.index("--") if "--" in args else None]):
        return None
    return run_in_localgen_s_words(args, takes_value)


def in_localgen_s_words(option: str, args: list[str], takes_value: dict[str, bool], hint: str) -> str | None:
    """For a run refused for option, another tool's, given -p or several such options, each with a like here (or
    asking for what localgen does anyway): hint, then the whole command written with localgen's options (for -p, that
    the prompt is the argument); None for one option alone, whose hint says it all, or where one has no like."""
    from localgen.other_tools import OTHER_TOOLS_OPTIONS

    given = [word for word in args[:args.index("--") if "--" in args else len(args)]
             if word.partition("=")[0] in OTHER_TOOLS_OPTIONS]
    if len(given) < 2 and not any(word.partition("=")[0] in _PROMPT for word in given):  # its hint says it all
        return None
    written = run_in_localgen_s_words(args, takes_value)
    if written is None:
        return None
    return f"the prompt is the argument: `{written}`" if option in _PROMPT else f"{hint}; with localgen's options: " \
        f"`{written}`"

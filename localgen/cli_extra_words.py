"""Hints for words left over on run's and chat's command lines: a model named where the prompt goes (Ollama's
`run MODEL "prompt"`), a prompt split into words, stdin's - after the prompt, a prompt given to chat; and the command
line such a hint suggests."""

from __future__ import annotations

import shlex
from pathlib import Path

import typer

from localgen.cli_args import all_options, apart_at_equals, option_arity, options_given, read_words, words_given
from localgen.cli_option_values import run_options_of_chat
from localgen.config import settings
from localgen.errors import LocalgenError
from localgen.stdin_names import STDIN_NAME


def extra_argument_hint(app: typer.Typer, args: list[str], command: str, text: str) -> str | None:
    """For words left over by `run`, `chat` or `bench`: a model named before the prompt (bench's: its one word where
    it names a model, as fit and pull take one), else (run) how to fix the prompt."""
    if command not in ("run", "chat", "bench") or "unexpected extra argument" not in text:
        return None
    takes_value = option_arity(app, command)
    options, words = options_given(args[1:], takes_value), words_given(args[1:], takes_value)
    if command == "bench":  # it takes no argument: a word alone naming a model is one, as `fit MODEL` takes it
        given = any(word.partition("=")[0] in ("-m", "--model") for word in options)
        model = _model_name_given(words[0]) if len(words) == 1 and not given else None
        return _model_first_hint(command, model, options, [], takes_value) if model is not None else None
    ended = any(part == "after" for _, part in read_words(args[1:], takes_value))  # words after -- are the prompt's
    named = _plain_model_name if command == "run" else _model_name_given  # chat takes no prompt: a word is a model
    model = named(words[0]) if words and _before_double_dash(args[1:], takes_value) else None
    last = None if ended or len(words) < 2 else _plain_model_name(words[-1])
    if not any(word.partition("=")[0] in ("-m", "--model") for word in options):
        if model is not None:
            return _model_first_hint(command, model, options, words[1:], takes_value)
        if last is not None:
            return _model_first_hint(command, last, options, words[:-1], takes_value)
    return _run_extra_argument_hint(app, args, options, words, takes_value) if command == "run" else None


def model_first_message(app: typer.Typer, args: list[str], text: str) -> str | None:
    """For `run MODEL "prompt"` (as in Ollama), the model named as what is wrong, where click calls the prompt after
    it the extra argument (the hint, extra_argument_hint's, puts the model after -m): only for a model the registry
    knows or a .gguf file there, typed before any --; None for other errors (TCP/IP stays a prompt's word)."""
    if not args or args[0] != "run" or "unexpected extra argument" not in text:
        return None
    takes_value = option_arity(app, "run")
    options, words = options_given(args[1:], takes_value), words_given(args[1:], takes_value)
    if len(words) < 2 or any(word.partition("=")[0] in ("-m", "--model") for word in options):
        return None
    from localgen.registry import names_a_model

    model = words[0] if _before_double_dash(args[1:], takes_value) else ""
    known = names_a_model(model, settings().user_registry) or (
        model.lower().endswith(".gguf") and Path(model).expanduser().is_file())
    return f"'{model}' is the name of a model, not a prompt" if known else None


def _before_double_dash(args: list[str], takes_value: dict[str, bool]) -> bool:
    """Whether the first argument of a command line comes before a -- (after it, every word is the prompt's)."""
    return next((part for _, part in read_words(args, takes_value) if part in ("word", "after")), "") == "word"


def refuse_model_given(app: typer.Typer, args: list[str], text: str) -> None:
    """For `run MODEL "prompt"` (or chat's, or the model last: `run "prompt" MODEL`) where the registry refuses MODEL
    as typed: Ollama's address of a model, or a tag of a model that it has in no such form (a size it lacks,
    qwen2.5:14b; a base model's tag, llama3.2:1b-text): raises that refusal, as -m MODEL does."""
    from localgen.errors import ModelNotFoundError
    from localgen.references import ollama_model
    from localgen.registry import load_registry

    if not args or args[0] not in ("run", "chat") or "unexpected extra argument" not in text:
        return
    words = words_given(args[1:], option_arity(app, args[0]))
    for word in dict.fromkeys(words[:1] + words[-1:]):
        try:
            load_registry(settings().user_registry).reference(word)
        except ModelNotFoundError:
            raise
        except LocalgenError:
            if ollama_model(word) is not None:
                raise


def chat_prompt_error(app: typer.Typer, args: list[str], text: str) -> tuple[str, str] | None:
    """For `localgen chat hello` (or `chat MODEL hello`): chat takes no prompt, and `run` gives one answer (None for
    other errors, and for a model alone where -m goes, which extra_argument_hint explains)."""
    if not args or args[0] != "chat" or "unexpected extra argument" not in text:
        return None
    words = words_given(args[1:], option_arity(app, "chat"))
    model = _model_name_given(words[0]) if words else None
    if model is not None:
        words = words[1:]
    if not words:
        return None
    prompt = " ".join(words)
    options = run_options_of_chat(app, args[1:])  # as run takes them
    if not prompt.strip():  # chat "": start the chat
        chat_options = options_given(args[1:], option_arity(app, "chat"))
        start = shlex.join(["localgen", "chat", *(["-m", model] if model else []), *chat_options])
        return "chat takes no prompt argument: type your messages at its >>> prompt", f"start it with `{start}`"
    if STDIN_NAME in words:  # chat -: run answers what is piped in
        asked = [word for word in words if word != STDIN_NAME]
        run = suggested("run", [*(["-m", model] if model else []), *options], asked, option_arity(app, "run"))
        return ("chat takes no prompt argument, and reads no stdin: type your messages at its >>> prompt",
                f"for one answer to a file's text, use `{run} < FILE` or `... | {run}`")
    if len(words) == 1 and model is None and _is_saved_conversation(prompt):
        return (f"chat takes no prompt argument, and '{prompt}' is a saved conversation",
                f"to continue it, use `localgen chat --resume {shlex.quote(prompt)}`")
    quoted = shlex.quote(prompt) if shlex.quote(prompt) != prompt else f"'{prompt}'"
    ask = " ".join(["localgen run", *(["-m", shlex.quote(model)] if model else []), *map(shlex.quote, options),
                    *(["--"] if prompt.startswith("-") else []), quoted])
    return "chat takes no prompt argument: type your messages at its >>> prompt", f"for one answer, use `{ask}`"


def _is_saved_conversation(name: str) -> bool:
    """Whether a saved conversation goes by this name (False for a name that cannot be one)."""
    from localgen.conversation_store import given_name, saved_path

    try:
        return saved_path(given_name(name)).is_file()  # review.json: review, as --resume takes it
    except LocalgenError:
        return False


def _model_first_hint(command: str, model: str, options: list[str], rest: list[str],
                      takes_value: dict[str, bool]) -> str:
    """For `run MODEL PROMPT` (as in Ollama): the model after -m, the options kept, and the words of one prompt quoted
    as one."""
    return f"the model goes after -m: `{suggested(command, ['-m', model, *options], rest, takes_value)}`"


def _run_extra_argument_hint(app: typer.Typer, args: list[str], options: list[str], words: list[str],
                             takes_value: dict[str, bool]) -> str:
    """For `run` with words left over: stdin after the prompt, options after --, else quote the prompt (the options
    kept, each with its value)."""
    from localgen.inputs import STDIN_NAME

    prompt = [word for word in words if word != STDIN_NAME]
    if STDIN_NAME in words and prompt:
        written = suggested("run", ["-f", "-", *options], prompt, takes_value)
        return f"stdin comes before the prompt with -f -: `{written}`"
    hint = _after_double_dash_hint(app, args) if "--" in args[1:-1] else None
    if hint is None and (options or words):
        hint = f"quote the prompt: `{suggested('run', options, words, takes_value)}`"
    return hint or 'quote the prompt: localgen run "several words"'


def suggested(command: str, options: list[str], prompt_words: list[str], takes_value: dict[str, bool]) -> str:
    """The command line a hint suggests: localgen COMMAND OPTIONS PROMPT (the options as they parse, takes_value the
    command's), the prompt's words quoted as one (after -- where it starts with -), shell-quoted."""
    prompt = " ".join(prompt_words)
    return shlex.join(["localgen", command, *apart_at_equals(options, takes_value),
                       *(["--"] if prompt.startswith("-") else []), *([prompt] if prompt_words else [])])


def _after_double_dash_hint(app: typer.Typer, args: list[str]) -> str | None:
    """For `run [OPTIONS] -- PROMPT WORDS [OPTIONS]`: the prompt's words quoted as one, and options given after --
    (which reads them as words) moved before it; None when what comes before -- is not options alone."""
    ends = args.index("--")
    before, after = args[1:ends], args[ends + 1:]
    takes_value = option_arity(app, "run")
    if not all_options(before, takes_value):
        return None
    split = next(k for k in range(1, len(after) + 1) if all_options(after[k:], takes_value))
    prompt, options = " ".join(after[:split]), after[split:]
    fixed = shlex.join(["localgen", "run", *before, *options, "--", prompt])
    return f"options go before --, which ends them: `{fixed}`" if options else f"quote the prompt: `{fixed}`"


def _plain_model_name(word: str) -> str | None:
    """A word that plainly names a model (`run MODEL "prompt"`, `run "prompt" MODEL`): a registry name, a .gguf
    file, a Hub address or an ORG/REPO with GGUF in its name (a word such as and/or or TCP/IP is the prompt's)."""
    model = _model_name_given(word)
    return model if model is not None and (model.count("/") != 1 or "gguf" in model.lower()) else None


def _model_name_given(word: str) -> str | None:
    """A word typed where an argument goes when it names a model (`run MODEL "prompt"`, as in Ollama): a registry
    name, a .gguf file, an ORG/REPO or a Hub address (hf.co/ORG/REPO, https://huggingface.co/...)."""
    from localgen.references import hub_prefixes
    from localgen.registry import names_a_model

    word = "" if word.startswith("-") else word
    hub_repo = word.count("/") == 1 and not any(c.isspace() for c in word) and not word.startswith("/")
    hub_address = word.lower().startswith(hub_prefixes()) and not any(c.isspace() for c in word)
    if word.lower().endswith(".gguf") or hub_repo or hub_address or names_a_model(word, settings().user_registry):
        return word
    return None

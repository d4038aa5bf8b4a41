"""The `localgen` command line: thin commands that parse, call one service, and render."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from localgen import __version__
from localgen.config import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MIN_P,
    DEFAULT_REPEAT_PENALTY,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_K,
    DEFAULT_TOP_P,
    DEFAULT_UBATCH_SIZE,
    settings,
)
from localgen.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_TERMINATED,
    EXIT_USAGE,
    LocalgenError,
    UsageError,
)

app = typer.Typer(
    name="localgen",
    help="Chat with and generate text from local LLMs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

ModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="Registry name, ORG/REPO[:QUANT] or .gguf path.")]
CtxOpt = Annotated[int | None, typer.Option("--ctx-size", "-c", help="Context size in tokens.")]
ThreadsOpt = Annotated[int | None, typer.Option("--threads", "-t", help="CPU threads (default: physical cores).")]
OfflineOpt = Annotated[bool, typer.Option("--offline", help="Never use the network.")]


def _version_callback(value: bool) -> None:
    """Print the version and exit."""
    if value:
        print(f"localgen {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version_callback, is_eager=True,
                                          help="Show the version and exit.")] = False,
) -> None:
    """Chat with and generate text from local LLMs."""


class _SignalStop:
    """Turns SIGINT/SIGTERM during generation into a clean stop of the engine."""

    def __init__(self, stop: object) -> None:
        self._stop = stop
        self.signal: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> _SignalStop:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, _frame: object) -> None:
        if self.signal is not None:  # a second signal: stop waiting
            raise KeyboardInterrupt
        self.signal = signum
        self._stop()  # type: ignore[operator]

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]

    @property
    def exit_code(self) -> int | None:
        """The exit code this signal calls for, if one arrived."""
        if self.signal is None:
            return None
        return EXIT_TERMINATED if self.signal == signal.SIGTERM else EXIT_INTERRUPTED


@app.command()
def run(
    prompt: Annotated[str | None, typer.Argument(help="The instruction. Piped stdin and -f files come first.")] = None,
    model: ModelOpt = None,
    system: Annotated[str | None, typer.Option("--system", "-s", help="System prompt.")] = None,
    file: Annotated[list[Path] | None, typer.Option("--file", "-f", help="Attach a text file (repeatable).")] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", "-n", help="Stop after N tokens.")] = None,
    temperature: Annotated[float, typer.Option(help="0 = greedy.")] = DEFAULT_TEMPERATURE,
    top_k: Annotated[int, typer.Option(help="Top-k sampling (0 = off).")] = DEFAULT_TOP_K,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling.")] = DEFAULT_TOP_P,
    min_p: Annotated[float, typer.Option(help="Min-p sampling.")] = DEFAULT_MIN_P,
    repeat_penalty: Annotated[float, typer.Option(help="1 = off.")] = DEFAULT_REPEAT_PENALTY,
    seed: Annotated[int | None, typer.Option(help="Seed for reproducible sampling.")] = None,
    stop: Annotated[list[str] | None, typer.Option("--stop", help="Stop at this string (repeatable).")] = None,
    ctx_size: CtxOpt = None,
    threads: ThreadsOpt = None,
    threads_batch: Annotated[int | None, typer.Option(help="Threads for prefill (default: --threads).")] = None,
    batch_size: Annotated[int, typer.Option(help="Prefill chunk size.")] = DEFAULT_BATCH_SIZE,
    ubatch_size: Annotated[int, typer.Option(help="Physical batch size.")] = DEFAULT_UBATCH_SIZE,
    flash_attn: Annotated[str, typer.Option(help="auto, on or off.")] = "auto",
    kv_type: Annotated[str, typer.Option(help="KV cache type: f16, q8_0 or q4_0.")] = "f16",
    raw: Annotated[bool, typer.Option("--raw", help="Plain completion: no chat template.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of the stream.")] = False,
    stats: Annotated[bool, typer.Option("--stats", help="Print speed and token counts on stderr.")] = False,
    offline: OfflineOpt = False,
) -> None:
    """Generate an answer to PROMPT (and piped stdin / -f files), streamed to stdout."""
    from localgen import console
    from localgen.chat import Message, compose_user_message
    from localgen.events import Completion, TextChunk
    from localgen.inputs import gather_attachments
    from localgen.params import GenerationLimits, SamplingParams
    from localgen.runner import ModelOptions, load_model, stream_answer

    sampling = SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                              repeat_penalty=repeat_penalty, seed=seed)
    limits = GenerationLimits(max_tokens=max_tokens, stop=tuple(stop or ()))
    warnings: list[str] = []
    attachments, _ = gather_attachments(file or [], sys.stdin.buffer if sys.stdin else None, warnings)
    for message in warnings:
        console.warn(message)
    user_text = compose_user_message(prompt, attachments)
    if not user_text:
        raise UsageError("nothing to send: the prompt is empty",
                         hint='give a prompt, e.g. localgen run "Why is the sky blue?", or pipe text in')
    options = ModelOptions(model=model, ctx_size=ctx_size, threads=threads, threads_batch=threads_batch,
                           batch_size=batch_size, ubatch_size=ubatch_size, flash_attn=flash_attn,
                           kv_type=kv_type, offline=offline or None, raw=raw)
    loaded = load_model(options)
    if not loaded.prompt_format.is_chat and not raw:
        console.say(f"localgen: {loaded.resolved.display_name} has no chat template; "
                    "sending the text as a plain completion")
    messages = ([Message("system", system)] if system else []) + [Message("user", user_text)]
    output = console.TextOutput()
    completion: Completion | None = None
    pipe_closed = False
    with _SignalStop(loaded.engine.request_stop) as signals:
        for event in stream_answer(loaded, messages, sampling, limits):
            if isinstance(event, TextChunk) and not json_output and not pipe_closed:
                try:
                    output.write(event.text)
                except BrokenPipeError:
                    pipe_closed = True
                    loaded.engine.request_stop()
            elif isinstance(event, Completion):
                completion = event
    if pipe_closed:
        _silence_stdout()
        raise typer.Exit(EXIT_BROKEN_PIPE)
    assert completion is not None
    try:
        if json_output:
            record = completion.to_dict() | {"model": {"name": loaded.resolved.display_name,
                                                      "path": str(loaded.resolved.path)}}
            sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
            sys.stdout.flush()
        else:
            output.finish()
    except BrokenPipeError:
        _silence_stdout()
        raise typer.Exit(EXIT_BROKEN_PIPE) from None
    note = console.finish_note(completion)
    if note and completion.finish_reason != "interrupted":
        console.say(f"localgen: {note}")
    if stats:
        console.say(console.format_stats(completion))
    if signals.exit_code is not None:
        raise typer.Exit(signals.exit_code)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail on a closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _configure_logging() -> None:
    """Debug logging (llama.cpp's included) goes to stderr only with LOCALGEN_DEBUG=1."""
    if settings().debug:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(name)s: %(message)s")
    else:
        logging.getLogger("localgen").addHandler(logging.NullHandler())
        logging.getLogger("localgen").propagate = False


def _usage_error_text(exc: Exception) -> str:
    """A one-line version of a click usage error."""
    import click

    message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
    return " ".join(message.split())


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app and map every failure to a message and an exit code."""
    import click

    from localgen import console

    _configure_logging()
    try:
        result = app(args=argv, prog_name="localgen", standalone_mode=False)
        code = result if isinstance(result, int) else EXIT_OK
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.ClickException as exc:
        command = " ".join(sys.argv[1:2]) if argv is None else " ".join(argv[:1])
        console.error(_usage_error_text(exc), hint=f"see `localgen {command} --help`".replace("  ", " "))
        code = EXIT_USAGE
    except click.exceptions.Abort:
        code = EXIT_INTERRUPTED
    except LocalgenError as exc:
        if settings().debug:
            logging.getLogger("localgen").exception("error")
        console.error(exc.message, exc.hint)
        code = exc.exit_code
    except KeyboardInterrupt:
        console.say("")
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        code = EXIT_BROKEN_PIPE
    except Exception as exc:  # never a traceback for users; LOCALGEN_DEBUG=1 shows it
        if settings().debug:
            raise
        console.error(f"internal error: {type(exc).__name__}: {exc}",
                      hint="run again with LOCALGEN_DEBUG=1 and report the traceback")
        code = EXIT_RUNTIME
    sys.exit(code)

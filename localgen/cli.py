"""The `localgen` command line: thin commands that parse, call one service, and render."""

from __future__ import annotations

import io
import logging
import os
import sys
from typing import Annotated

import typer

from localgen import cli_examples
from localgen.cli_cache import cache_app
from localgen.cli_click_words import COMPLETE_VAR
from localgen.cli_conversations import conversations_app
from localgen.cli_exit import GIVEN_WORDS, InterruptEndsLine, flush_stdout, run_app, without_traceback
from localgen.cli_manage import models_app
from localgen.cli_options import (
    CTX_NAMES,
    RESUME_LATEST,
    BatchSizeOpt,
    BenchBatchSizeOpt,
    BenchGpuLayersOpt,
    BenchThreadsBatchOpt,
    BenchThreadsOpt,
    BenchUbatchSizeOpt,
    ChatTemplateOpt,
    CtxOpt,
    FlashAttnOpt,
    FrequencyPenaltyOpt,
    GpuLayersOpt,
    JsonOpt,
    KvTypeOpt,
    MinPOpt,
    ModelOpt,
    NoGpuOpt,
    OfflineOpt,
    PlainUsage,
    PresencePenaltyOpt,
    RepeatLastNOpt,
    RepeatPenaltyOpt,
    RunFlashAttnOpt,
    RunSystemFileOpt,
    SeedOpt,
    StopOpt,
    SystemFileOpt,
    SystemOpt,
    TemperatureOpt,
    ThinkOpt,
    ThreadsBatchOpt,
    ThreadsOpt,
    TopKOpt,
    TopPOpt,
    UbatchSizeOpt,
    bench_size_option,
    from_command_line,
    whole_option,
)
from localgen.config import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_DRAFT,
    DEFAULT_MIN_P,
    DEFAULT_REPEAT_LAST_N,
    DEFAULT_REPEAT_PENALTY,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_K,
    DEFAULT_TOP_P,
    DEFAULT_UBATCH_SIZE,
    debug_asked,
    offline_given,
)
from localgen.errors import EXIT_USAGE, UsageError

app = typer.Typer(
    name="localgen",
    cls=InterruptEndsLine,
    rich_markup_mode=None,  # click's plain help: rich's panels cost a tenth of a second at every --help
    help="Chat with and generate text from local LLMs.",
    epilog=cli_examples.ROOT,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version_callback(value: bool) -> None:
    """Print localgen's version and llama-cpp-python's, and exit."""
    if value:
        from localgen.cli_bare import version_line

        print(version_line())
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", callback=_version_callback, is_eager=True,
                                          help="Show the version and exit.")] = False,
) -> None:
    """Chat with and generate text from local LLMs."""
    from localgen.cli_args import asks_for_help
    from localgen.config import check_environment
    from localgen.hub_errors import set_running_command

    set_running_command(ctx.invoked_subcommand)
    ctx.call_on_close(lambda: set_running_command(None))  # a test's or script's next command in this process
    if not asks_for_help(app, ctx.meta.get(GIVEN_WORDS, [])):  # a command's help, whatever the environment
        check_environment()


@app.command(short_help="Answer a prompt (with piped stdin and -f files) on stdout.", epilog=cli_examples.RUN)
def run(
    ctx: typer.Context,
    prompt: Annotated[str | None, typer.Argument(
        metavar="PROMPT", help="The instruction; - reads it from stdin. Piped stdin and -f files come first.")] = None,
    model: ModelOpt = None,
    system: SystemOpt = None,
    system_file: RunSystemFileOpt = None,
    file: Annotated[list[str] | None, typer.Option(
        "--file", "-f", metavar="FILE", help="Attach a text file (repeatable; - is stdin).")] = None,
    max_tokens: Annotated[int | None, whole_option(
        "--max-tokens", "-n", help="Stop after N tokens (-1: no limit, the default).")] = None,
    temperature: TemperatureOpt = DEFAULT_TEMPERATURE,
    top_k: TopKOpt = DEFAULT_TOP_K,
    top_p: TopPOpt = DEFAULT_TOP_P,
    min_p: MinPOpt = DEFAULT_MIN_P,
    repeat_penalty: RepeatPenaltyOpt = DEFAULT_REPEAT_PENALTY,
    repeat_last_n: RepeatLastNOpt = DEFAULT_REPEAT_LAST_N,
    presence_penalty: PresencePenaltyOpt = 0.0,
    frequency_penalty: FrequencyPenaltyOpt = 0.0,
    seed: SeedOpt = None,
    stop: StopOpt = None,
    json_schema: Annotated[str | None, typer.Option(
        "--json-schema", metavar="SCHEMA",
        help="Answer with JSON that follows this JSON schema (its text, or a file).")] = None,
    grammar: Annotated[str | None, typer.Option(
        "--grammar", "--grammar-file", metavar="GBNF",
        help="Answer in the language of this GBNF grammar (its text, or a file).")] = None,
    ctx_size: CtxOpt = None,
    threads: ThreadsOpt = None,
    threads_batch: ThreadsBatchOpt = None,
    batch_size: BatchSizeOpt = DEFAULT_BATCH_SIZE,
    ubatch_size: UbatchSizeOpt = DEFAULT_UBATCH_SIZE,
    flash_attn: RunFlashAttnOpt = "auto",
    kv_type: KvTypeOpt = "f16",
    raw: Annotated[bool, typer.Option(
        "--raw", help="Plain completion: no chat template (a --system text goes first, then a blank line).")] = False,
    chat_template: ChatTemplateOpt = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of the stream.")] = False,
    print_prompt: Annotated[bool, typer.Option(
        "--print-prompt", help="Print the prompt the model would be given (template applied) and exit.")] = False,
    continue_latest: Annotated[bool, typer.Option(
        "--continue", help="Continue the newest conversation (the last plain run, or the latest saved one); the "
        "exchange is added to it.")] = False,
    conversation_name: Annotated[str | None, typer.Option(
        "--conversation", metavar="NAME", help="Continue conversation NAME (or start it); the exchange is saved in it.")
    ] = None,
    stats: Annotated[bool, typer.Option("--stats", "--verbose", help="Print speed and token counts on stderr.")
                     ] = False,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="Nothing on stderr but errors and the warnings that the exchange of a continued "
                              "conversation (--conversation, --continue) was saved as NAME-2, or that an answer an "
                              "error cut short was not saved in it: no notes, other warnings or progress.")] = False,
    no_wrap: Annotated[bool, typer.Option(
        "--no-wrap", "--nowordwrap", help="On a terminal, keep the model's lines whole (no word wrap).")] = False,
    hide_thinking: Annotated[bool, typer.Option(
        "--hide-thinking", "--hidethinking", help="Leave the <think> reasoning out of the output (--json: in "
                                                  "`thinking`).")] = False,
    think: ThinkOpt = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="No on-disk prompt cache.")] = False,
    draft: Annotated[str, typer.Option(
        metavar="MODE", help="Speculative decoding: lookup (n-gram drafts from the prompt) or none.")] = DEFAULT_DRAFT,
    gpu_layers: GpuLayersOpt = None,
    no_gpu: NoGpuOpt = False,
    offline: OfflineOpt = False,
) -> None:
    """Generate an answer to PROMPT (and piped stdin / -f files), streamed to stdout."""
    from localgen.cli_run_flow import RunRequest, run_command

    with offline_given(offline):
        run_command(RunRequest(
            ctx, prompt=prompt, model=model, system=system, system_file=system_file, files=tuple(file or ()),
            max_tokens=max_tokens, stop=tuple(stop or ()), json_schema=json_schema, grammar=grammar, ctx_size=ctx_size,
            raw=raw, chat_template=chat_template, json_output=json_output, print_prompt=print_prompt,
            continue_latest=continue_latest, conversation_name=conversation_name, stats=stats, quiet=quiet,
            no_wrap=no_wrap, hide_thinking=hide_thinking, think=think, no_cache=no_cache, draft=draft))


@app.command(short_help="Chat with a model in the terminal.", epilog=cli_examples.CHAT)
def chat(
    ctx: typer.Context,
    model: ModelOpt = None,
    system: SystemOpt = None,
    system_file: SystemFileOpt = None,
    max_tokens: Annotated[int | None, whole_option(
        "--max-tokens", "-n", help="Longest answer in tokens (-1: no limit, the default).")] = None,
    temperature: TemperatureOpt = DEFAULT_TEMPERATURE,
    top_k: TopKOpt = DEFAULT_TOP_K,
    top_p: TopPOpt = DEFAULT_TOP_P,
    min_p: MinPOpt = DEFAULT_MIN_P,
    repeat_penalty: RepeatPenaltyOpt = DEFAULT_REPEAT_PENALTY,
    repeat_last_n: RepeatLastNOpt = DEFAULT_REPEAT_LAST_N,
    presence_penalty: PresencePenaltyOpt = 0.0,
    frequency_penalty: FrequencyPenaltyOpt = 0.0,
    seed: SeedOpt = None,
    stop: StopOpt = None,
    ctx_size: CtxOpt = None,
    threads: ThreadsOpt = None,
    threads_batch: ThreadsBatchOpt = None,
    batch_size: BatchSizeOpt = DEFAULT_BATCH_SIZE,
    ubatch_size: UbatchSizeOpt = DEFAULT_UBATCH_SIZE,
    flash_attn: FlashAttnOpt = "auto",
    kv_type: KvTypeOpt = "f16",
    no_markdown: Annotated[bool, typer.Option("--no-markdown", help="Print answers as plain text.")] = False,
    no_wrap: Annotated[bool, typer.Option(
        "--no-wrap", "--nowordwrap", help="Keep the answers' lines whole (no word wrap; /wrap on turns it on).")
    ] = False,
    hide_thinking: Annotated[bool, typer.Option("--hide-thinking", "--hidethinking", help="Hide <think> reasoning.")
                             ] = False,
    think: ThinkOpt = None,
    stats: Annotated[bool, typer.Option("--stats", "--verbose", help="Show speed and token counts after every answer.")
                     ] = False,
    no_prefill_while_typing: Annotated[bool, typer.Option(
        "--no-prefill-while-typing", help="Read a message only once it is sent (by default its prompt is computed "
        "as you type, so answers start at once).")] = False,
    resume: Annotated[str | None, typer.Option(
        "--resume", "--continue", metavar="[NAME]",
        help="Reopen the last conversation (`--resume`), or the one named NAME.")] = None,
    file: Annotated[list[str] | None, typer.Option(
        "--file", "-f", metavar="FILE", help="Attach a text file to the first message (repeatable).")] = None,
    chat_template: ChatTemplateOpt = None,
    gpu_layers: GpuLayersOpt = None,
    no_gpu: NoGpuOpt = False,
    offline: OfflineOpt = False,
) -> None:
    """Chat interactively with a model (history, slash commands, Ctrl-C stops an answer)."""
    from localgen.cli_chat_flow import ChatRequest, chat_command

    with offline_given(offline):
        chat_command(ChatRequest(
            ctx, model=model, system=system, system_file=system_file, max_tokens=max_tokens, stop=tuple(stop or ()),
            ctx_size=ctx_size, markdown=not no_markdown, wrap=not no_wrap, show_thinking=not hide_thinking, stats=stats,
            prefill_while_typing=not no_prefill_while_typing, resume=resume, files=tuple(file or ()),
            chat_template=chat_template, think=think))


@app.command(short_help="Measure prefill, decode and TTFT, like llama-bench.", epilog=cli_examples.BENCH)
def bench(
    ctx: typer.Context,
    model: ModelOpt = None,
    n_prompt: Annotated[int, bench_size_option(
        "--n-prompt", "-p", help="Prompt tokens for the prefill test (0 skips it).")] = 512,
    n_gen: Annotated[int, bench_size_option("--n-gen", "-n", help="Tokens for the decode test (0 skips it).")] = 128,
    reps: Annotated[int, bench_size_option("--repetitions", "-r", help="Repetitions of each test.")] = 5,
    threads: BenchThreadsOpt = None,
    threads_batch: BenchThreadsBatchOpt = None,
    batch_size: BenchBatchSizeOpt = DEFAULT_BATCH_SIZE,
    ubatch_size: BenchUbatchSizeOpt = DEFAULT_UBATCH_SIZE,
    flash_attn: FlashAttnOpt = "auto",
    kv_type: KvTypeOpt = "f16",
    gpu_layers: BenchGpuLayersOpt = None,
    no_gpu: NoGpuOpt = False,
    json_output: JsonOpt = False,
    offline: OfflineOpt = False,
) -> None:
    """Measure prefill and decode speed, TTFT and KV-reuse TTFT (like llama-bench's pp and tg tests)."""
    from localgen import console
    from localgen.bench import BenchConfig, BenchInterrupted, format_result, model_line, run_bench
    from localgen.bench_contention import BusyWarnings
    from localgen.signals import signal_exit_code

    def started(name: str, path: str) -> None:
        """The table's first line, printed before the first test: a stdout that cannot be written fails now."""
        console.print_lines(model_line(name, path))

    busy = BusyWarnings(console.warn)
    config = BenchConfig(n_prompt=n_prompt, n_gen=n_gen, reps=reps)
    try:
        with offline_given(offline):
            result = run_bench(model=model, config=config, threads=threads, threads_batch=threads_batch,
                               batch_size=batch_size if from_command_line(ctx, "batch_size") else None,
                               ubatch_size=ubatch_size, flash_attn=flash_attn, kv_type=kv_type,
                               gpu_layers=gpu_layers, no_gpu=no_gpu, progress=console.say,
                               started=None if json_output else started, warned=busy.before)
    except BenchInterrupted as stopped:
        console.say("localgen: interrupted before any repetition finished: nothing was measured")
        raise typer.Exit(signal_exit_code(stopped.signum)) from None
    if json_output:
        console.print_json(result.to_dict(), indent=2)  # as the other listings and reports; run --json is one line
    else:
        console.print_lines(format_result(result, first_line=False))
    busy.after(result)
    if result.interrupted:
        raise typer.Exit(signal_exit_code(result.stopped_by))


app.add_typer(cache_app, name="cache", short_help="List or clear the on-disk prompt cache.")


@app.command(short_help="Download and verify models from the Hugging Face Hub.", cls=PlainUsage,
             epilog=cli_examples.PULL)
def pull(
    references: Annotated[list[str], typer.Argument(
        metavar="REF...", help="NAME[:QUANT], ORG/REPO[:QUANT], ORG/REPO/FILE.gguf or a Hub address; several are "
                               "pulled one after the other.")],
    force: Annotated[bool, typer.Option("--force", help="Download again even if cached.")] = False,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="Nothing on stderr but errors and the warning that a run will refuse a model here: no "
                          "progress or notes.")] = False,
) -> None:
    """Download models from the Hugging Face Hub, verify them, and print each one's local path.

    A registry name without a quant gets its default quant; ORG/REPO gets the best quant that fits, as for `run`.
    A model already downloaded is checked against the Hub, and downloaded again where the Hub's copy changed; one
    bundled with a package, or a file on this machine, is said to be there already. Every reference is checked
    before any download; a pull that fails is said, and the next one goes on.
    """
    from localgen.cli_pull import pull_models

    options = [*(["--force"] if force else []), *(["--quiet"] if quiet else [])]
    code = pull_models(references, force=force, quiet=quiet, options=options)
    if code:
        raise typer.Exit(code)


app.add_typer(models_app, name="models")
app.add_typer(conversations_app, name="conversations", short_help="List, show, rename and delete saved conversations.")


@app.command(short_help="Show which quants of a model fit this machine.", epilog=cli_examples.FIT)
def fit(
    reference: Annotated[str | None, typer.Argument(
        metavar="[REF]", help="NAME[:QUANT], ORG/REPO[:QUANT], ORG/REPO/FILE.gguf, a Hub address or a .gguf path; "
                              "without one, the model -m names, else the default model.")] = None,
    model: ModelOpt = None,
    ctx: Annotated[int | None, whole_option(*CTX_NAMES, help="Context size to plan for.")] = None,
    kv_type: KvTypeOpt = "f16",
    gpu_layers: GpuLayersOpt = None,
    no_gpu: NoGpuOpt = False,
    json_output: JsonOpt = False,
    offline: OfflineOpt = False,
) -> None:
    """Show whether each quant of a model fits this machine (from file headers, before any download)."""
    from localgen import console
    from localgen.fit import FitRequest
    from localgen.hardware import cpu_only_warning_once, probe_hardware
    from localgen.model_file_errors import named_as_typed
    from localgen.quant_report import fit_report, report_table

    if reference is not None and model is not None and reference != model:
        raise UsageError(f"fit takes one model, and was given two: {reference} and -m {model}",
                         hint="name the model once, as REF or with -m")
    reference = reference if reference is not None else model
    request = FitRequest(ctx_size=ctx, gpu_layers=gpu_layers, no_gpu=no_gpu, kv_type=kv_type)
    hw = probe_hardware()
    with named_as_typed(reference), offline_given(offline):
        report = fit_report(reference, request=request, hw=hw)
    if json_output:
        console.print_json(report.to_dict(), indent=2)
        return
    warning = cpu_only_warning_once(hw)
    if warning:
        console.warn(warning)
    for note in report.notes:
        console.say(f"localgen: {note}")
    title, headers, rows = report_table(report)
    console.say(title)
    console.print_table(headers, rows, squeeze=("PLAN",), marked=report.chosen)
    if report.chosen is not None:
        chosen = report.options[report.chosen].label
        console.say("* the quant localgen would use here" if sys.stdout.isatty()
                    else f"localgen: {chosen} is the quant localgen would use here")


def _configure_logging() -> None:
    """Debug logging (llama.cpp's included) goes to stderr only with LOCALGEN_DEBUG=1."""
    if debug_asked():
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(name)s: %(message)s")
    else:
        logging.getLogger("localgen").addHandler(logging.NullHandler())
        logging.getLogger("localgen").propagate = False


def _resume_without_value(argv: list[str]) -> list[str]:
    """Let chat's `--resume` (or `--continue`) go without a value: alone it means the latest (RESUME_LATEST).

    Nothing is imported here: a Ctrl-C in a module's making (wrapped in a RuntimeError) would come before run_app."""
    result = list(argv)
    command = next((token for token in result if not token.startswith("-")), None)
    if command != "chat":
        return result
    for index, token in enumerate(result):
        if token == "--":
            break
        if token in ("--resume", "--continue") and (index + 1 == len(result) or result[index + 1].startswith("-")):
            result[index] = f"{token}={RESUME_LATEST}"
    return result


def _help_as_option(argv: list[str]) -> list[str]:
    """`localgen help [COMMAND ...]`, as git and Ollama take it, is `localgen [COMMAND ...] --help`."""
    if argv[:1] != ["help"]:
        return list(argv)
    words = list(argv)
    while words[:1] == ["help"]:
        words.pop(0)
    return [*words, "--help"]


def _unfailing_stdout() -> None:
    """Model text goes to a pipe or file as UTF-8 whatever the locale says, and to a terminal that cannot show a
    character as '?' instead of an error."""
    if not isinstance(sys.stdout, io.TextIOWrapper):
        return
    if sys.stdout.isatty():
        sys.stdout.reconfigure(errors="replace")
    else:
        sys.stdout.reconfigure(encoding="utf-8", errors="replace")


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app and map every failure to a message and an exit code."""
    from localgen import console
    from localgen.signals import exit_on_signals

    _configure_logging()
    if sys.stderr is None:  # 2>&-: messages have nowhere to go
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (for the life of the process)
    if sys.stdout is None:
        console.error("stdout is closed: there is nowhere to write the output",
                      hint="redirect it to a file or a pipe instead of closing it")
        sys.exit(EXIT_USAGE)
    _unfailing_stdout()
    if os.environ.get(COMPLETE_VAR):  # the shell asks for its script, or for the words completing a command line
        from localgen.cli_completion import complete

        sys.exit(flush_stdout(without_traceback(lambda: complete(app, COMPLETE_VAR))))
    with exit_on_signals():  # SIGTERM or SIGHUP while downloading or loading: cleanups run, partial files go
        args = sys.argv[1:] if argv is None else argv
        if not args:  # text piped in, `run` forgotten: not dropped silently
            from localgen.cli_bare import refuse_no_command, stdin_may_send_text

            if stdin_may_send_text():
                refuse_no_command()
        code = run_app(app, _help_as_option(_resume_without_value(args)), help_asked=args[:1] == ["help"])
    sys.exit(flush_stdout(code))

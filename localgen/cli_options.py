"""The options `run`, `chat` and the other commands share, and what the command line says about them."""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperArgument, TyperCommand

from localgen.config import DEFAULT_CONTEXT_CAP
from localgen.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from typer.models import OptionInfo

    from localgen.params import GenerationLimits, SamplingParams
    from localgen.registry import ModelDefaults


RESUME_LATEST = "\0"  # chat's --resume without a value: the latest conversation (an argument never holds a NUL)

_WHOLE = re.compile(r"[+-]?[0-9]+")
_BENCH_LIST = re.compile(r"[0-9]+(\s*,\s*[0-9]+)+")  # llama-bench's -p 512,1024
_BENCH_RANGE = re.compile(r"([0-9]+)-([0-9]+)(?:([+*])([0-9]+))?")  # and its -p 128-512+128 (or *2: doubling)
_REAL = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(e[+-]?[0-9]+)?|[+-]?(inf|infinity|nan)", re.IGNORECASE)


_DECIMAL_COMMA = re.compile(r"[+-]?[0-9]*,[0-9]+")  # 0,7: a decimal point in many languages
_THOUSANDS = re.compile(r"[+-]?[1-9][0-9]{0,2}(,[0-9]{3})+")  # 4,096: thousands set apart (0,512 is no number)


class NumberSlip(typer.BadParameter):
    """A number an option cannot read, typed as people write it elsewhere (0,7; 4,096), or any other text (warm; for
    a whole number, 1.5 too): text, as typed, and whether the option takes a whole number."""

    def __init__(self, message: str, text: str, *, whole: bool) -> None:
        super().__init__(message)
        self.text, self.whole = text, whole

    def hint_for(self, option: str) -> str:
        """How to write it, given to option as typed (-c 4096; --temp 0.7), as the chat's /set says it; "" for
        other text (cli_option_values.number_hint says what the option takes)."""
        return number_slip_hint(self.text, whole=self.whole, example=f"{option} {{}}") or ""


def _ascii(value: object, pattern: re.Pattern[str], kind: str) -> str:
    """The text of a number typed in ASCII digits: int() and float() also read 1_0 as 10 and other scripts' digits
    (３) as numbers, which no one types on purpose; any other text is a NumberSlip, told how to write it."""
    text = str(value).strip()
    if pattern.fullmatch(text):
        return text
    raise NumberSlip(f"{value!r} is not a valid {kind}", text, whole=kind == "integer")


def number_slip_hint(text: str, *, whole: bool, example: str = "{}") -> str | None:
    """How to write a number typed with a decimal comma (0,7) or, for a whole number, a thousands one (4,096): the
    number as it reads, put in example (the chat's "/set temperature {}", the command line's "--temp {}"); None for
    any other text."""
    if not whole and _DECIMAL_COMMA.fullmatch(text):
        return f"the decimal point is '.': {example.format(text.replace(',', '.'))}"
    if whole and _THOUSANDS.fullmatch(text):
        return f"write it without separators: {example.format(text.replace(',', ''))}"
    return None


def typed_as_number(text: str) -> bool:
    """Whether text an option could not read was typed as a number (2.5, .5, 1e308, nan, 4,096, 8k), a short
    option's = before it too (-t=2.5, which click reads as "=2.5"): not a word, as llm's -t TEMPLATE or -c PROMPT."""
    value = text.strip().removeprefix("=")
    return value.lstrip("+-.")[:1].isdigit() or _REAL.fullmatch(value) is not None


def whole_option(*names: str, help: str) -> OptionInfo:
    """An integer option whose value is typed in ASCII digits."""
    return typer.Option(*names, help=help, parser=whole_number, metavar="INTEGER")


class BenchList(NumberSlip):
    """A bench size typed as llama-bench's list or range (512,1024; 128-512+128), which localgen's bench takes one
    value of at a time: values, as a shell's for loop lists them; grouped, whether it may as well be one number with
    its thousands set apart (10,500)."""

    def __init__(self, text: str, names: tuple[str, ...], values: str, *, grouped: bool) -> None:
        super().__init__(f"{'/'.join(sorted(names, key=len))} takes one value, " + (
            f"and {text} may be one number with its thousands set apart or llama-bench's list of "
            f"{_listed(values)}" if grouped else f"not a list or range as llama-bench's does ({text})"),
            text, whole=True)
        self.values, self.grouped = values, grouped

    def format_message(self) -> str:
        """The message as it is, without click's 'Invalid value for ...'."""
        return self.message

    def hint_for(self, option: str) -> str:
        """A loop that runs bench once per value, given to option as typed (-p $n; --n-prompt $n), and for a list
        that may be one number, that number too."""
        loop = f"run localgen bench once per value: for n in {self.values}; do localgen bench {option} $n; done"
        if not self.grouped:
            return loop
        return f"as one number, write it without separators: {option} {self.text.replace(',', '')}; as a list, {loop}"


def bench_size_option(*names: str, help: str) -> OptionInfo:
    """A whole-number option of `bench` that llama-bench takes as a list or a range (-p 512,1024): refused as one
    with a way to measure each value (BenchList)."""
    def parse(value: str | int) -> int:
        """The value, refused when it is a llama-bench list or range."""
        text = str(value).strip()
        values = None if isinstance(value, int) else _bench_values(text)
        if values is not None:  # 10,500 may be one number too, where 256,512 lists sizes as tokens go
            grouped = _THOUSANDS.fullmatch(text) is not None and not all(
                _power_of_two(int(part)) for part in text.split(","))
            raise BenchList(text, names, values, grouped=grouped)
        return whole_number(value)

    return typer.Option(*names, help=help, parser=parse, metavar="INTEGER")


def _listed(values: str) -> str:
    """'10 and 500', '1, 2 and 3': a for loop's values in words."""
    from localgen.units import alternatives

    return alternatives(values.split(), "and")


def _power_of_two(number: int) -> bool:
    """Whether a number is a power of two (1, 2, 4, ..., 512, ...)."""
    return number > 0 and number & (number - 1) == 0


def _bench_values(text: str) -> str | None:
    """The values of a llama-bench list or range as a shell's for loop lists them (None: text is neither, or one
    number with its thousands set apart)."""
    if _BENCH_LIST.fullmatch(text) and not _grouped_number(text):
        return " ".join(part.strip() for part in text.split(","))
    matched = _BENCH_RANGE.fullmatch(text)
    if matched is None:
        return None
    first, last, how, step = matched.groups()
    if how == "*" and int(step) > 1 and int(first) > 0:
        values, value = [], int(first)
        while value <= int(last):
            values.append(str(value))
            value *= int(step)
        return " ".join(values)
    return f"$(seq {first} {step if how == '+' else 1} {last})"


def _grouped_number(text: str) -> bool:
    """Whether digits in groups of three after commas are one number with its thousands set apart rather than a
    llama-bench list: a group led by a 0 (4,096; 1,000) or a power of two, as sizes in tokens go (16,384), where
    256,512 and 128,256,512 list sizes (and 10,500 may be either: BenchList says both)."""
    if not _THOUSANDS.fullmatch(text):
        return False
    groups = text.split(",")
    return any(group.startswith("0") for group in groups[1:]) or _power_of_two(int("".join(groups)))


def real_option(*names: str, help: str) -> OptionInfo:
    """A float option whose value is typed in ASCII digits."""
    return typer.Option(*names, help=help, parser=real_number, metavar="FLOAT")


def whole_number(value: str | int) -> int:
    """An integer option's value (its default passes as it is)."""
    return value if isinstance(value, int) else int(_ascii(value, _WHOLE, "integer"))


def real_number(value: str | float) -> float:
    """A float option's value (its default passes as it is)."""
    return value if isinstance(value, (int, float)) else float(_ascii(value, _REAL, "float"))


def _lower(value: str) -> str:
    """An option's value in lower case (names of modes and types are case-insensitive, like quant tags)."""
    return value.lower()


ModelOpt = Annotated[str | None, typer.Option(
    "--model", "-m", metavar="REF",
    help="Registry name, ORG/REPO[:QUANT], ORG/REPO/FILE.gguf, a Hub address, or a .gguf path.")]
CTX_NAMES = ("--ctx-size", "-c", "--ctx")  # run, chat and fit alike (fit's README example types --ctx)
CtxOpt = Annotated[int | None, whole_option(
    *CTX_NAMES, help=f"Context size in tokens (default: a resumed conversation's, else models.toml's, else the "
    f"model's up to {DEFAULT_CONTEXT_CAP:,}; more for a long input).")]
ThreadsOpt = Annotated[int | None, whole_option(
    "--threads", "-t", help="CPU threads (default: the physical cores, fewer while other processes keep them busy).")]
OfflineOpt = Annotated[bool, typer.Option("--offline", help="Never use the network.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="JSON output.")]
# a group run alone lists (list_by_default): its options are list's, shown in list's help, not the group's
ListingJsonOpt = Annotated[bool, typer.Option("--json", hidden=True)]
GPU_LAYERS_NAMES = ("--gpu-layers", "-ngl")
GPU_LAYERS_HELP = "Layers to offload to the GPU (-1 = all; default: as many as fit)."
GpuLayersOpt = Annotated[int | None, whole_option(*GPU_LAYERS_NAMES, help=GPU_LAYERS_HELP)]
NoGpuOpt = Annotated[bool, typer.Option("--no-gpu", help="Run on the CPU only.")]
SystemOpt = Annotated[str | None, typer.Option(
    "--system", "-s", metavar="TEXT", help='System prompt ("": an empty one; none: the chat template\'s own).')]
SYSTEM_FILE_NAMES = ("--system-file", "-sysf")
SYSTEM_FILE_HELP = "System prompt read from a text file"  # chat's, which refuses - (its stdin is the terminal)
SystemFileOpt = Annotated[str | None, typer.Option(*SYSTEM_FILE_NAMES, metavar="FILE", help=f"{SYSTEM_FILE_HELP}.")]
RunSystemFileOpt = Annotated[str | None, typer.Option(
    *SYSTEM_FILE_NAMES, metavar="FILE", help=f"{SYSTEM_FILE_HELP} (- is stdin).")]
TemperatureOpt = Annotated[float, real_option("--temperature", "--temp", help="0 = greedy.")]
TopKOpt = Annotated[int, whole_option(help="Top-k sampling (0 = off).")]
TopPOpt = Annotated[float, real_option(help="Nucleus sampling.")]
MinPOpt = Annotated[float, real_option(help="Min-p sampling.")]
RepeatPenaltyOpt = Annotated[float, real_option(help="1 = off.")]
RepeatLastNOpt = Annotated[int, whole_option(
    help="Tokens the penalties look back on (0 = off, -1 = the whole context).")]
PresencePenaltyOpt = Annotated[float, real_option(help="Lower tokens already used (0 = off).")]
FrequencyPenaltyOpt = Annotated[float, real_option(help="Lower tokens by how often they were used (0 = off).")]
SeedOpt = Annotated[int | None, whole_option(help="Seed for reproducible sampling (-1: random).")]
StopOpt = Annotated[list[str] | None, typer.Option("--stop", metavar="TEXT", help="Stop at this string (repeatable).")]
ThreadsBatchOpt = Annotated[int | None, whole_option(help="Threads for prefill (default: --threads).")]
BatchSizeOpt = Annotated[int, whole_option(help="Prefill chunk size.")]
UbatchSizeOpt = Annotated[int, whole_option(help="Physical batch size.")]
# bench's, which llama-bench takes as lists (-t 4,8): refused as one, with a loop that runs each
BenchThreadsOpt = Annotated[int | None, bench_size_option(
    "--threads", "-t", help="CPU threads (default: the physical cores).")]
BenchThreadsBatchOpt = Annotated[int | None, bench_size_option(
    "--threads-batch", help="Threads for prefill (default: --threads).")]
BenchBatchSizeOpt = Annotated[int, bench_size_option("--batch-size", help="Prefill chunk size.")]
BenchUbatchSizeOpt = Annotated[int, bench_size_option("--ubatch-size", help="Physical batch size.")]
BenchGpuLayersOpt = Annotated[int | None, bench_size_option(*GPU_LAYERS_NAMES, help=GPU_LAYERS_HELP)]
FlashAttnOpt = Annotated[str, typer.Option(
    metavar="MODE", help="auto (on for a GPU, a quantized KV cache or a context over 8,192; else off), on or off.",
    callback=_lower)]
RunFlashAttnOpt = Annotated[str, typer.Option(  # run's auto also turns it on for --draft lookup
    metavar="MODE", help="auto (on for a GPU, a quantized KV cache, a context over 8,192 or --draft lookup; else off), "
    "on or off.", callback=_lower)]
KvTypeOpt = Annotated[str, typer.Option(metavar="TYPE", help="KV cache type: f16, q8_0 or q4_0.", callback=_lower)]
ChatTemplateOpt = Annotated[str | None, typer.Option(
    "--chat-template", metavar="FILE", help="Jinja chat template file, used instead of the model's.")]
ThinkOpt = Annotated[str | None, typer.Option(
    "--think", metavar="on|off", help="Let a hybrid reasoning model (Qwen3, SmolLM3, DeepSeek-V3.1) think before it "
    "answers, or not, through its chat template's switch; GPT-OSS takes low, medium or high (default: as the template "
    "has it).")]


class PlainUsage(TyperCommand):
    """A command whose usage line writes a required argument as click does (localgen pull [OPTIONS] REF...), where
    Typer puts it in braces ({REF...}), which read as a set of choices."""

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:
        """[OPTIONS], then each argument: in brackets when optional, plain when required."""
        return [*([self.options_metavar] if self.options_metavar else []), *(
            piece for param in self.get_params(ctx)
            for piece in ([param.make_metavar(ctx)] if isinstance(param, TyperArgument) and param.required
                          else param.get_usage_pieces(ctx)))]


def sampling_from(ctx: typer.Context) -> SamplingParams:
    """The sampler settings run or chat was given: an option named as each of SamplingParams' fields but grammar
    (made of --grammar and --json-schema); a field no option is named as (one renamed) is a TypeError, a mistake in
    localgen, where the setting would be left at its default unsaid."""
    from dataclasses import fields

    from localgen.params import SamplingParams

    names = [f.name for f in fields(SamplingParams) if f.name != "grammar"]
    missing = [name for name in names if name not in ctx.params]
    if missing:
        raise TypeError(f"`localgen {ctx.info_name}` has no option named as SamplingParams' {', '.join(missing)}")
    return SamplingParams(**{name: ctx.params[name] for name in names})


def given_settings(ctx: typer.Context) -> dict[str, str]:
    """The chat settings given on the command line (they win over a resumed conversation's), as text."""
    from localgen.session import SETTING_NAMES

    return {name: str(ctx.params[name]) for name in SETTING_NAMES
            if from_command_line(ctx, name) and ctx.params.get(name) is not None}


def from_command_line(ctx: typer.Context, name: str) -> bool:
    """True when the option was given on the command line (not a default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def typed_name(ctx: typer.Context, name: str) -> str:
    """The name the command line gave an option (its parameter's name) by: --grammar-file for --grammar."""
    from localgen.cli_args import arity, name_given

    param = next(param for param in ctx.command.params if param.name == name)
    return name_given((*param.opts, *param.secondary_opts), arity(ctx.command.params))


def with_model_settings(ctx: typer.Context, defaults: ModelDefaults, sampling: SamplingParams,
                        limits: GenerationLimits) -> tuple[SamplingParams, GenerationLimits]:
    """The settings and stop strings with the ones models.toml chose for the model (registry.model_defaults) where
    the command line gave none (--stop: its own stop strings in place of all of models.toml's)."""
    from dataclasses import replace

    from localgen.params import with_settings

    given = given_settings(ctx)
    if not from_command_line(ctx, "stop"):
        limits = replace(limits, stop=defaults.stop)
    return with_settings(sampling, limits, {key: value for key, value in defaults.settings.items()
                                            if key not in given})


def list_by_default(ctx: typer.Context, listing: Callable[..., None], *, json_output: bool, **flags: object) -> None:
    """A command group run alone lists (`localgen X` = `localgen X list`, with json_output and the group's other
    flags, by parameter name); given before a subcommand, they are refused, as they would be ignored."""
    if ctx.invoked_subcommand is None:
        listing(json_output=json_output, **flags)
        return
    for param, given in {"json_output": json_output, **flags}.items():
        if given is not None and given is not False:  # -n 0 was given too
            misplaced_option(ctx, param)


def misplaced_option(ctx: typer.Context, param: str = "json_output") -> None:
    """Refuse a group's option (--json) given before a subcommand: it would be ignored."""
    option = next(p.opts[0] for p in ctx.command.params if p.name == param)
    name = ctx.invoked_subcommand or ""
    command = getattr(ctx.command, "commands", {}).get(name)
    takes_it = command is not None and any(p.name == param for p in command.params)
    where = f"localgen {ctx.info_name} {name}"
    if takes_it:
        import shlex

        from localgen.cli_args import with_group_options_last

        taken = {p.name for p in command.params}  # (the group's options the subcommand takes move together)
        typed = with_group_options_last(ctx.info_name or "", name, [p for p in ctx.command.params if p.name in taken])
        after = shlex.join(["localgen", *typed]) if typed else f"{where} ... {option}"
        raise UsageError(f"{option} before `{name}` would be ignored", hint=f"put it after: `{after}`")
    if option == "--json":
        raise UsageError(f"`{where}` has no JSON output", hint="drop --json")
    raise UsageError(f"`{where}` has no {option} option", hint=f"drop {option}")


def confirmed(verb: str, what: str, *, yes: bool, declined: str) -> bool:
    """Whether to verb ("remove", "delete") what: --yes, or the answer on a terminal (declined is said on a no, and on
    a Ctrl-C, which then ends the command as a Ctrl-C does); without a terminal, --yes is needed."""
    from localgen import console

    if yes:
        return True
    if sys.stdin is not None and sys.stdin.isatty():
        try:
            agreed = console.confirm(f"{verb} {what}?")
        except KeyboardInterrupt:
            console.say(f"localgen: {declined}")
            raise typer.Abort from None  # exit 130, with nothing more said
        if agreed:
            return True
        console.say(f"localgen: {declined}")
        return False
    doing = f"{verb.removesuffix('e')}ing"  # remove: removing, delete: deleting
    raise UsageError(f"{doing} {what} needs confirmation", hint="pass --yes (or -y) to go ahead where no terminal "
                                                               "can ask")

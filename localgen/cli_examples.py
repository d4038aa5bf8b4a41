"""The Examples paragraph at the end of each command's --help."""

from __future__ import annotations


def examples(*lines: str) -> str:
    """An epilog of example command lines, kept as written (click's \\b marks a paragraph it must not rewrap)."""
    return "\b\nExamples:\n" + "".join(f"  {line}\n" for line in lines)


ROOT = examples(
    'localgen run "Why is the sky blue?"',
    'cat notes.md | localgen run "Summarize this" > summary.txt',
    "localgen chat -m qwen2.5-1.5b",
    "localgen models list --all",
) + "\n`localgen help COMMAND` (or `localgen COMMAND --help`) shows a command's options."
RUN = examples(
    'localgen run "Why is the sky blue?"',
    'cat notes.md | localgen run "Summarize this" > summary.txt',
    'localgen run -f report.txt -f data.csv "Compare these two"',
    'localgen run --json -n 64 "Name three colours" | jq -r .text',
    'localgen run --conversation trip "Plan a day in Lisbon"',
    'localgen run --continue "And the next day?"',
)
CHAT = examples(
    "localgen chat",
    'localgen chat -m qwen2.5-1.5b -s "Answer in one sentence."',
    "localgen chat -f notes.md",
    "localgen chat --resume            # the newest saved conversation (or --resume NAME)",
)
BENCH = examples(
    "localgen bench",
    "localgen bench -m qwen2.5-1.5b -p 1024 -n 256 -r 3",
    "localgen bench --json > bench.json",
)
PULL = examples(
    "localgen pull qwen2.5-1.5b              # its default quant",
    "localgen pull qwen2.5-1.5b:q8_0",
    "localgen pull bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M",
)


def alone_lists(group: str, option: str) -> str:
    """The epilog of a command group that lists when run alone, taking its list's options there."""
    return (f"`localgen {group}` alone lists, taking list's options (`localgen {group} {option}` is "
            f"`localgen {group} list {option}`): `localgen {group} list --help` shows them.")


FIT = examples(
    "localgen fit qwen2.5-7b --ctx 16384",
    "localgen fit ./model.gguf --json",
)

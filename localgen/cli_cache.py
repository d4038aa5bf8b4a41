"""`localgen cache`: list the on-disk prompt cache's entries, or clear it."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from localgen.cli_examples import alone_lists
from localgen.cli_options import JsonOpt, ListingJsonOpt, list_by_default
from localgen.units import binary_size, counted

cache_app = typer.Typer(
    rich_markup_mode=None, help="List the on-disk prompt cache (KV state of long prompts); `clear` empties it.",
    no_args_is_help=False, epilog=alone_lists("cache", "--json"))


@cache_app.callback(invoke_without_command=True)
def cache(ctx: typer.Context, json_output: ListingJsonOpt = False) -> None:
    """List the prompt cache's entries and size (`localgen cache` = `localgen cache list`)."""
    list_by_default(ctx, cache_list, json_output=json_output)


@cache_app.command("list")
def cache_list(json_output: JsonOpt = False) -> None:
    """List the prompt cache's entries and size. On a pipe, tab-separated: a backslash, tab, newline or carriage
    return in a field is written \\\\, \\t, \\n, \\r, another control character \\xHH."""
    from localgen import console
    from localgen.config import prompt_cache_bytes
    from localgen.promptcache import MIN_NEW_TOKENS
    from localgen.promptcache_models import cache_listing, describe_cache

    if json_output:
        console.print_json(cache_listing(), indent=2)
        return
    summary, rows = describe_cache()
    for line in summary:
        console.say(f"localgen: {line}")
    if rows:
        console.print_table(["TOKENS", "SIZE", "LAST USED", "MODEL", "FILE"], rows, heading=4)  # blocks by entry
    elif console.is_terminal(sys.stdout) and prompt_cache_bytes() > 0:  # on a pipe, the summary alone
        console.say(f"localgen: a run whose prompt prefills {MIN_NEW_TOKENS} new tokens or more saves an entry, "
                    'e.g. `localgen run -f doc.txt "question"`; a later run over the same text restores it')


@cache_app.command("clear", short_help="Delete every prompt cache entry, and stopped runs' partial writes.")
def cache_clear(
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Accepted, as by models rm and conversations rm; cache "
                                      "clear never asks.")] = False,
) -> None:
    """Delete every prompt cache entry, and the partial writes of runs that stopped mid-save (it asks nothing)."""
    from localgen import console
    from localgen.promptcache import clear, listed_cache_dir
    from localgen.promptcache_partial import WRITING_TEMP_S

    cleared = clear(listed_cache_dir())
    entries = counted(cleared.entries, "prompt cache entry", "prompt cache entries")
    by_whom = "a stopped run" if cleared.partial == 1 else "stopped runs"
    stopped = (f" and {counted(cleared.partial, 'partial write')} ({binary_size(cleared.partial_size)}) left by "
               f"{by_whom}") if cleared.partial else ""
    kept = []
    if writing := cleared.writing:
        whose = "a run still writing it (process" if len(writing) == 1 else "runs still writing them (processes"
        kept.append(f"kept {counted(len(writing), 'partial write')} ({binary_size(sum(p.size for p in writing))}) of "
                    f"{whose} {', '.join(str(p.pid) for p in writing)})")
    if cleared.recent:
        kept.append(f"kept {counted(cleared.recent, 'partial write')} touched in the last {WRITING_TEMP_S / 60:.0f} "
                    "minutes, which may be a run's still writing")
    console.say(f"localgen: removed {entries} ({binary_size(cleared.size)}){stopped}{''.join(f'; {k}' for k in kept)}")

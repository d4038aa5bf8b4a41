"""Why a file of the user's own that models.toml names (path =) cannot be used, in the few words `models list` shows
(`local (PROBLEM)`), as a run would refuse it."""

from __future__ import annotations

import re
import stat
from pathlib import Path

from localgen.errors import GGUFError, GGUFUnreadableError, NotGGUFError, is_files_own_refusal
from localgen.file_versions import ReadOnce, file_version

MISSING = "missing"
UNREADABLE = "unreadable"  # a loop of links, no permission, an I/O error: the file may be fine
NOT_GGUF = "not a GGUF file"  # text, a web page, an empty file, safetensors: no GGUF at all
WONT_LOAD = "won't load"  # a GGUF file a run refuses (an architecture this build lacks, a later shard, truncated)
REASON_CHARS = 50  # the most of the reason a row gives after WONT_LOAD


def own_file_problem(path: Path) -> str | None:
    """Why an own file cannot be used, judged by its status alone ('missing', 'not a file', 'unreadable'), or None
    when it is a file."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return MISSING
    except (OSError, ValueError):  # a loop of links, a folder that cannot be searched, a name too long
        return UNREADABLE
    return None if stat.S_ISREG(mode) else "not a file"


def own_file_header(path: Path) -> tuple[str | None, str | None]:
    """The quant an own file's header gives, and why a run refuses that header, or a split model's later shards (None:
    it loads them); for a file that own_file_problem finds none wrong with."""
    from localgen.quant_choice import read_local_header

    try:
        quant = read_local_header(path).quant  # read once a process: chat's /model completion lists models often
    except GGUFError as exc:
        return None, header_problem(exc, path)
    return quant, shards_problem(path)


_SPLITS: ReadOnce[object] = ReadOnce(is_files_own_refusal)  # whether the shards agree, by the versions of all


def shards_problem(first_shard: Path) -> str | None:
    """Why a run refuses the shards after the first of a split model whose shards are all there (None: it loads them,
    or it is one file, or shards are missing, which a listing says apart): 'shard 2 of 3 is not a GGUF file'."""
    from localgen.gguf_split import present_shards, validate_split
    from localgen.quant_choice import read_local_header

    present, missing = present_shards(first_shard)
    if len(present) < 2 or missing:
        return None
    for number, shard in enumerate(present[1:], start=2):
        try:
            read_local_header(shard, later_shard=True)
        except GGUFError as exc:
            problem = header_problem(exc, shard)
            return f"shard {number} of {len(present)} {problem if problem.startswith(WONT_LOAD) else f'is {problem}'}"
    versions = tuple(file_version(shard) for shard in present[1:])
    try:
        _SPLITS.read(first_shard, lambda: validate_split(first_shard), tag=versions)  # the shards agree
    except GGUFError as exc:
        named = next((shard for shard in present if exc.message.startswith(f"{shard.name}: ")), first_shard)
        return header_problem(exc, named)
    return None


def header_problem(exc: GGUFError, path: Path) -> str:
    """The few words for a header a run refuses: unreadable, not a GGUF file, or won't load and why."""
    if isinstance(exc, GGUFUnreadableError):
        return UNREADABLE
    if isinstance(exc, NotGGUFError):
        return NOT_GGUF
    reason = exc.message.removeprefix(f"{path.name}: ")
    short = re.split(r" \(|: |; | by this ", reason)[0]  # its gist: 'truncated', 'big-endian GGUF'
    return f"{WONT_LOAD}: {short if len(short) <= REASON_CHARS else short[:REASON_CHARS - 1] + '…'}"

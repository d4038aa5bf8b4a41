"""Why a file of the user's own that models.toml names (path =) cannot be used, in the few words `models list` shows
(`local (PROBLEM)`) and in full, as a run would refuse it."""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass
from pathlib import Path

from localgen.errors import GGUFError, GGUFUnreadableError, NotGGUFError, is_files_own_refusal, os_reason
from localgen.file_versions import ReadOnce

MISSING = "missing"
UNREADABLE = "unreadable"  # a loop of links, no permission, an I/O error: the file may be fine
NOT_GGUF = "not a GGUF file"  # text, a web page, an empty file, safetensors: no GGUF at all
WONT_LOAD = "won't load"  # a GGUF file a run refuses (an architecture this build lacks, a later shard, truncated)
NOT_A_FILE = "not a file"  # a folder, a device, a named pipe
REASON_CHARS = 50  # the most of the reason a row gives after WONT_LOAD
Shards = tuple[list[Path], list[Path]]  # a split model's shards that are there, and those that are not


@dataclass(frozen=True)
class FileProblem:
    """Why a model file cannot be used: the few words a listing shows, and the whole reason, as a run gives it."""

    label: str  # 'missing', 'not a GGUF file', "won't load: truncated or corrupt", 'shard 2 of 3 is unreadable'
    detail: str  # "no such file", "not a GGUF file (text: 'hello')", 'm-00002-of-00003.gguf: truncated: ...'


def own_file_problem(path: Path) -> str | None:
    """Why an own file cannot be used, judged by its status alone ('missing', 'not a file', 'unreadable'), or None
    when it is a file."""
    problem = own_file_status(path)
    return problem.label if problem is not None else None


def own_file_status(path: Path) -> FileProblem | None:
    """own_file_problem's answer, with its whole reason."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return FileProblem(MISSING, "no such file")
    except (OSError, ValueError) as exc:  # a loop of links, a folder that cannot be searched, a name too long
        return FileProblem(UNREADABLE, f"cannot be read ({os_reason(exc) if isinstance(exc, OSError) else exc})")
    if stat.S_ISREG(mode):
        return None
    return FileProblem(NOT_A_FILE, "a folder, not a file" if stat.S_ISDIR(mode) else "not a regular file")


def own_file_header(path: Path, shards: Shards | None = None) -> tuple[str | None, FileProblem | None]:
    """The quant an own file's header gives, and why a run refuses that header, or a split model's later shards (None:
    it loads them); for a file that own_file_problem finds none wrong with (shards: its present_shards, where the
    caller has them)."""
    from localgen.gguf_split import present_shards
    from localgen.quant_choice import read_local_header

    try:
        quant = read_local_header(path).quant  # read once a process: chat's /model completion lists models often
    except GGUFError as exc:
        return None, FileProblem(header_problem(exc, path), exc.message.removeprefix(f"{path.name}: "))
    present, missing = shards if shards is not None else present_shards(path)
    return quant, None if len(present) < 2 or missing else shards_problem(present)


_SPLITS: ReadOnce[object] = ReadOnce(is_files_own_refusal)  # whether the shards agree, by the versions of all


def shards_problem(shards: list[Path]) -> FileProblem | None:
    """Why a run refuses a split model whose shards are all there, in order (None: it loads them), as validate_split
    finds it once a process while the shards stay the same versions: 'shard 2 of 3 is not a GGUF file'; the whole
    reason names the shard."""
    from localgen.gguf_split import validate_split

    first = shards[0]
    try:
        _SPLITS.read(first, lambda: validate_split(first), also=shards[1:])
    except GGUFError as exc:
        number, named = next(((number, shard) for number, shard in enumerate(shards, start=1)
                              if exc.message.startswith(f"{shard.name}: ")), (1, first))
        problem = header_problem(exc, named)
        if number == 1:
            return FileProblem(problem, exc.message)
        said = problem if problem.startswith(WONT_LOAD) else f"is {problem}"
        return FileProblem(f"shard {number} of {len(shards)} {said}", exc.message)
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

"""Split (multi-shard) GGUF models: shard file names and cross-shard validation."""

from __future__ import annotations

import re
from pathlib import Path

from localgen.errors import GGUFError
from localgen.gguf_checks import open_the_first_shard
from localgen.gguf_cursor import HINT
from localgen.gguf_info import GGUFInfo, as_int
from localgen.gguf_reader import read_gguf

SPLIT_NAME = r"^(?P<prefix>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$"  # llama.cpp's llama_split_path


def split_name_parts(name: str, *, ignore_case: bool = False) -> tuple[str, int, int] | None:
    """(prefix, 1-based number, count) from a name like model-00001-of-00003.gguf (llama.cpp wants lower case)."""
    match = re.match(SPLIT_NAME, name, re.IGNORECASE if ignore_case else 0)
    if match is None:
        return None
    return match["prefix"], int(match["no"]), int(match["count"])


def split_shard_paths(first_shard: Path) -> list[Path]:
    """The expected shard paths of a split model, from the first shard's file name (no I/O)."""
    parts = split_name_parts(first_shard.name)
    if parts is None:
        return [first_shard]
    prefix, _, count = parts
    return [first_shard.with_name(f"{prefix}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]


def present_shards(first_shard: Path) -> tuple[list[Path], list[Path]]:
    """The shards of a split model (named from its first shard's file name) that are on disk, and those that are
    not; a model that is not split is its one file."""
    expected = split_shard_paths(first_shard)
    present = [path for path in expected if path.is_file()]
    return present, [path for path in expected if path not in present]


def parameter_count(first: GGUFInfo, first_shard: Path) -> int:
    """The parameters in a model's shards that are on disk and readable (all of a model that is not split)."""
    total = first.parameter_count
    for path in present_shards(first_shard)[0][1:]:
        try:
            total += read_gguf(path, require_architecture=False).parameter_count
        except GGUFError:  # a damaged shard: `run` names it; a description still shows the rest
            continue
    return total


def validate_split(first_shard: Path) -> tuple[GGUFInfo, list[Path]]:
    """Check all shards of a split model (or a lone file) are there, valid and alike: (first header, paths in order)."""
    first_shard = Path(first_shard)
    first = read_gguf(first_shard)
    parts = split_name_parts(first_shard.name)
    if parts is None:
        if first.split_count > 1:
            raise GGUFError(f"{first_shard.name}: shard of a {first.split_count}-part model, but the file "
                            "name does not say which (expected NAME-00001-of-0000N.gguf)",
                            hint="rename the shards")
        return first, [first_shard]
    _, number, count = parts
    if number != 1:
        raise GGUFError(f"{first_shard.name}: not the first shard",
                        hint=open_the_first_shard(split_shard_paths(first_shard)[0].name))
    if first.split_count != count or first.split_no != 0:
        raise GGUFError(f"{first_shard.name}: metadata says shard {first.split_no + 1} of "
                        f"{first.split_count}, the file name says 1 of {count}", hint=HINT)
    paths, missing = split_shard_paths(first_shard), present_shards(first_shard)[1]
    if missing:
        from localgen.shards_missing import missing_shards_hint

        raise GGUFError(missing_shards_text(missing),
                        hint=missing_shards_hint(first_shard, missing))
    expected_tensors = as_int(first.metadata.get("split.tensors.count"))
    names = {t.name for t in first.tensors}
    total = len(first.tensors)
    for index, shard_path in enumerate(paths[1:], start=1):
        shard = read_gguf(shard_path, require_architecture=False)
        _check_shard(first, shard, index, count)
        for tensor in shard.tensors:
            if tensor.name in names:
                raise GGUFError(f"{shard_path.name}: tensor '{tensor.name}' also appears in another shard",
                                hint="the shards come from different models")
            names.add(tensor.name)
        total += len(shard.tensors)
    if count > 1 and expected_tensors is not None and total != expected_tensors:
        raise GGUFError(f"{first_shard.name}: the shards hold {total:,} tensors, split.tensors.count says "
                        f"{expected_tensors:,}", hint="the shards come from different models")
    return first, paths


def _check_shard(first: GGUFInfo, shard: GGUFInfo, index: int, count: int) -> None:
    """A non-first shard agrees with the first on split metadata and on every key both carry."""
    label = shard.path.name
    mixed = "the shards come from different models or downloads; download them again"
    if shard.split_count != count or shard.split_no != index:
        raise GGUFError(f"{label}: metadata says shard {shard.split_no + 1} of {shard.split_count}, "
                        f"expected {index + 1} of {count}", hint=mixed)
    for key, value in shard.metadata.items():
        if key != "split.no" and key in first.metadata and first.metadata[key] != value:
            raise GGUFError(f"{label}: '{key}' differs from the first shard ({value!r:.40} vs "
                            f"{first.metadata[key]!r:.40})", hint=mixed)
    for key in ("split.count", "split.tensors.count"):
        if key in first.metadata and key not in shard.metadata:
            raise GGUFError(f"{label}: missing '{key}'", hint=mixed)
    block_count = first.block_count
    if block_count is not None:
        for tensor in shard.tensors:
            match = re.match(r"blk\.(\d+)\.", tensor.name)
            if match and int(match[1]) >= block_count:
                raise GGUFError(f"{label}: tensor '{tensor.name}' is beyond the model's {block_count} blocks",
                                hint=mixed)


def missing_shards_text(missing: list[Path]) -> str:
    """What a split model lacks, in the words of the load error: 'NAME-00002-of-00002.gguf: missing shard 2 of 2'."""
    numbered = [(path.name, parts[1], parts[2]) for path in missing if (parts := split_name_parts(path.name))]
    names, numbers = [name for name, _, _ in numbered], [str(number) for _, number, _ in numbered]
    if not numbered:
        return "missing shards"
    if len(numbered) == 1:
        return f"{names[0]}: missing shard {numbers[0]} of {numbered[0][2]}"
    return (f"{', '.join(names[:-1])} and {names[-1]}: missing shards {', '.join(numbers[:-1])} and {numbers[-1]} of "
            f"{numbered[0][2]}")

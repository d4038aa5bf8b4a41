"""A split model given by its first shard's path (or a models.toml entry's) with shards missing, refused before it is
planned or loaded: one line naming the shards missing, with the pull that fetches them (a download in the Hub cache) or
where they belong (a file of one's own). A Hub model named by reference is resolved whole, or downloaded, instead; a
later shard is told to open the first (gguf_split.validate_split)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from localgen.errors import ModelNotFoundError

if TYPE_CHECKING:
    from localgen.resolve import ResolvedModel


def refuse_missing_shards(resolved: ResolvedModel) -> None:
    """Refuse a model given by its first shard's path whose split shards are not all on disk, naming those missing
    (a later shard is told to open the first by validate_split)."""
    from localgen.gguf_split import missing_shards_text, present_shards, split_name_parts

    parts = split_name_parts(resolved.path.name)
    if resolved.source != "local" or parts is None or parts[1] != 1:  # a later shard: validate_split refuses it
        return
    missing = present_shards(resolved.path)[1]
    if missing:
        raise ModelNotFoundError(missing_shards_text(missing),
                                 hint=missing_shards_hint(resolved.path, missing))


def missing_shards_hint(first_shard: Path, missing: list[Path]) -> str:
    """What to do about a split model's missing shards: the `localgen pull` of its name for a file of the Hub cache
    (offline: how to leave offline mode first), else the folder to put them in."""
    from localgen.hub import is_offline
    from localgen.model_names import listed_name
    from localgen.offline_words import offline_hint, pull_command
    from localgen.typed_paths import short_path

    them = "it" if len(missing) == 1 else "them"
    name = listed_name(first_shard)
    if name is None:
        return f"put {them} in {short_path(first_shard.parent)}, beside the first shard"
    if is_offline():
        return offline_hint(name)
    return f"run `{pull_command(name)}` to download {them}"


def is_own_split(first_shard: Path) -> bool:
    """Whether a split model's missing shards are the user's to put beside its first shard: no snapshot entry of the
    Hub cache (whose pull fetches them, and whose listing says it is incomplete)."""
    from localgen.hub_settings import snapshot_entry

    return snapshot_entry(first_shard) is None

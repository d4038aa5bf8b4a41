"""A split model given by its path (or a models.toml entry's) with shards missing, refused before it is planned or
loaded: one line naming the shards missing, with the pull that fetches them (a download in the Hub cache) or where
they belong (a file of one's own). A Hub model named by reference is resolved whole, or downloaded, instead."""

from __future__ import annotations

from typing import TYPE_CHECKING

from localgen.errors import ModelNotFoundError

if TYPE_CHECKING:
    from localgen.resolve import ResolvedModel


def refuse_missing_shards(resolved: ResolvedModel, *, offline_flag: bool = False) -> None:
    """Refuse a model given by its first shard's path whose split shards are not all on disk, naming those missing
    (a later shard is told to open the first by validate_split); the hint is the `localgen pull` of its name for a
    file of the Hub cache (offline: how to leave offline mode first; offline_flag: --offline was given), else the
    folder to put them in."""
    from localgen.gguf_split import missing_shards_text, present_shards, split_name_parts
    from localgen.hub_errors import offline_hint
    from localgen.hub_listing import is_offline
    from localgen.model_names import listed_name
    from localgen.typed_paths import short_path

    parts = split_name_parts(resolved.path.name)
    if resolved.source != "local" or parts is None or parts[1] != 1:  # a later shard: validate_split refuses it
        return
    missing = present_shards(resolved.path)[1]
    if not missing:
        return
    them, name = "it" if len(missing) == 1 else "them", listed_name(resolved.path)
    if name is None:
        hint = f"put {them} in {short_path(resolved.path.parent)}, beside the first shard"
    elif offline_flag or is_offline():
        hint = offline_hint(name, flag=offline_flag)
    else:
        hint = f"run `localgen pull {name}` to download {them}"
    raise ModelNotFoundError(missing_shards_text(missing), hint=hint)

"""Where huggingface_hub points: its cache folder and its Hub URL, read from its settings; no network."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

from localgen.errors import ConfigError
from localgen.hub_address import endpoint_error

# huggingface_hub's FutureWarnings are for code that calls it (HF_HUB_ENABLE_HF_TRANSFER, which a huggingface-cli user
# may have exported, printed three lines of one at every command); every module that imports it imports this first
warnings.filterwarnings("ignore", category=FutureWarning, module=r"huggingface_hub(\.|$)")

_resolved_cache_dirs: dict[tuple[str, str | None], tuple[Path, tuple[int, int]]] = {}  # (HF_HUB_CACHE expanded,
# the folder it is relative to): the folder resolved, and its device and inode then


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache directory (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/...), resolved once for each
    setting while the folder it names is the same one (a listing asks for it for every repo; a setting changed in the
    process, another working folder for a relative one, or a link pointed elsewhere is resolved afresh)."""
    given = Path(_hf_constants().HF_HUB_CACHE).expanduser()
    key = (str(given), None if given.is_absolute() else os.getcwd())
    try:
        status = given.stat()  # one stat: a link pointed elsewhere since is another folder
    except OSError:
        return given.resolve()  # not there (yet): resolved each time until it is
    identity = (status.st_dev, status.st_ino)
    known = _resolved_cache_dirs.get(key)
    if known is not None and known[1] == identity:
        return known[0]
    found = given.resolve()
    if found.is_dir():
        _resolved_cache_dirs[key] = (found, identity)
    return found


def hub_endpoint() -> str:
    """The Hub URL in use (HF_ENDPOINT or https://huggingface.co)."""
    return str(_hf_constants().ENDPOINT)


def _hf_constants() -> ModuleType:
    """huggingface_hub's settings (cheap: no HTTP stack), read from the environment as it is imported; a value it
    cannot parse fails that import: an HF_ENDPOINT whose host it cannot parse (an unclosed [IPv6 address) is refused
    as HF_ENDPOINT's fault, any other (HF_HUB_ETAG_TIMEOUT=abc) as the HF_* settings'."""
    try:
        from huggingface_hub import constants
    except ValueError as exc:
        endpoint = os.environ.get("HF_ENDPOINT")
        error = endpoint_error(endpoint.rstrip("/")) if endpoint is not None else None
        if error is None:
            error = ConfigError(f"huggingface_hub could not read its settings from the environment: {exc}",
                                hint="check the HF_* environment variables (`env | grep ^HF_` lists them)")
        raise error from exc
    return constants


def check_endpoint() -> None:
    """Refuse an HF_ENDPOINT that can be no Hub address before huggingface_hub is asked anything (its HTTP stack may
    refuse the address as it is imported, with an error that names no variable)."""
    error = endpoint_error(hub_endpoint())
    if error is not None:
        raise error


class CachePlace(NamedTuple):
    """Where a path lies in a repo folder of the Hugging Face cache localgen uses (HUB_CACHE/models--ORG--NAME): the
    folder as the path spells it, and the parts of the path below it (snapshots, COMMIT, FILE's folders and name; or
    blobs, ETAG)."""

    repo_folder: Path
    parts: tuple[str, ...]

    @property
    def repo(self) -> str:
        """The repo, spelt as its folder is."""
        from localgen.hub_cache import repo_named

        return repo_named(self.repo_folder.name)

    @property
    def is_entry(self) -> bool:
        """Whether the path is a snapshot entry (snapshots/COMMIT/FILE)."""
        return len(self.parts) >= 3 and self.parts[0] == "snapshots"

    @property
    def is_blob(self) -> bool:
        """Whether the path is one of the repo's blobs (blobs/ETAG)."""
        return len(self.parts) == 2 and self.parts[0] == "blobs"

    @property
    def entry(self) -> str:
        """A snapshot entry's COMMIT/FILE."""
        return "/".join(self.parts[1:])

    @property
    def filename(self) -> str:
        """A snapshot entry's FILE, with its folders."""
        return "/".join(self.parts[2:])

    @property
    def snapshot(self) -> Path:
        """A snapshot entry's snapshot folder (snapshots/COMMIT), spelt through the repo folder as the path is."""
        return self.repo_folder.joinpath(*self.parts[:2])


def cache_place(path: Path) -> CachePlace | None:
    """Where an absolute path lies in a repo folder of the Hugging Face cache localgen uses, found from the path alone
    (there or not): the innermost folder named models--* that is in the cache or is the cache's folder of its name
    moved to another disk and linked back; None for any other path (a folder of that name elsewhere)."""
    cache = hub_cache_dir()
    for folder in (folder for folder in path.parents if folder.name.startswith("models--")):
        if folder.parent.resolve() == cache or _same_folder(cache / folder.name, folder):
            return CachePlace(folder, path.relative_to(folder).parts)
    return None


def _same_folder(one: Path, other: Path) -> bool:
    """Whether two paths name the same folder, both there."""
    try:
        return os.path.samefile(one, other)
    except OSError:
        return False


def snapshot_entry(path: Path) -> tuple[str, str] | None:
    """The repo and filename of a snapshot entry of the Hugging Face cache (HUB_CACHE/models--ORG--NAME/snapshots/
    COMMIT/FILE, FILE with its folders), found from its path relative to its repo folder (cache_place); None for any
    other path (a folder elsewhere named snapshots, or a repo's own folder of that name, is no snapshots folder of the
    cache)."""
    place = cache_place(path)
    return (place.repo, place.filename) if place is not None and place.is_entry else None

"""Where huggingface_hub points: its cache folder and its Hub URL, read from its settings; no network."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from types import ModuleType

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


def snapshot_entry(path: Path) -> tuple[str, str] | None:
    """The repo and filename of a snapshot entry of the Hugging Face cache (HUB_CACHE/models--ORG--NAME/snapshots/
    COMMIT/FILE, FILE with its folders), found from its path relative to the cache alone; None for any other path (a
    folder elsewhere named snapshots, or a repo's own folder of that name, is no snapshots folder of the cache)."""
    from localgen.hub_cache import repo_named

    for repo_folder in (folder for folder in path.parents if folder.name.startswith("models--")):
        if repo_folder.parent.resolve() != hub_cache_dir():
            continue
        parts = path.relative_to(repo_folder).parts  # snapshots, COMMIT, FILE's folders and name
        if len(parts) < 3 or parts[0] != "snapshots":
            return None
        return repo_named(repo_folder.name), "/".join(parts[2:])
    return None

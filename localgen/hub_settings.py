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

_resolved_cache_dirs: dict[tuple[str, str | None], Path] = {}  # (HF_HUB_CACHE expanded, the folder it is relative to)


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache directory (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/...), resolved once for each
    setting (a listing asks for it for every repo; a setting changed in the process, or another working folder for a
    relative one, is resolved afresh), once the folder is there."""
    given = Path(_hf_constants().HF_HUB_CACHE).expanduser()
    key = (str(given), None if given.is_absolute() else os.getcwd())
    found = _resolved_cache_dirs.get(key)
    if found is None:
        found = given.resolve()
        if found.is_dir():  # a folder made later, perhaps through a link, is resolved then
            _resolved_cache_dirs[key] = found
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

"""An HF_ENDPOINT that can be no address of a Hugging Face Hub (empty, spaces around it, no http:// or https://, no
host, a bad port): the error that says so and how to set it, before huggingface_hub is asked anything."""

from __future__ import annotations

import re

from localgen.config import spaced_setting_error
from localgen.errors import HubError


def endpoint_error(endpoint: str) -> HubError | None:
    """The error for an HF_ENDPOINT (as huggingface_hub reads it) that is no web address (empty, spaces around it, no
    http:// or https://, no host, a bad port); None when it is one."""
    address = endpoint.strip()
    if address != endpoint:
        return _spaced_endpoint_error(endpoint, address)
    if not address:
        return HubError("HF_ENDPOINT is set but empty, so localgen has no address for the Hugging Face Hub",
                        hint="unset HF_ENDPOINT for huggingface.co, or set it to your mirror's https:// address")
    if address.lower() in ("http:", "https:") or address.lower().startswith(("http://", "https://")):
        return _web_address_error(address)
    rest = _without_scheme(address) or "HOST"
    return HubError(f"HF_ENDPOINT {address!r} is not a web address: it needs http:// or https://",
                    hint=f"set HF_ENDPOINT=https://{rest}, or unset it for huggingface.co")


def _without_scheme(address: str) -> str:
    """The address without another scheme (ftp://host: host; ftp:, as ftp:// is left once its slashes go: empty)."""
    if "://" in address:
        return address.split("://", 1)[1]
    return "" if re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*:", address) else address


def _web_address_error(address: str) -> HubError | None:
    """The error for an http:// or https:// HF_ENDPOINT whose host or port is unusable; None when both are usable."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(address)
        port = parts.port  # a ValueError for a port that is no number or out of range
    except ValueError as exc:
        problem: str | None = ("has a port that is not a number from 1 to 65535" if "Port" in str(exc)
                               else "has a malformed host")
    else:
        problem = ("has a port that is not a number from 1 to 65535" if port == 0
                   else "has no host name" if not parts.hostname
                   else "has a space in it" if any(c.isspace() for c in address) else None)
    if problem is None:
        return None
    return HubError(f"HF_ENDPOINT {address!r} {problem}",
                    hint="set HF_ENDPOINT to your mirror's address (https://HOST or https://HOST:PORT), or unset it "
                         "for huggingface.co")


def _spaced_endpoint_error(endpoint: str, address: str) -> HubError:
    """The error for an HF_ENDPOINT with spaces around its address (address: without them): huggingface_hub keeps
    them in every address it makes of it (a leading one makes it no web address, a trailing one a wrong host or
    path)."""
    fixed = address if address.lower().startswith(("http://", "https://")) else f"https://{address}"
    return spaced_setting_error(HubError, "HF_ENDPOINT", endpoint, what="the address",
                                kept="huggingface_hub keeps them in every Hub address", fixed=fixed,
                                unset=" for huggingface.co")

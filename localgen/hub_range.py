"""The first bytes of a file on the Hub by an HTTP Range request, for reading GGUF headers without a download."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from localgen.hub_errors import offline_error
from localgen.hub_listing import check_not_stalled, hub_request_error, is_offline, request_timeout
from localgen.hub_settings import check_endpoint, hub_endpoint

_SHA256 = re.compile(r'(?:w/)?"?([0-9a-f]{64})"?')  # an ETag, lower-cased


@dataclass(frozen=True)
class HeaderBytes:
    """The first bytes of a file on the Hub, and the sha256 the Hub gave for the file they are of (its LFS ETag;
    None where it gave none)."""

    data: bytes
    sha256: str | None


def read_header_bytes(repo: str, filename: str, n_bytes: int, *, revision: str | None = None) -> HeaderBytes:
    """The first n_bytes of a file on the Hub: nothing is downloaded or cached."""
    if is_offline():
        raise offline_error(repo, None, filename, None)
    check_endpoint()
    check_not_stalled()
    from huggingface_hub import constants, hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session

    url = hf_hub_url(repo, filename, revision=revision or "main", endpoint=hub_endpoint())
    headers = {**build_hf_headers(), "Range": f"bytes=0-{max(n_bytes, 1) - 1}"}
    timeout = request_timeout(constants.HF_HUB_DOWNLOAD_TIMEOUT)  # a file's bytes, as a download waits for them
    try:
        return _read_prefix(get_session(), url, headers, n_bytes, timeout)
    except Exception as exc:
        raise hub_request_error(exc, repo=repo, filename=filename, waited=timeout) from exc


def _read_prefix(session: Any, url: str, headers: dict[str, str], n_bytes: int,
                 timeout: float) -> HeaderBytes:
    """Stream a GET, waiting timeout seconds for each answer, and stop after n_bytes (a server that ignores Range is
    not read to the end)."""
    from huggingface_hub.utils import hf_raise_for_status

    data = bytearray()
    with session.stream("GET", url, headers=headers, follow_redirects=True, timeout=timeout) as response:
        if response.status_code >= 400:
            response.read()
            hf_raise_for_status(response)
        for chunk in response.iter_bytes():
            data += chunk
            if len(data) >= n_bytes:
                break
    return HeaderBytes(bytes(data[:n_bytes]), _sha256_of(response))


def _sha256_of(response: Any) -> str | None:
    """The sha256 the Hub's answers name the file by: X-Linked-Etag, on the Hub's redirect to its storage or on the
    answer itself, else an ETag that is a sha256 (a git blob id, or a storage's own tag, names no sha256)."""
    answers = [*response.history, response]
    for tag in [*(a.headers.get("X-Linked-Etag") for a in answers), response.headers.get("ETag")]:
        found = _SHA256.fullmatch((tag or "").strip().lower())
        if found:
            return found[1]
    return None

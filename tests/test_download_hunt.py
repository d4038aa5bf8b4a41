"""Downloads against a Hub that does not do what it says: a file served at another size than its listing gives."""

from __future__ import annotations

import re

import pytest
from hub_server import HubEnv, make_gguf_bytes

from localgen import hub, hub_cache
from localgen.hub_verify import ChecksumMismatch

REPO = "org/hunt-GGUF"
NAME = "hunt-Q4_K_M.gguf"


@pytest.mark.parametrize("served", [2_500_000, 1_500_000], ids=["longer", "shorter"])
def test_a_file_served_at_another_size_than_the_listing_gives_is_refused_and_its_part_deleted(
        hubenv: HubEnv, served: int) -> None:
    """The download was said to be incomplete because the connection dropped, and the bytes of another file kept
    for the next pull to resume from (longer than the file, 2.4 MiB of a 1.9 MiB file)."""
    repo = hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("listed", 2_000_000)})
    model = hub.find_model(REPO, quant=None, filename=None)
    repo.files[NAME] = make_gguf_bytes("served", served)  # a mirror out of step with its own listing
    with pytest.raises(ChecksumMismatch) as raised:
        hub.fetch_model(model, quiet=True)
    error = raised.value
    assert error.message == f"{REPO}/{NAME}: {hubenv.server.url} sent {served:,} bytes of it, and its listing says " \
                            "2,000,000; the corrupt download was deleted", error.message
    assert error.hint == f"run the command again; if it fails again, the Hub mirror or a proxy ({hubenv.server.url}) " \
                         "is serving bad data"
    assert hubenv.blobs(REPO) == [] and not hub_cache.partial_path(REPO, model.files[0].blob or "").exists()


@pytest.mark.parametrize("force", [False, True], ids=["new", "force"])
def test_a_download_that_fails_its_checksum_says_once_that_it_was_deleted(hubenv: HubEnv, force: bool) -> None:
    """'the corrupt download was deleted' was said twice (with --force over a copy, both clauses twice each)."""
    repo = hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("listed")})
    if force:
        hub.download_model(REPO, quant=None, filename=None, quiet=True)
    hubenv.server.corrupt.add((REPO, NAME))
    with pytest.raises(ChecksumMismatch) as raised:
        hub.download_model(REPO, quant=None, filename=None, quiet=True, force=force)
    kept = "; the copy that was there is kept" if force else ""
    assert re.fullmatch(rf"{REPO}/{NAME}: sha256 mismatch \(got [0-9a-f]{{12}}…, expected {repo.sha256(NAME)[:12]}…\)"
                        rf"; the corrupt download was deleted{kept}", raised.value.message), raised.value.message

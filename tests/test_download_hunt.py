"""Downloads against a Hub that does not do what it says: a file served at another size than its listing gives, or
with other bytes than its checksum."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hub_server import HubEnv, make_gguf_bytes

from localgen import hub, hub_cache
from localgen.errors import HubError
from localgen.hub_types import HubModel
from localgen.hub_verify import ChecksumMismatch

REPO = "org/hunt-GGUF"
NAME = "hunt-Q4_K_M.gguf"
LISTED = make_gguf_bytes("listed", 2_000_000)


def _listed_and_served(hubenv: HubEnv, served: bytes, *, kept: int = 0) -> tuple[HubModel, Path]:
    """NAME listed at 2,000,000 bytes, then served as served (a mirror out of step with its own listing, or a proxy
    that ends the body early), with kept bytes of the listed file received before: the model and its part."""
    repo = hubenv.server.add_repo(REPO, {NAME: LISTED})
    model = hub.find_model(REPO, quant=None, filename=None)
    part = hub_cache.partial_path(REPO, model.files[0].blob or "")
    if kept:
        part.parent.mkdir(parents=True, exist_ok=True)
        part.write_bytes(LISTED[:kept])
    repo.files[NAME] = served
    return model, part


@pytest.mark.parametrize("kept", [0, 1_500_000], ids=["new", "resumed"])
def test_a_file_served_longer_than_the_listing_gives_is_refused_and_its_part_deleted(hubenv: HubEnv,
                                                                                      kept: int) -> None:
    """The download was said to be incomplete because the connection dropped, and the bytes of another file kept
    for the next pull to resume from (longer than the file, 2.4 MiB of a 1.9 MiB file)."""
    model, part = _listed_and_served(hubenv, make_gguf_bytes("served", 2_500_000), kept=kept)
    with pytest.raises(ChecksumMismatch) as raised:
        hub.fetch_model(model, quiet=True)
    error = raised.value
    before = f" after the {kept:,} received before" if kept else ""
    assert error.message == f"{REPO}/{NAME}: {hubenv.server.url} sent {2_500_000 - kept:,} bytes of it{before}, and " \
                            "its listing says 2,000,000; the corrupt download was deleted", error.message
    assert error.hint == f"run the command again; if it fails again, the Hub mirror or a proxy ({hubenv.server.url}) " \
                         "is serving bad data"
    assert hubenv.blobs(REPO) == [] and not part.exists()


def test_a_body_that_ends_early_keeps_its_part_for_the_next_pull_to_resume(hubenv: HubEnv) -> None:
    """A valid part of 1,500,000 bytes, resumed by a body that ended cleanly at 1,800,000 of 2,000,000, was deleted
    as corrupt ('sent 1,800,000 bytes of it', the whole part), and the next pull fetched all 2,000,000 bytes again."""
    model, part = _listed_and_served(hubenv, LISTED[:1_800_000], kept=1_500_000)
    with pytest.raises(HubError) as raised:
        hub.fetch_model(model, quiet=True)
    error = raised.value
    assert not isinstance(error, ChecksumMismatch)
    assert error.message == f"the download of {REPO}/{NAME} ended early: {hubenv.server.url} sent 300,000 bytes of " \
                            "it after the 1,500,000 received before, 1,800,000 of the 2,000,000 its listing says"
    assert error.hint == "run the command again; the 1.7 MiB received are kept: the next pull resumes from there"
    assert part.stat().st_size == 1_800_000
    hubenv.server.repos[REPO].files[NAME] = LISTED
    hubenv.server.bytes_sent.clear()
    (path,) = hub.fetch_model(model, quiet=True)
    assert path.read_bytes() == LISTED and hubenv.server.bytes_sent == {(REPO, NAME): 200_000}


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

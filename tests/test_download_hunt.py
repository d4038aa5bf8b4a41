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
    assert error.message == f"{REPO}/{NAME}: {hubenv.server.url} serves a file of 2,500,000 bytes (it sent " \
                            f"{2_500_000 - kept:,} bytes{before}), and its listing says 2,000,000; the corrupt " \
                            "download was deleted", error.message
    assert error.hint == f"run the command again; if it fails again, the Hub mirror or a proxy ({hubenv.server.url}) " \
                         "is serving bad data"
    assert hubenv.blobs(REPO) == [] and not part.exists()


@pytest.mark.parametrize("kept", [0, 1_500_000, 1_800_000], ids=["new", "resumed", "all-it-serves"])
def test_a_file_served_shorter_than_the_listing_gives_is_refused_by_every_pull_and_its_part_deleted(
        hubenv: HubEnv, kept: int) -> None:
    """A body that ended whole short of the listing kept its part for the next pull to resume, which the server
    refused (HTTP 416, its file ending there) with the hint still saying the next pull resumes, pull after pull."""
    model, part = _listed_and_served(hubenv, LISTED[:1_800_000], kept=kept)
    refused = kept == 1_800_000  # a part an earlier pull kept: the Range from its end is refused (HTTP 416)
    kept = 0 if refused else kept
    for force in (False, False, True):
        with pytest.raises(ChecksumMismatch) as raised:
            hub.fetch_model(model, quiet=True, force=force)
        error = raised.value
        sent = f"{1_800_000 - kept:,} bytes after the {kept:,} received before" if kept else "1,800,000 bytes"
        assert error.message == f"{REPO}/{NAME}: {hubenv.server.url} serves a file of 1,800,000 bytes (it sent " \
                                f"{sent}), and its listing says 2,000,000; the corrupt download was deleted", \
            error.message
        assert "resumes" not in (error.hint or "") and not part.exists() and hubenv.blobs(REPO) == []
        kept = 0
    assert hubenv.server.count("GET", NAME) == 3 + refused


def test_a_body_cut_by_a_dropped_connection_keeps_its_part_for_the_next_pull_to_resume(hubenv: HubEnv) -> None:
    """A part of 1,500,000 right bytes, resumed by a body that the connection cut at 1,700,000 of 2,000,000 (within a
    piece, so none of it is written), is kept, and the next pull fetches only the 500,000 bytes left."""
    model, part = _listed_and_served(hubenv, LISTED, kept=1_500_000)
    hubenv.server.abort_after[(REPO, NAME)] = 1_700_000
    hubenv.server.down_after_abort = True
    with pytest.raises(HubError) as raised:
        hub.fetch_model(model, quiet=True)
    assert not isinstance(raised.value, ChecksumMismatch)
    assert (raised.value.hint or "").endswith(f"1.4 MiB of 1.9 MiB are on disk, which `localgen pull {REPO}:Q4_K_M` "
                                               "resumes"), \
        raised.value.hint
    assert part.stat().st_size == 1_500_000
    hubenv.server.down = False
    hubenv.server.bytes_sent.clear()
    (path,) = hub.fetch_model(model, quiet=True)
    assert path.read_bytes() == LISTED and hubenv.server.bytes_sent == {(REPO, NAME): 500_000}


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

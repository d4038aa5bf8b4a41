"""Hub header range reads: only a header cut short by the read is read again, larger; other problems at once, the same
bytes read a second time to tell the Hub's file from damage on the way."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gguf_builders as gb
import pytest
from hub_server import HubEnv, run_cli

from localgen import quant_choice
from localgen.errors import GGUFError, HubError
from localgen.fit import FitRequest
from localgen.hardware import probe_hardware
from localgen.quant_choice import choose_download, remote_header

REPO = "org/header-GGUF"


def _serve(hubenv: HubEnv, path: Path) -> None:
    """Serve one model file as a repo."""
    hubenv.server.add_repo(REPO, {path.name: path})


def _ranges(hubenv: HubEnv, name: str) -> list[str | None]:
    """The Range headers of the GETs of name, in the order asked: each header read is larger than the one before
    (the server logs a request as it ends, and on a busy machine a read may end after the larger one that follows)."""
    ranges = [r.range for r in hubenv.server.answered() if r.method == "GET" and r.path.endswith(name)]
    return sorted(ranges, key=lambda r: float("inf") if r is None else int(r.rpartition("-")[2]))


def _first_read_is_the_header(path: Path, monkeypatch: pytest.MonkeyPatch, *, layout_of: Path | None = None) -> int:
    """Make the first range read exactly path's header (less than the whole file); its length.

    layout_of: a well-formed file with the same header layout, when path's own header cannot be walked.
    """
    header = gb.read_layout(layout_of or path).data_offset
    assert header < path.stat().st_size
    monkeypatch.setattr(quant_choice, "HEADER_READ_BYTES", header)
    return header


def _odd_architecture(tmp_path: Path) -> tuple[Path, Path]:
    """A model of an architecture llama.cpp does not know (its own layout)."""
    path = gb.tiny_model(tmp_path / "odd.gguf", architecture="notanarch")
    return path, path


def _bad_value_type(tmp_path: Path) -> tuple[Path, Path]:
    """A model with a metadata value of an unknown type (laid out like the well-formed model it came from)."""
    tiny = gb.tiny_model(tmp_path / "tiny.gguf")
    return gb.bad_value_type(tiny, tmp_path / "bad.gguf"), tiny


@pytest.mark.parametrize(("make", "problem"), [(_odd_architecture, "architecture 'notanarch' is not supported"),
                                                (_bad_value_type, "invalid value type 77")])
def test_a_header_problem_other_than_truncation_is_reported_without_reading_more(
        make: Callable[[Path], tuple[Path, Path]], problem: str, hubenv: HubEnv, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    path, layout = make(tmp_path)
    header = _first_read_is_the_header(path, monkeypatch, layout_of=layout)
    _serve(hubenv, path)
    with pytest.raises(GGUFError, match=problem):
        remote_header(REPO, path.name, path.stat().st_size)
    assert _ranges(hubenv, path.name) == [f"bytes=0-{header - 1}"] * 2, "the same bytes, once more"


def test_a_vocabulary_of_millions_of_tokens_is_refused_without_reading_more(hubenv: HubEnv, tmp_path: Path) -> None:
    """A Hub file whose header claims 4,000,001 tokens is refused on the count in its first range read, where the
    reads grew until they held every token (229 MiB of 30 million) and the file was taken for a model."""
    from localgen.gguf_format import MAX_VOCABULARY_TOKENS

    path = gb.empty_tokens_header(tmp_path / "vast.gguf", MAX_VOCABULARY_TOKENS + 1)
    _serve(hubenv, path)
    with pytest.raises(GGUFError, match=f"has {MAX_VOCABULARY_TOKENS + 1:,} tokens"):
        remote_header(REPO, path.name, path.stat().st_size)
    assert _ranges(hubenv, path.name) == [f"bytes=0-{quant_choice.HEADER_READ_BYTES - 1}"] * 2


def test_a_header_cut_short_by_the_read_is_read_again_four_times_larger(hubenv: HubEnv, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = gb.tiny_model(tmp_path / "tiny.gguf")
    assert 1024 < gb.read_layout(path).data_offset <= 4096 < path.stat().st_size
    monkeypatch.setattr(quant_choice, "HEADER_READ_BYTES", 256)
    _serve(hubenv, path)
    info = remote_header(REPO, path.name, path.stat().st_size)
    assert info.architecture == "llama" and info.block_count == 2
    assert _ranges(hubenv, path.name) == ["bytes=0-255", "bytes=0-1023", "bytes=0-4095"]


def test_header_reads_write_no_scratch_file(hubenv: HubEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    path = gb.tiny_model(tmp_path / "tiny.gguf")
    _serve(hubenv, path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "absent"))  # no temporary folder to write in
    assert remote_header(REPO, path.name, path.stat().st_size).architecture == "llama"


def _just_past_length(path: Path, key: str) -> int:
    """A first read that ends 16 bytes past the length (or count) field of key's value, inside the value."""
    return gb.length_field_end(path, key) + 16


def _corrupt_count(kind: str, tiny: Path, dst: Path) -> tuple[Path, int, str]:
    """tiny with a count or length too large for the whole file; the first read that shows it; its error words."""
    if kind == "metadata-count":
        return gb.with_counts(tiny, dst, n_kv=500_000), 256, "500,000 metadata entries and 21 tensors need"
    if kind == "array-count":
        key = "tokenizer.ggml.merges"
        path = gb.huge_array_length(tiny, dst, key=key, length=10_000_000)
        return path, _just_past_length(tiny, key), f"array '{key}' of 10,000,000 items needs"
    key = "tokenizer.chat_template"
    path = gb.huge_string_length(tiny, dst, key=key, length=10_000_000)
    return path, _just_past_length(tiny, key), f"value of '{key}' at byte"


@pytest.mark.parametrize("kind", ["metadata-count", "array-count", "string-length"])
def test_a_count_too_large_for_the_whole_file_is_reported_without_reading_more(
        kind: str, hubenv: HubEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tiny = gb.tiny_model(tmp_path / "tiny.gguf")
    path, first_read, words = _corrupt_count(kind, tiny, tmp_path / "corrupt.gguf")
    size = path.stat().st_size
    assert first_read < gb.read_layout(tiny).data_offset < size
    monkeypatch.setattr(quant_choice, "HEADER_READ_BYTES", first_read)
    _serve(hubenv, path)
    with pytest.raises(GGUFError) as caught:
        remote_header(REPO, path.name, size)
    error = caught.value
    assert type(error) is GGUFError and error.hint
    assert error.message.startswith(f"{REPO}/{path.name}: corrupt header: {words}"), error.message
    assert error.message.endswith(f"past the end of the file ({size:,} bytes) (the Hub's copy)"), error.message
    assert "repository's own file is damaged" in (error.hint or ""), "a header read from the Hub is not local damage"
    assert _ranges(hubenv, path.name) == [f"bytes=0-{first_read - 1}"] * 2
    assert hubenv.server.bytes_sent[(REPO, path.name)] == 2 * first_read


@pytest.mark.parametrize("key", ["tokenizer.ggml.merges", "tokenizer.chat_template"])
def test_a_read_cut_short_just_past_a_count_the_file_can_hold_is_read_again(
        key: str, hubenv: HubEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = gb.tiny_model(tmp_path / "tiny.gguf")
    first_read, size = _just_past_length(path, key), path.stat().st_size
    assert first_read < gb.read_layout(path).data_offset <= 4 * first_read < size
    monkeypatch.setattr(quant_choice, "HEADER_READ_BYTES", first_read)
    _serve(hubenv, path)
    info = remote_header(REPO, path.name, size)
    assert info.architecture == "llama" and info.file_size == size
    assert _ranges(hubenv, path.name) == [f"bytes=0-{first_read - 1}", f"bytes=0-{4 * first_read - 1}"]


def test_a_count_past_the_header_limit_is_reported_without_reading_more(hubenv: HubEnv, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import gguf_cursor

    tiny = gb.tiny_model(tmp_path / "tiny.gguf")
    key = "tokenizer.ggml.merges"
    path = gb.huge_array_length(tiny, tmp_path / "long.gguf", key=key, length=5_000)  # 40 kB: fits in the file
    first_read = _just_past_length(tiny, key)
    monkeypatch.setattr(quant_choice, "HEADER_READ_BYTES", first_read)
    monkeypatch.setattr(gguf_cursor, "MAX_HEADER_BYTES", 8192)
    _serve(hubenv, path)
    with pytest.raises(GGUFError, match=f"header larger than 8,192 bytes: array '{key}' of 5,000 items") as caught:
        remote_header(REPO, path.name, path.stat().st_size)
    assert type(caught.value) is GGUFError
    assert _ranges(hubenv, path.name) == [f"bytes=0-{first_read - 1}"] * 2


def test_a_count_the_file_could_hold_is_no_reason_to_read_more_before_parsing_what_was_read(
        hubenv: HubEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tiny = gb.tiny_model(tmp_path / "tiny.gguf")
    path = gb.with_counts(tiny, tmp_path / "more.gguf", n_kv=5_000)  # at least 70 kB of entries: the file has room
    header = _first_read_is_the_header(path, monkeypatch, layout_of=tiny)
    _serve(hubenv, path)
    with pytest.raises(GGUFError, match=r"metadata key #22 is [0-9,]+ bytes long") as caught:  # a tensor entry
        remote_header(REPO, path.name, path.stat().st_size)
    assert type(caught.value) is GGUFError
    assert _ranges(hubenv, path.name) == [f"bytes=0-{header - 1}"] * 2, "the same bytes, once more"


def test_a_named_file_whose_header_cannot_be_loaded_is_refused_before_its_download(hubenv: HubEnv,
                                                                                   tmp_path: Path) -> None:
    path, _ = _odd_architecture(tmp_path)
    _serve(hubenv, path)
    with pytest.raises(GGUFError, match="architecture 'notanarch' is not supported"):
        choose_download(f"{REPO}/{path.name}", hw=probe_hardware(), request=FitRequest())
    ranges = _ranges(hubenv, path.name)
    assert hubenv.blobs(REPO) == [] and len(ranges) == 2 and (ranges[0] or "").startswith("bytes=0-")


def test_a_header_damaged_on_the_way_once_is_taken_from_the_second_read(hubenv: HubEnv, tmp_path: Path) -> None:
    """Bytes the Hub sent damaged once, then whole: the second read, which loads, was thrown away and the quant
    refused as damaged on the way; its header is taken, and kept by the file's sha256 as any header read is."""
    path = gb.tiny_model(tmp_path / "tiny.gguf")
    _serve(hubenv, path)
    hubenv.server.corrupt.add((REPO, path.name))
    hubenv.server.corrupt_gets = 1
    size, sha256 = path.stat().st_size, hubenv.server.repos[REPO].sha256(path.name)
    assert remote_header(REPO, path.name, size, sha256=sha256).architecture == "llama"
    assert remote_header(REPO, path.name, size, sha256=sha256).architecture == "llama"
    assert len(_ranges(hubenv, path.name)) == 2, "read twice, then kept"


def test_a_header_damaged_on_the_way_twice_is_said_to_be_so_not_blamed_on_the_repository(
        hubenv: HubEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bytes the Hub sent damaged, then damaged otherwise: a second read that differs and cannot be loaded says they
    were damaged on the way, and to try again, which reads the header."""
    from localgen import hub_range

    path = gb.tiny_model(tmp_path / "tiny.gguf")
    _serve(hubenv, path)
    read = hub_range.read_header_bytes
    damage = iter([b"\xff", b"\xfe"])

    def damaged(*args: object, **kwargs: object) -> hub_range.HeaderBytes:
        sent = read(*args, **kwargs)  # type: ignore[arg-type]
        return hub_range.HeaderBytes(next(damage, b"G")[:1] + sent.data[1:], sent.sha256)

    monkeypatch.setattr(hub_range, "read_header_bytes", damaged)
    with pytest.raises(HubError) as caught:
        remote_header(REPO, path.name, path.stat().st_size)
    assert caught.value.message == (f"{REPO}/{path.name}: the header the Hub sent differed on a second read: it was "
                                    "damaged on the way"), caught.value.message
    assert (caught.value.hint or "").startswith("try again"), caught.value.hint
    assert remote_header(REPO, path.name, path.stat().st_size).architecture == "llama"


def test_a_damaged_header_that_cannot_be_read_again_is_not_blamed_on_the_repository(
        hubenv: HubEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the second read fails, nothing tells damage on the way from the repository's file: it says neither."""
    from localgen import hub_range

    path, _ = _bad_value_type(tmp_path)
    _serve(hubenv, path)
    reads = []
    read = hub_range.read_header_bytes

    def first_only(*args: object, **kwargs: object) -> hub_range.HeaderBytes:
        reads.append(args)
        if len(reads) > 1:
            raise HubError("the Hub did not answer")
        return read(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(hub_range, "read_header_bytes", first_only)
    with pytest.raises(GGUFError) as caught:
        remote_header(REPO, path.name, path.stat().st_size)
    message = caught.value.message
    assert "invalid value type 77" in message and message.endswith(" (as the Hub sent it)"), message
    assert "repository's own file" not in (caught.value.hint or "") and len(reads) == 2, caught.value.hint


def test_a_header_the_hub_sends_less_of_than_it_lists_is_not_blamed_on_the_repository(hubenv: HubEnv,
                                                                                       tmp_path: Path) -> None:
    """A read that got fewer bytes than asked for, of a file the Hub lists as longer, was refused as a truncated file
    of the repository's: it says the Hub sent less than it lists, and to try again."""
    path = gb.tiny_model(tmp_path / "tiny.gguf")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(path.read_bytes()[:300])  # in the header: the file as the Hub has it now
    hubenv.server.add_repo(REPO, {path.name: cut})
    with pytest.raises(HubError) as caught:
        remote_header(REPO, path.name, path.stat().st_size)  # as its listing gave it
    size = path.stat().st_size
    assert caught.value.message == (f"{REPO}/{path.name}: the Hub sent 300 bytes of the first {size:,} asked for, "
                                    f"where it lists the file as {size:,} bytes"), caught.value.message
    assert (caught.value.hint or "").startswith("try again"), caught.value.hint


def test_a_short_reply_that_is_no_gguf_is_not_blamed_on_the_repository(hubenv: HubEnv) -> None:
    """A 39-byte web page sent for a file the Hub lists as 5,000,000 bytes was read twice, the same both times, and
    refused as the repository's file ("not a GGUF file ... (the Hub's copy)", the hint of a saved web page): fewer
    bytes than the Hub lists are the transfer's whatever they hold."""
    page = b"<html><body>Bad gateway</body></html>\n\n"
    assert len(page) == 39
    hubenv.server.add_repo(REPO, {"m-Q8_0.gguf": page})
    with pytest.raises(HubError) as caught:
        remote_header(REPO, "m-Q8_0.gguf", 5_000_000)  # as its listing gave it
    assert caught.value.message == (f"{REPO}/m-Q8_0.gguf: the Hub sent 39 bytes of the first 4,194,304 asked for, "
                                    "where it lists the file as 5,000,000 bytes"), caught.value.message
    assert (caught.value.hint or "").startswith("try again"), caught.value.hint
    assert len(_ranges(hubenv, "m-Q8_0.gguf")) == 1


def test_a_named_quant_whose_header_was_damaged_on_the_way_is_downloaded(hubenv: HubEnv, tmp_path: Path) -> None:
    """pull of a quant whose header read came damaged refused it as the repository's file; the download, checked
    against the Hub's checksum, goes on."""
    path = gb.tiny_model(tmp_path / "m-Q8_0.gguf")
    _serve(hubenv, path)
    hubenv.server.corrupt.add((REPO, path.name))
    hubenv.server.corrupt_gets = 1
    pulled = run_cli(hubenv.env, "pull", f"{REPO}:Q8_0")
    assert pulled.returncode == 0 and pulled.stdout.strip().endswith(path.name), pulled.stderr


def test_a_header_read_from_the_hub_is_kept_by_its_file_s_sha256_and_not_read_again(hubenv: HubEnv,
                                                                                      tmp_path: Path) -> None:
    """Each choice of a quant (pull, fit, a run's refusal naming the quant that fits) read every header it needed from
    the Hub again, a few MiB each; one read is now kept by the file's sha256, and a file changed on the Hub (another
    sha256) or a kept entry that cannot be read is read again."""
    from localgen import gguf_cache
    from localgen.config import settings
    from localgen.quant_choice import hub_options

    path, hw = gb.tiny_model(tmp_path / "m-Q8_0.gguf"), probe_hardware()
    _serve(hubenv, path)
    first = hub_options(REPO, hw, FitRequest())
    again = hub_options(REPO, hw, FitRequest())
    assert len(_ranges(hubenv, path.name)) == 1, "read once"
    assert again == first and first[0].shape is not None and first[0].plan is not None
    kept = settings().cache_dir / gguf_cache.HUB_HEADERS_DIR / f"{hubenv.server.repos[REPO].sha256(path.name)}.json"
    kept.write_text("{not json")
    assert hub_options(REPO, hw, FitRequest()) == first and len(_ranges(hubenv, path.name)) == 2
    (tmp_path / "new").mkdir()
    changed = gb.tiny_model(tmp_path / "new" / path.name, n_layer=3)  # a new commit, the same name
    _serve(hubenv, changed)
    read = hub_options(REPO, hw, FitRequest())
    assert len(_ranges(hubenv, path.name)) == 3 and read[0].shape is not None and read[0].shape.n_layer == 3


def test_a_header_the_hub_sent_twice_the_same_and_refused_is_kept_by_its_file_s_sha256(hubenv: HubEnv,
                                                                                        tmp_path: Path) -> None:
    """A refused header was read twice from the Hub by every choice of a quant (pull, fit): its refusal, confirmed
    by the second read, is kept by the file's sha256 as a header read is, and said the same from it."""
    from localgen.quant_choice import hub_options

    path, hw = _bad_value_type(tmp_path)[0], probe_hardware()
    named = path.rename(tmp_path / "m-Q8_0.gguf")
    _serve(hubenv, named)
    first = hub_options(REPO, hw, FitRequest())
    assert first[0].refused is not None and len(_ranges(hubenv, named.name)) == 2
    again = hub_options(REPO, hw, FitRequest())
    assert len(_ranges(hubenv, named.name)) == 2, "not read again"
    assert again[0].problem == first[0].problem and (again[0].problem or "").endswith(
        "invalid value type 77 (the Hub's copy)"), again[0].problem
    refused = again[0].refused
    assert refused is not None and (refused.message, refused.hint) == (first[0].refused.message, first[0].refused.hint)
    assert "repository's own file" in (refused.hint or ""), refused.hint


def test_a_header_read_of_a_file_changed_on_the_hub_since_its_listing_is_not_kept_as_the_listed_one(
        hubenv: HubEnv, tmp_path: Path) -> None:
    """A file changed on the Hub between its listing and the read of its header: the new file's header was kept by
    the listed (old) file's sha256, and taken for the old file from then on; now a header is kept only by the sha256
    the Hub names for the bytes read."""
    from localgen import gguf_cache, hub
    from localgen.quant_choice import hub_options

    path, hw = gb.tiny_model(tmp_path / "m-Q8_0.gguf"), probe_hardware()
    _serve(hubenv, path)
    listed = hub.list_gguf_files(REPO)
    (tmp_path / "new").mkdir()
    _serve(hubenv, gb.tiny_model(tmp_path / "new" / path.name, n_layer=3))  # a new commit, the same name
    read = hub_options(REPO, hw, FitRequest(), files=listed)
    assert read[0].shape is not None and read[0].shape.n_layer == 3, "the Hub's file of now, read from main"
    assert listed[0].sha256 is not None and gguf_cache.kept_hub_header(listed[0].sha256, path.name) is None
    now = hub_options(REPO, hw, FitRequest())
    assert now[0].shape is not None and now[0].shape.n_layer == 3 and len(_ranges(hubenv, path.name)) == 2
    assert hub_options(REPO, hw, FitRequest()) == now and len(_ranges(hubenv, path.name)) == 2, "kept by its own"


def test_the_sha256_of_header_bytes_is_the_one_the_hub_s_redirect_names() -> None:
    """The Hub answers a file's GET with a redirect to its storage naming the file's sha256 (X-Linked-Etag), and the
    storage with an ETag of its own: the redirect's is the file's; a git blob id names no sha256."""
    from types import SimpleNamespace

    from localgen.hub_range import _sha256_of

    sha = "ab" * 32

    def answer(**headers: str) -> SimpleNamespace:
        return SimpleNamespace(headers=headers, history=[])

    stored = answer(ETag='"0123456789abcdef0123456789abcdef"')
    stored.history = [answer(**{"X-Linked-Etag": f'"{sha.upper()}"', "ETag": '"0123456789abcdef01234567"'})]
    assert _sha256_of(stored) == sha
    assert _sha256_of(answer(ETag=f'W/"{sha}"')) == sha
    assert _sha256_of(answer(ETag='"7630443bde8bc88e1775e3c6a1ebc506f4a5a8de"')) is None
    assert _sha256_of(answer()) is None


def test_the_hub_headers_kept_are_the_most_recently_used(home: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the bound, the entry dropped was the one read from the Hub longest ago, though every choice used it."""
    import os

    from localgen import gguf_cache
    from localgen.gguf_reader import read_gguf_bytes

    monkeypatch.setattr(gguf_cache, "HUB_HEADERS_KEPT", 2)
    info = read_gguf_bytes(gb.tiny_model(tmp_path / "m.gguf").read_bytes(), "m.gguf")
    used, unused, new = "a" * 64, "b" * 64, "c" * 64
    for age, sha in ((1000, used), (2000, unused)):
        gguf_cache.keep_hub_header(sha, info)
        os.utime(gguf_cache._hub_entry_path(sha) or "", (age, age))  # read from the Hub long ago, the used one first
    assert gguf_cache.kept_hub_header(used, "m.gguf") == info, "a later choice takes it"
    gguf_cache.keep_hub_header(new, info)
    assert [gguf_cache.kept_hub_header(sha, "m.gguf") is not None for sha in (used, unused, new)] == [True, False, True]


def test_the_hub_headers_stay_bounded_past_an_entry_gone_and_a_killed_write(home: Path, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """One entry that could not be looked at (another run dropped it meanwhile; here a link to nothing) stopped every
    trim past the bound, and the temp file of a write a killed process left stayed for good."""
    import os

    from localgen import gguf_cache
    from localgen.gguf_reader import read_gguf_bytes
    from localgen.storage import temp_name

    monkeypatch.setattr(gguf_cache, "HUB_HEADERS_KEPT", 2)
    info = read_gguf_bytes(gb.tiny_model(tmp_path / "m.gguf").read_bytes(), "m.gguf")
    folder = home / "cache" / gguf_cache.HUB_HEADERS_DIR
    folder.mkdir(parents=True)
    assert gguf_cache._hub_entry_path("0" * 64) == folder / f"{'0' * 64}.json"
    (folder / f"{'0' * 64}.json").symlink_to(tmp_path / "gone")
    killed = folder / temp_name(folder / f"{'1' * 64}.json")
    killed.write_text("{")  # no write holds it: a killed one's
    shas = [c * 64 for c in "abc"]
    for age, sha in enumerate(shas):
        gguf_cache.keep_hub_header(sha, info)
        os.utime(folder / f"{sha}.json", (1000 + age, 1000 + age))
    assert [gguf_cache.kept_hub_header(sha, "m.gguf") is not None for sha in shas] == [False, True, True]
    assert not killed.exists()

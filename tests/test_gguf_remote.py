"""Hub header range reads: only a header cut short by the read is read again, larger; other problems at once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gguf_builders as gb
import pytest
from hub_server import (
    HubEnv,
    hubenv_fixture,  # noqa: F401  (the `hubenv` fixture)
    loopback_hub_fixture,  # noqa: F401  (the `loopback_hub` fixture)
)

from localgen import quant_choice
from localgen.errors import GGUFError
from localgen.quant_choice import remote_header

REPO = "org/header-GGUF"


def _serve(hubenv: HubEnv, path: Path) -> None:
    """Serve one model file as a repo."""
    hubenv.server.add_repo(REPO, {path.name: path})


def _ranges(hubenv: HubEnv, name: str) -> list[str | None]:
    """The Range headers of the GETs of name, in order."""
    return [r.range for r in hubenv.server.answered() if r.method == "GET" and r.path.endswith(name)]


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
def test_a_header_problem_other_than_truncation_is_reported_after_one_read(
        make: Callable[[Path], tuple[Path, Path]], problem: str, hubenv: HubEnv, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    path, layout = make(tmp_path)
    header = _first_read_is_the_header(path, monkeypatch, layout_of=layout)
    _serve(hubenv, path)
    with pytest.raises(GGUFError, match=problem):
        remote_header(REPO, path.name, path.stat().st_size)
    assert _ranges(hubenv, path.name) == [f"bytes=0-{header - 1}"]


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

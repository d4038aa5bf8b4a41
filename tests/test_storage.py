"""Files localgen keeps: what stands where a folder should be is named for what it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from localgen.errors import LocalgenError
from localgen.storage import atomic_write_text, make_folder


def _blocked(tmp_path: Path, by: str) -> Path:
    """A data folder with a file, or a link to a folder not there, in its place."""
    data = tmp_path / "data"
    if by == "file":
        data.write_text("not a folder")
    else:
        data.symlink_to(tmp_path / "unmounted" / "place")
    return data


@pytest.mark.parametrize(("by", "says", "hint"), [
    ("file", "{data} is a file, where a folder should be", "move that file out of the way"),
    ("link", "{data} is a link to {tmp_path}/unmounted/place, which is not there",
     "point the link at a folder that is there, or remove it"),
])
def test_what_stands_where_a_folder_should_be_is_named(tmp_path: Path, by: str, says: str, hint: str) -> None:
    data = _blocked(tmp_path, by)
    said = says.format(data=data, tmp_path=tmp_path)
    with pytest.raises(LocalgenError) as written:
        atomic_write_text(data / "last-run.json", "{}")
    assert (written.value.message, written.value.hint) == (f"could not write {data}/last-run.json: {said}", hint)
    with pytest.raises(LocalgenError) as made:
        make_folder(data / "conversations")
    assert (made.value.message, made.value.hint) == (f"could not create {data}/conversations: {said}", hint)
    assert data.is_symlink() == (by == "link"), "nothing is made at the link's end, nor in its place"
    assert not (tmp_path / "unmounted").exists()

"""The chat's leftovers: the input history as a start reads and trims it, whatever an older localgen did to it."""

from __future__ import annotations

from pathlib import Path

import pytest

HUGE_HEADER = b"\n# 2026-01-01 10:00:01\n"


def _older_version_start(history: Path) -> bool:
    """What the start of a localgen from before the trim's mark did to a history whose last bytes hold no entry's
    header: keep its newest entry alone, from its header's line, where anything is before that line; whether it
    rewrote the file."""
    data = history.read_bytes()
    start = data.rfind(b"\n#")
    if start <= 0:
        return False
    history.write_bytes(data[start:])
    return True


def _this_version_start(history: Path) -> bool:
    """A start of this localgen's trim; whether it rewrote the file (put another in its place)."""
    from localgen.history_bound import check_and_trim_history

    before = history.stat().st_ino
    check_and_trim_history(history)
    return history.stat().st_ino != before


@pytest.mark.parametrize("older_first", [False, True])
def test_a_huge_entry_kept_alone_is_rewritten_once_whatever_an_older_localgen_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, older_first: bool) -> None:
    """A history of one huge entry that this localgen and an older one (which keeps the newest entry from its header's
    line, the trim's mark before it a line to drop) both start chats on is rewritten at most once, then left by
    both (each start of either rewrote it, back and forth); Up still reads the entry as it was written."""
    from prompt_toolkit.history import FileHistory

    from localgen import history_bound

    monkeypatch.setattr(history_bound, "READ_BYTES", 4096)
    history = tmp_path / "history"
    text = b"+pasted text\n" * 1000
    history.write_bytes(b"\n# 2026-01-01 10:00:00\n+old\n" + HUGE_HEADER + text)
    rewrites = []
    for _ in range(3):
        if older_first:
            rewrites.append(("older", _older_version_start(history)))
        rewrites.append(("this", _this_version_start(history)))
        if not older_first:
            rewrites.append(("older", _older_version_start(history)))
    assert [who for who, rewrote in rewrites if rewrote] in (["this"], ["older", "this"]), rewrites
    assert history.read_bytes() == history_bound.ALONE_MARK % len(text) + text
    assert list(FileHistory(str(history)).load_history_strings()) == ["pasted text\n" * 999 + "pasted text"]

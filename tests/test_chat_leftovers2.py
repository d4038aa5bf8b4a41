"""The chat's leftovers, mended: the input history read in bounded memory, completions quoted inside a quote, the
restart command's options as localgen reads them."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.parametrize("entries", [1, 30_000])
def test_a_start_holds_a_few_times_the_history_of_many_short_lines_it_reads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entries: int) -> None:
    """A start's check, trim and load of a history of many short lines (one entry of them, or many entries of one
    line) hold a few times its bytes at most, and Up recalls them as prompt-toolkit reads them (a list of its lines
    was held, seventy times its size: 1.2 GB at a start for an entry of 16 MiB of empty lines)."""
    import tracemalloc

    from prompt_toolkit.history import FileHistory

    from localgen import history_bound
    from localgen.repl_input import SafeFileHistory

    monkeypatch.setattr(history_bound, "READ_BYTES", 4 * 1024 * 1024)
    history = tmp_path / "history"
    lines = 3 * 1024 * 1024 // 2 // entries
    history.write_bytes(b"".join(b"\n# 2026-01-01 10:00:00\n" + b"+\n" * lines for _ in range(entries)))
    size = history.stat().st_size
    tracemalloc.start()
    try:
        assert history_bound.check_and_trim_history(history) is None
        recalled = list(SafeFileHistory(history).load_history_strings())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * size, f"{peak:,} bytes held at once for a history of {size:,}"
    assert recalled == list(FileHistory(str(history)).load_history_strings())
    assert len(recalled) == min(entries, history_bound.MAX_HISTORY_ENTRIES) and recalled[0] == "\n" * (lines - 1)

"""What a download shows, drawn or not: the Display that hub.py drives (download_progress.py's bar and download_log.py's
lines are its kinds), and the line each file's download starts with."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from localgen.hub_types import HubFile, HubModel
from localgen.lock_activity import Holder
from localgen.units import binary_size
from localgen.wordwrap import WordWrap


class Display:
    """Download feedback with nothing drawn: the base for the rich bar and the lines of a log."""

    def __init__(self, model: HubModel) -> None:
        self.model = model
        self.notes_after: list[str] = []  # lines hub.py says once the bars are gone (a Ctrl-C's: what is kept)
        self.backed_off: HubFile | None = None  # the file whose fetch stopped to begin again: said, its bar kept

    def __enter__(self) -> Display:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def begin_file(self, file: HubFile, *, cached: bool, waiting: bool = False, holder: Holder | None = None) -> None:
        """A file starts (cached: it is already on disk; waiting: another process holds its lock, holder: which, and
        what it does with it, where it recorded that)."""

    def backing_off(self, file: HubFile) -> None:
        """The file's fetch stops before any of it came, to begin again once this pull has let go of the locks it
        holds (another process took the file's lock, which sorts before them): its start is not said again."""
        self.backed_off = file

    def begun_again(self, file: HubFile) -> bool:
        """Whether the file begins again after backing off (said already, its bar kept), which it no longer is."""
        again, self.backed_off = self.backed_off is file, None
        return again

    def holder_now(self, holder: Holder) -> None:
        """The process holding the current file's lock, which this one waits on, does something else now."""

    def say(self, line: str) -> None:
        """A status line on stderr while the download runs (above the bars, where they are drawn)."""
        from localgen import console

        console.say(line)

    def transfer_started(self, done: int = 0) -> None:
        """This process started fetching the current file's bytes itself (done: those it resumes after)."""

    def follow(self, n: int) -> None:
        """A partial copy of the current file has n bytes (another download's, or the part this one resumes)."""

    def advance(self, n: int) -> None:
        """n more bytes of the current file arrived (may be negative when a download restarts)."""

    def set_completed(self, n: int) -> None:
        """The current file has n bytes."""

    def set_total(self, total: int) -> None:
        """The current file's size turned out to be total."""

    def end_file(self) -> None:
        """The current file is on disk."""

    def verifying(self, file: HubFile) -> None:
        """The file's checksum is being computed."""

    def verified(self, file: HubFile, *, hashed: bool) -> None:
        """The file matched its checksum (hashed: now, rather than by an earlier record)."""


def start_line(model: HubModel, file: HubFile, source: str, *, waiting: bool = False,
               holder: Holder | None = None) -> str:
    """The line a file's download starts with: what it is, its size where known (a split model's shard: which, and
    the whole model's), and where it comes from; or that another download is fetching it, or that the process that
    downloaded it checks or loads it (or a models rm removes it), which this one waits for."""
    parts = [binary_size(file.size)] if file.size > 0 else []  # a size the Hub did not give is left out
    if len(model.files) > 1 and file in model.files:
        parts.append(f"file {model.files.index(file) + 1} of {len(model.files)}")
        if all(shard.size > 0 for shard in model.files):
            parts.append(f"{binary_size(model.size)} in all")
    size = f" ({', '.join(parts)})" if parts else ""
    where = f" from {source}" if source else ""
    if waiting and holder is not None and holder.doing == "removing":
        return f"localgen: {holder.who} is removing {file.repo}/{file.filename}{size}; waiting for it"
    if waiting and holder is not None and holder.done_downloading and not holder.downloaded:
        return f"localgen: {holder.who} is {holder.doing} {file.repo}/{file.filename}{size}; waiting for it"
    if waiting and holder is not None and holder.done_downloading:
        return (f"localgen: {holder.who} downloaded {file.repo}/{file.filename}{size} and is {holder.doing} it; "
                "waiting for it")
    if waiting:
        return f"localgen: another download is fetching {file.repo}/{file.filename}{size}{where}; waiting for it"
    note = model.lookalike_note if file is model.files[0] else ""
    return f"localgen: downloading {file.repo}/{file.filename}{size}{where}{note}"


def waiting_note(holder: Holder | None) -> str:
    """The note beside the bar of a file whose lock this download waits on: what the process holding it does."""
    if holder is not None and holder.done_downloading:
        return f" ({holder.who} is {holder.doing} it)"
    return " (another download is fetching it)"


def say_line(line: str, console: Any = None) -> None:
    """A line on stderr (best effort: a stderr that cannot be written must not stop a download); with console (the
    rich console the bars are drawn on), above the bars, broken between words to its width as localgen's messages
    are (a word wider than a line left for the terminal to fold), where rich would break a repo's path or the Hub's
    address inside it."""
    with contextlib.suppress(OSError, ValueError):
        if console is None:
            print(line, file=sys.stderr, flush=True)
            return
        wrap = WordWrap(lambda: console.width, wide_breaks=False, keep_whole=True)
        console.print(wrap.feed(line) + wrap.flush(), soft_wrap=True, markup=False, highlight=False, emoji=False)

"""Download progress: a bar per file on a terminal (download_log.py's lines in a log) while hub.py downloads, and the
one-line summary after.

hub.py drives a Display (download_display.py's: begin_file, advance, end_file, verifying, verified); huggingface_hub
reports the bytes this process receives through tqdm_adapter's class, and poll_incomplete follows another download's
growing *.incomplete blob while this one waits on its lock.
rich is imported here, lazily, for RichDisplay: console.py owns rich, but services such as hub.py must not import
console.py (DESIGN.md's dependency direction), so the bar stays here until the CLI hands hub.py a display.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localgen import lock_activity
from localgen.download_display import Display, say_line, start_line, waiting_note
from localgen.hub_types import HubFile, HubModel
from localgen.lock_activity import Holder
from localgen.signals import interrupt_line_ended
from localgen.units import binary_size, counted

POLL_INTERVAL_S = 0.1
HOLDER_POLLS = 5  # the holder of a lock waited on is looked at every fifth poll
SPEED_AFTER_S = 0.5  # a transfer's speed is shown once it has run this long, before rich has two pieces to go by


BAR_MIN = 6  # the narrowest bar drawn: a file name is shortened (down to NAME_MIN) and columns dropped before
BAR_MAX = 40  # the widest (rich's own width for a bar)
NAME_MIN = 16  # a file name is shortened to this before the speed and then the time left are dropped
SIZE_MAX = len("1023.9 MiB")  # the widest size binary_size gives
SPEED_WIDTH = len("1023.9 MiB/s")  # the widest speed
TIME_WIDTH = len("0:00:00")  # rich's time left (-:--:-- until known)


@dataclass(frozen=True)
class BarLayout:
    """The columns of the download bars in a terminal's width: the room for a file's name, the bar's width, and
    whether the speed and the time left are shown."""

    name: int
    bar: int
    speed: bool
    time_left: bool


def bar_layout(width: int, name: int, sizes: int, time_left: int = TIME_WIDTH) -> BarLayout:
    """Fit the bars' columns in width columns, each row one line: the names (name columns at their widest), the bar,
    the sizes (sizes columns), the speed and the time left. The names are shortened to NAME_MIN first, then the speed
    is dropped, then the time left, then the names are shortened further; the sizes always stay."""
    for speed, time in ((True, True), (False, True), (False, False)):
        extras = [width_ for shown, width_ in ((speed, SPEED_WIDTH), (time, time_left)) if shown]
        room = width - sizes - sum(extras) - (2 + len(extras))  # for the name and the bar (one space between columns)
        if room >= min(name, NAME_MIN) + BAR_MIN:
            named = min(name, room - BAR_MIN)
            return BarLayout(named, min(BAR_MAX, room - named), speed, time)
    return BarLayout(max(room - BAR_MIN, 1), BAR_MIN, False, False)


def fitted_name(name: str, note: str, room: int) -> str:
    """A bar's description in room columns: the file's name shortened in its middle, its note (' ✓', ' (verifying
    sha256)') kept where the name keeps a few columns beside it, else the two shortened at their end together."""
    from localgen.shorten import shorten_end, shorten_middle
    from localgen.wordwrap import display_width

    left = room - display_width(note)
    if left >= min(display_width(name), 8):
        return shorten_middle(name, left) + note
    return shorten_end(name + note, room)


def _size_columns() -> list[Any]:
    """The bar's bytes done of the total and its speed, in the units of every size localgen prints (binary_size)."""
    from rich.progress import ProgressColumn, Task
    from rich.text import Text

    class Done(ProgressColumn):
        def render(self, task: Task) -> Text:
            """'12.0 MiB/22.9 MiB'."""
            total = "?" if task.total is None else binary_size(int(task.total))
            return Text(f"{binary_size(int(task.completed))}/{total}", style="progress.download")

    class Speed(ProgressColumn):
        def render(self, task: Task) -> Text:
            """'8.1 MiB/s'."""
            speed = shown_speed(task)
            return Text("?" if speed is None else f"{binary_size(int(speed))}/s", style="progress.data.speed")

    return [Done(), Speed()]


def shown_speed(task: Any) -> float | None:
    """A bar's speed: rich's (from the last pieces, two at least), else, this process's transfer having run
    SPEED_AFTER_S, the bytes it brought over the time it took (a slow download's first 1 MiB piece is a measure);
    None where neither is known."""
    speed = task.finished_speed or task.speed
    counted_from = task.fields.get("counted_from")
    if speed is not None or counted_from is None or task.start_time is None:
        return speed
    brought, elapsed = task.completed - counted_from, task.elapsed or 0.0
    return brought / elapsed if brought > 0 and elapsed >= SPEED_AFTER_S else None


def _time_left_column() -> Any:
    """rich's time left, from the speed the bar shows (shown_speed), where rich has none yet."""
    from rich.progress import Task, TimeRemainingColumn
    from rich.text import Text

    class TimeLeft(TimeRemainingColumn):
        def render(self, task: Task) -> Text:
            """'0:01:05', or rich's own."""
            speed = shown_speed(task)
            if task.finished or task.total is None or task.time_remaining is not None or not speed:
                return super().render(task)
            minutes, seconds = divmod(math.ceil((task.total - task.completed) / speed), 60)
            return Text(f"{minutes // 60:d}:{minutes % 60:02d}:{seconds:02d}", style="progress.remaining")

    return TimeLeft()


def _fitting_progress(console: Any) -> Any:
    """A rich Progress whose rows (a file's name and note, bar, sizes, speed, time left) each fit on one line of the
    terminal at its width as drawn (bar_layout)."""
    from rich.progress import BarColumn, Progress, Task
    from rich.table import Column, Table
    from rich.text import Text

    from localgen.wordwrap import display_width

    done, speed = _size_columns()
    time_left = _time_left_column()

    class FittingProgress(Progress):
        def make_tasks_table(self, tasks: Any) -> Table:
            """The visible tasks' rows, laid out for the console's width now."""
            shown: list[Task] = [task for task in tasks if task.visible]
            descriptions = [(task.description, task.fields.get("note", "")) for task in shown]
            name = max((display_width(n + note) for n, note in descriptions), default=0)
            sizes = max((SIZE_MAX + 1 + len(binary_size(int(task.total or 0))) for task in shown), default=0)
            times = [time_left(task) for task in shown]
            layout = bar_layout(console.width, name, sizes, max([TIME_WIDTH, *(t.cell_len for t in times)]))
            bar = BarColumn(bar_width=layout.bar)
            columns = [True, True, True, layout.speed, layout.time_left]
            table = Table.grid(*(Column(no_wrap=True) for shown_ in columns if shown_), padding=(0, 1))
            for task, (n, note), time in zip(shown, descriptions, times, strict=True):
                row = [Text(fitted_name(n, note, layout.name)), bar(task), done(task), speed(task), time]
                table.add_row(*(cell for cell, shown_ in zip(row, columns, strict=True) if shown_))
            return table

    return FittingProgress(console=console, transient=False)


class RichDisplay(Display):
    """A rich progress bar on stderr: one bar per file and an overall bar for split models."""

    def __init__(self, model: HubModel, console: Any = None, source: str = "") -> None:
        from rich.console import Console

        super().__init__(model)
        self.source = source  # the Hub's address, which the line a file starts with names
        self.progress = _fitting_progress(console or Console(stderr=True))
        self.overall = None
        if len(model.files) > 1:
            self.overall = self.progress.add_task(model.label, total=model.size, note=f" ({len(model.files)} files)")
        self.task: Any = None
        self.file: HubFile | None = None  # the file of the last bar added
        self.file_done = 0
        self.file_total = 0
        self.own_transfer = False  # this process fetches the current file itself: partial copies are not followed
        self.lock = threading.Lock()

    def __enter__(self) -> RichDisplay:
        self.progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self.progress.stop()  # on a terminal: drawn once more, over a Ctrl-C's ^C, and its line ended
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt) and self.progress.console.is_terminal:
            interrupt_line_ended()

    def begin_file(self, file: HubFile, *, cached: bool, waiting: bool = False, holder: Holder | None = None) -> None:
        """Say that the file starts (above the bars) and add its bar; a cached file's bar is full, and not said; one
        said already that begins again keeps its bar."""
        again = self.begun_again(file) and self.task is not None
        if not (cached or again):
            say_line(start_line(self.model, file, self.source, waiting=waiting, holder=holder), self.progress.console)
        with self.lock:
            self.file = file
            self.file_done = file.size if cached else 0
            self.file_total = file.size
            self.own_transfer = False
            note = waiting_note(holder) if waiting else ""
            if again:
                self.progress.update(self.task, total=file.size, completed=self.file_done, note=note)
            else:
                self.task = self.progress.add_task(file.name, total=file.size, completed=self.file_done, note=note)
            self._sync_overall()

    def holder_now(self, holder: Holder) -> None:
        """Say what the process holding the current file's lock, which this one waits on, does now."""
        with self.lock:
            if self.own_transfer or self.task is None:
                return
            self.progress.update(self.task, note=waiting_note(holder))
            file = self.file
        if file is not None:
            say_line(start_line(self.model, file, self.source, waiting=True, holder=holder), self.progress.console)

    def say(self, line: str) -> None:
        """A status line above the bars, where a line written to stderr would be drawn over by them."""
        say_line(line, self.progress.console)

    def transfer_started(self, done: int = 0) -> None:
        """Count this process's bytes from done (a resumed download's), without the note that another download was
        fetching the file; the speed counts the bytes that arrive from now on only."""
        with self.lock:
            self.own_transfer = True
            self.file_done = done
            self.progress.reset(self.task, completed=done, note="", counted_from=done)
            self._sync_overall()

    def follow(self, n: int) -> None:
        """Set the file's bar to a partial copy's n bytes, unless this process fetches the file itself."""
        if not self.own_transfer:
            self.set_completed(n)

    def advance(self, n: int) -> None:
        """Move the file's bar (and the overall one) by n bytes."""
        with self.lock:
            self.file_done += n
            self.progress.update(self.task, completed=self.file_done)
            self._sync_overall()

    def set_completed(self, n: int) -> None:
        """Set the file's bar to n bytes."""
        with self.lock:
            self.file_done = n
            self.progress.update(self.task, completed=n)
            self._sync_overall()

    def set_total(self, total: int) -> None:
        """Change the file's bar total."""
        self.file_total = total
        self.progress.update(self.task, total=total)

    def end_file(self) -> None:
        """Fill the file's bar."""
        self.set_completed(self.file_total)

    def verifying(self, file: HubFile) -> None:
        """Say that the sha256 is being checked."""
        self.progress.update(self.task, note=" (verifying sha256)")

    def verified(self, file: HubFile, *, hashed: bool) -> None:
        """Mark the file as verified."""
        self.progress.update(self.task, note=" ✓" if hashed else " (cached) ✓")

    def _sync_overall(self) -> None:
        """Overall progress = finished files + the current one."""
        if self.overall is None:
            return
        done = 0
        for task in self.progress.tasks:
            if task.id != self.overall:
                done += int(task.completed)
        self.progress.update(self.overall, completed=done)


def open_display(model: HubModel, *, show: bool | None, source: str = "") -> Display:
    """A rich progress bar on stderr when show, lines for a log (download_log.py) where show is None and stderr is no
    terminal, nothing at all where show is False; source is the Hub's address, which the line a file starts with
    names."""
    if show is None:
        show = sys.stderr.isatty()
        if not show:
            from localgen.download_log import LineDisplay

            return LineDisplay(model, source)
    return RichDisplay(model, source=source) if show else Display(model)


def tqdm_adapter(display: Display) -> type:
    """A tqdm-like class for hf_hub_download(tqdm_class=...) that feeds a Display."""

    class _Bar:
        """Accepts whatever huggingface_hub passes to a tqdm bar and forwards byte counts."""

        opened = False  # whether huggingface_hub opened a bar: this process fetched bytes itself

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            type(self).opened = True
            self.n = int(kwargs.get("initial") or 0)
            self._total = kwargs.get("total")
            display.transfer_started(self.n)

        @property
        def total(self) -> int | None:
            """The expected byte count."""
            return self._total

        @total.setter
        def total(self, value: int | None) -> None:
            self._total = value
            if value:
                display.set_total(int(value))

        @property
        def format_dict(self) -> dict[str, Any]:
            """What tqdm would format (only the rate is ever read)."""
            return {"rate": None}

        def update(self, n: float | None = 1) -> None:
            """n more bytes."""
            step = int(n or 0)
            self.n += step
            display.advance(step)

        def update_transfer(self, n: float | None = 1) -> None:
            """Network bytes of a Xet download (the bar follows bytes written instead)."""

        def close(self) -> None:
            """Nothing to release."""

        def __enter__(self) -> _Bar:
            return self

        def __exit__(self, *exc_info: object) -> None:
            self.close()

        def __getattr__(self, name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            return lambda *args, **kwargs: None  # set_postfix_str, refresh, set_description, ...

    return _Bar


def print_summary(model: HubModel, downloaded: int, seconds: float, *, elsewhere: int = 0, received_before: int = 0,
                  checked_elsewhere: bool = False) -> None:
    """One line on stderr: what was downloaded (by this process, by another it waited on, or by one that stopped
    before it checked what it had received in full: elsewhere and received_before, the bytes of the files each
    fetched), how big, how fast, verified; checked_elsewhere: a copy there, which the process this pull --force
    waited on checked, was kept."""
    first = model.files[0].filename
    what = first if len(model.files) == 1 else f"{first} and {counted(len(model.files) - 1, 'more shard')}"
    checks = "sha256 verified" if all(f.sha256 for f in model.files) else "checksums verified"
    others = _fetched_otherwise(model.size - downloaded, elsewhere, received_before)
    if downloaded and downloaded < model.size:  # the shards an earlier download left out, say
        line = (f"downloaded {model.repo}/{what}: {binary_size(downloaded)} of {binary_size(model.size)} in "
                f"{took(downloaded, seconds)}, {others}, {checks}")
    elif downloaded:
        line = f"downloaded {model.repo}/{what} ({binary_size(model.size)}) in {took(downloaded, seconds)}, {checks}"
    elif elsewhere >= model.size:
        line = f"{model.repo}/{what} ({binary_size(model.size)}) downloaded by another process, {checks}"
    elif received_before >= model.size:
        line = f"{model.repo}/{what} ({binary_size(model.size)}) received in full by the pull that stopped, {checks}"
    elif elsewhere or received_before:
        line = f"{model.repo}/{what} ({binary_size(model.size)}): {others}, {checks}"
    elif checked_elsewhere:
        line = (f"{model.repo}/{what} ({binary_size(model.size)}) already in the cache, checked by the process this "
                f"pull waited on, {checks}")
    else:
        line = f"{model.repo}/{what} ({binary_size(model.size)}) already in the cache, {checks}"
    print(f"localgen: {line}", file=sys.stderr, flush=True)


def _fetched_otherwise(rest: int, elsewhere: int, received_before: int) -> str:
    """How the bytes of a model this pull did not download (rest of them) came: by another process's download (the
    bytes of the files it fetched: elsewhere), by a pull that stopped (received_before), the rest already in the
    cache."""
    said = []
    if elsewhere:
        said.append(f"{binary_size(elsewhere)} downloaded by another process")
    if received_before:
        said.append(f"{binary_size(received_before)} received in full by the pull that stopped")
    if rest > elsewhere + received_before or not said:
        said.append("the rest already in the cache")
    return " and ".join(said)


def took(downloaded: int, seconds: float) -> str:
    """How long a download of so many bytes took, and how fast it went once it ran long enough to say: '0.1 s',
    '12.3 s (9.4 MiB/s)', '5 min 12 s (13.1 MiB/s)'."""
    from localgen.download_log import time_left

    spent = f"{seconds:.1f} s" if seconds < 60 else time_left(seconds)
    return f"{spent} ({binary_size(int(downloaded / seconds))}/s)" if seconds >= SPEED_AFTER_S else spent


def _sizes(paths: Iterable[Path]) -> list[int]:
    """The sizes of these files, skipping any that vanish while looked at (a finished download is renamed)."""
    sizes = []
    for path in paths:
        with contextlib.suppress(OSError):
            sizes.append(path.stat().st_size)
    return sizes


@dataclass
class PartialCopies:
    """What watching a file's partial copies (*.incomplete) saw."""

    seen: bool = False


@contextlib.contextmanager
def poll_incomplete(blobs: Path, etag: str | None, display: Display, *, lock: Path | None = None,
                    holder: Holder | None = None) -> Iterator[PartialCopies]:
    """Follow the growing *.incomplete copies of a file on the display until the block ends: another download's
    while this one waits on its lock (once this one fetches bytes itself, tqdm_adapter's class counts them); lock,
    where given, is that lock, whose holder (said to be holder) is told on the display each time it records doing
    something else (its download ended: it checks the model, then loads it)."""
    stop = threading.Event()
    found = PartialCopies()

    def poll() -> None:
        said = (holder or Holder(None, "downloading")).told  # waiting on no holder known: another download, it said
        for polls in itertools.count(1):
            if stop.wait(POLL_INTERVAL_S):
                return
            if etag and (sizes := _sizes(blobs.glob(f"{etag}*.incomplete"))):
                found.seen = True
                display.follow(max(sizes))
            if lock is not None and polls % HOLDER_POLLS == 0 and (now := lock_activity.holder(lock)) is not None \
                    and now.told != said and now.pid != os.getpid():
                said = now.told
                display.holder_now(now)

    thread = threading.Thread(target=poll, name="localgen-download-progress", daemon=True)
    thread.start()
    try:
        yield found
    finally:
        stop.set()
        thread.join()

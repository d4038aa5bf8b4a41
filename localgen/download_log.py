"""Download progress for a log: with stderr a file or a pipe, a line as each file starts (download_display.py's
start_line), then a line now and then as it comes, never a bar's carriage returns (as wget and curl write to a
file)."""

from __future__ import annotations

import threading
import time

from localgen.download_display import Display, say_line, start_line
from localgen.hub_types import HubFile, HubModel
from localgen.lock_activity import Holder
from localgen.units import binary_size

TENTH_GAP_S = 2.0  # a line at each tenth of a file, but no sooner than this after the last one
QUIET_GAP_S = 30.0  # and one after this long without a line, however little came


class LineDisplay(Display):
    """Progress lines on stderr: one at each tenth of a file (no more than one every TENTH_GAP_S), and one every
    QUIET_GAP_S where no tenth was passed, with the bytes done, the speed and the time left."""

    def __init__(self, model: HubModel, source: str = "") -> None:
        super().__init__(model)
        self.source = source
        self.lock = threading.Lock()
        self.file: HubFile | None = None  # the file being fetched (None: a cached one, of which nothing is said)
        self.done = 0
        self.total = 0
        self.tenth = 0  # the tenth of the file the last line said
        self.said_at = 0.0  # when the last line (or the start line) was said
        self.since: tuple[float, int] | None = None  # when the speed is counted from, and the bytes there were then
        self.own_transfer = False

    def begin_file(self, file: HubFile, *, cached: bool, waiting: bool = False, holder: Holder | None = None) -> None:
        """Say that the file starts (nothing for a cached one, nor for one said already that begins again)."""
        again = self.begun_again(file)
        with self.lock:
            self.file = None if cached else file
            self.done, self.total, self.tenth = 0, file.size, 0
            self.said_at, self.since, self.own_transfer = time.monotonic(), None, False
        if not (cached or again):
            say_line(start_line(self.model, file, self.source, waiting=waiting, holder=holder))

    def holder_now(self, holder: Holder) -> None:
        """Say what the process holding the file's lock, which this one waits on, does now."""
        with self.lock:
            file = None if self.own_transfer else self.file
        if file is not None:
            say_line(start_line(self.model, file, self.source, waiting=True, holder=holder))

    def transfer_started(self, done: int = 0) -> None:
        """Count from done (a resumed download's part), the speed from the bytes that come from now on."""
        with self.lock:
            self.own_transfer = True
            self.done = done
            self.tenth = self._tenth_of(done)
            self.since = (time.monotonic(), done)

    def follow(self, n: int) -> None:
        """Another download's partial copy has n bytes (unless this process fetches the file itself)."""
        if not self.own_transfer:
            self.set_completed(n)

    def advance(self, n: int) -> None:
        """n more bytes came."""
        with self.lock:
            self.done += n
            self._maybe_say()

    def set_completed(self, n: int) -> None:
        """The file has n bytes."""
        with self.lock:
            self.done = n
            self._maybe_say()

    def set_total(self, total: int) -> None:
        """The file turned out to be total bytes."""
        with self.lock:
            self.total = total

    def _tenth_of(self, done: int) -> int:
        """Which tenth of the file done bytes reach."""
        return done * 10 // self.total if self.total > 0 else 0

    def _maybe_say(self) -> None:
        """Say how far the file is where a tenth more came (and TENTH_GAP_S passed), or QUIET_GAP_S passed."""
        now = time.monotonic()
        if self.file is None or 0 < self.total <= self.done:
            return  # the summary line says that it is done (a size not known: only the line every QUIET_GAP_S)
        if self.since is None:  # the first size seen of another download's copy
            self.since = (now, self.done)
        tenth, gap = self._tenth_of(self.done), now - self.said_at
        if (tenth > self.tenth and gap >= TENTH_GAP_S) or gap >= QUIET_GAP_S:
            self.tenth, self.said_at = max(tenth, self.tenth), now
            say_line(self._progress_line(now))

    def _progress_line(self, now: float) -> str:
        """'localgen: m-Q4_K_M.gguf: 47.0 MiB of 93.8 MiB (50%), 9.4 MiB/s, about 5 s left', or where the size is
        not known, 'localgen: m-Q4_K_M.gguf: 47.0 MiB so far, 9.4 MiB/s'."""
        assert self.file is not None and self.since is not None
        started, counted_from = self.since
        speed = (self.done - counted_from) / (now - started) if now > started else 0.0
        if self.total <= 0:
            line = f"localgen: {self.file.name}: {binary_size(self.done)} so far"
            return f"{line}, {binary_size(int(speed))}/s" if speed > 0 else line
        line = (f"localgen: {self.file.name}: {binary_size(self.done)} of {binary_size(self.total)} "
                f"({self.done * 100 // self.total}%)")
        if speed > 0:
            line += f", {binary_size(int(speed))}/s, about {time_left((self.total - self.done) / speed)} left"
        return line


def time_left(seconds: float) -> str:
    """'5 s', '3 min 20 s', '1 h 5 min': a wait, to the second under ten minutes, to the minute after."""
    whole = max(round(seconds), 1)
    if whole < 60:
        return f"{whole} s"
    if whole < 600:
        return f"{whole // 60} min {whole % 60} s" if whole % 60 else f"{whole // 60} min"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min" if minutes % 60 else f"{minutes // 60} h"

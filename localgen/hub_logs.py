"""huggingface_hub's log lines and warnings, kept off stderr while it works (LOCALGEN_DEBUG=1 shows them): a dropped
download it tries again becomes one localgen note."""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator

from localgen import console
from localgen.config import settings

_RESUMING = "Trying to resume download"  # what huggingface_hub logs when it resumes a dropped download


class HubLogNote(logging.Handler):
    """Takes huggingface_hub's log records off stderr (left there with LOCALGEN_DEBUG=1, said: False); a dropped
    connection it resumes becomes one localgen note, and its tries are counted either way."""

    # Handler.__init__ lists the handler for logging's shutdown at exit before it makes its lock: where a Ctrl-C
    # came between the two (as a pull's bar showed), the shutdown found no lock and printed a traceback; it finds
    # this one, and takes none.
    lock = None

    def __init__(self, what: str, *, said: bool = True) -> None:
        super().__init__(logging.WARNING)
        self.what = what
        self.said = said
        self.retries = 0

    def emit(self, record: logging.LogRecord) -> None:
        """Say once that the download is being tried again (resumed or restarted), and count the tries; drop
        everything else."""
        if isinstance(record.msg, str) and _RESUMING in record.msg:
            self.retries += 1
            if self.retries > 1 or not self.said:
                return
            console.say(console.one_line(f"localgen: the download of {self.what} stalled or dropped; trying again, "
                                         "from where it stopped when the part received can be kept"))


@contextlib.contextmanager
def quiet_hub_logs(what: str) -> Iterator[HubLogNote]:
    """Keep huggingface_hub's log lines and warnings off stderr while it works on `what` (LOCALGEN_DEBUG=1 shows
    them), and yield the handler that counts its tries again."""
    debug = settings().debug
    logger = logging.getLogger("huggingface_hub")
    saved = logger.handlers, logger.propagate
    note = HubLogNote(what, said=not debug)
    logger.handlers, logger.propagate = ([*saved[0], note], saved[1]) if debug else ([note], False)
    try:
        with warnings.catch_warnings():  # its own disk-space warning, say: localgen reports what goes wrong
            if not debug:
                warnings.filterwarnings("ignore", module=r"huggingface_hub(\.|$)")
            yield note
    finally:
        logger.handlers, logger.propagate = saved


"""The `localgen` entry point: Ctrl-C while the CLI's modules load ends the program as it does later."""

from __future__ import annotations

import signal
import sys


def main() -> None:
    """Load the CLI with Ctrl-C only noted, then run it; Ctrl-C before the CLI handles it exits 130, no traceback."""
    # not signals.deferred_signals: importing it (threading) would come before the handler, widening the window
    noted: list[int] = []
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # a background job's: Ctrl-C stays ignored
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN if ignored else lambda signum, _frame: noted.append(signum))
    try:
        from localgen import console  # noqa: F401 (the CLI's first import)
        from localgen.cli import main as run_cli
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        if noted:
            raise KeyboardInterrupt
        run_cli()
    except KeyboardInterrupt:
        from localgen.errors import EXIT_INTERRUPTED

        sys.stderr.write("\n")
        sys.exit(EXIT_INTERRUPTED)

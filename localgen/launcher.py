"""The `localgen` entry point: Ctrl-C while the CLI's modules load ends the program as it does later."""

from __future__ import annotations

import signal
import sys


def main() -> None:
    """Load the CLI with Ctrl-C only noted, then run it; Ctrl-C before the CLI handles it exits 130, no traceback.
    The process ends as the command returns (cli_exit.end_process), leaving the model's free to its exit."""
    # not signals.deferred_signals: importing it (threading) would come before the handler, widening the window
    noted: list[int] = []
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # a background job's: Ctrl-C stays ignored
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN if ignored else lambda signum, _frame: noted.append(signum))
    try:
        from localgen import console  # noqa: F401 (the CLI's first import)
        from localgen.cli import main as run_cli
        from localgen.cli_exit import end_process, leave_frees_to_exit
    finally:
        signal.signal(signal.SIGINT, previous)
    code: object = 0
    try:
        if noted:
            raise KeyboardInterrupt
        leave_frees_to_exit()
        run_cli()
    except KeyboardInterrupt:
        from localgen.errors import EXIT_INTERRUPTED

        sys.stderr.write("\n")
        code = EXIT_INTERRUPTED
    except SystemExit as exc:
        code = exc.code
    end_process(code)

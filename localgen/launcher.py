"""The `localgen` entry point: Ctrl-C or Ctrl-\\ while the CLI's modules load ends the program as it does later."""

from __future__ import annotations

import signal

# Ctrl-C and Ctrl-\, only noted while the CLI's modules load
NOTED_WHILE_LOADING = tuple(getattr(signal, name) for name in ("SIGINT", "SIGQUIT") if hasattr(signal, name))


def main() -> None:
    """Load the CLI with Ctrl-C and Ctrl-\\ only noted, then run it; one before the CLI handles it exits 130 (Ctrl-\\:
    131, no core dump), no traceback, and a later Ctrl-\\ exits 131 too (SignalExit, as SIGTERM's 143). The process
    ends as the command returns (cli_exit.end_process), leaving the model's free to its exit."""
    # not signals.deferred_signals: importing it (threading) would come before the handler, widening the window
    noted: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: noted.append(signum)) for sig in NOTED_WHILE_LOADING
                if signal.getsignal(sig) is not signal.SIG_IGN}  # a background job's stay ignored
    code: object = 0
    try:  # what the handlers raise once restored is caught here, the restoring itself included
        try:
            from localgen import console  # noqa: F401 (the CLI's first import)
            from localgen.cli import main as run_cli
            from localgen.cli_exit import end_process, leave_frees_to_exit
            from localgen.signals import (
                QUIT_SIGNALS,
                raise_keyboard_interrupt,
                raise_signal_exit,
                resend_unraisable_signals,
            )

            resend_unraisable_signals()  # before the raising handlers: one raised in a weakref callback is sent again
            if previous.get(signal.SIGINT) is signal.default_int_handler:  # its KeyboardInterrupt waits for llama.cpp's
                previous[signal.SIGINT] = raise_keyboard_interrupt  # log callback to return, not printed there and lost
            for sig in QUIT_SIGNALS:  # from here on Ctrl-\ ends the program as SIGTERM does, not with a core dump
                if previous.get(sig) is signal.SIG_DFL:
                    previous[sig] = raise_signal_exit
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if noted:  # Ctrl-\ outranks Ctrl-C, as it does later
            code = _ended_early(max(noted, key=lambda sig: sig != signal.SIGINT))
        else:
            leave_frees_to_exit()
            run_cli()
    except KeyboardInterrupt:
        code = _ended_early(signal.SIGINT)
    except SystemExit as exc:
        code = exc.code
    end_process(code)


def _ended_early(signum: int) -> int:
    """The exit code of a signal that ended the program before the CLI handled it (130, 131), the terminal's line its
    echo (^C) is on ended: a pipe or a file saw no echo, and gets nothing."""
    from localgen.line_ends import end_interrupted_line
    from localgen.signals import signal_exit_code

    end_interrupted_line()
    return signal_exit_code(signum)

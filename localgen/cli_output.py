"""run's output: the answer streamed to stdout as it is generated, or one JSON object; a closed pipe ends quietly."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from typing import Any

import typer

from localgen import console, line_ends
from localgen.cli_exit import interrupt_behind, silence_stdout
from localgen.console import TextOutput
from localgen.errors import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, LocalgenError
from localgen.events import Event, Finished, TextChunk
from localgen.interrupt_echo import ECHOES, key_echo_held
from localgen.output_writes import RecordRoom, WriteGivenUp, end_writes_on
from localgen.prefill_status import PrefillStatus, without_prefill_progress
from localgen.runner import LoadedModel
from localgen.signals import (
    ANSWER_ENDING_SIGNALS,
    StopOnSignal,
    await_a_ctrl_c_behind_the_reader,
    note_reader_gone,
    signal_exit_code,
)
from localgen.stdout_reader import reader_shows_on_a_terminal, watching_the_reader


def stream_to_stdout(loaded: LoadedModel, start: Callable[[], Iterator[Event]],
                     output: TextOutput | None) -> tuple[Finished, int | None, LocalgenError | None]:
    """Run start()'s generation, writing its text to output as it streams (None: keep it for JSON).

    Returns the Finished, the exit code a SIGINT, SIGTERM or SIGQUIT (Ctrl-\\) calls for, and an error that came after
    the answer was complete (saving its conversation failed): the answer is still the user's, so it is output before
    that error.
    A closed stdout stops the generation, as soon as its reader goes where it is a pipe.
    """
    engine = loaded.engine
    completion: Finished | None = None
    late: LocalgenError | None = None
    pipe_closed = texted = False
    closed_by: BrokenPipeError | None = None
    status = PrefillStatus(sys.stderr)
    record_room = RecordRoom.of_stdout() if output is None else None  # streamed text's writes fail as they come
    with StopOnSignal(engine.request_stop, signals=(signal.SIGINT, *ANSWER_ENDING_SIGNALS),
                      ending=ANSWER_ENDING_SIGNALS, reset=engine.clear_stop, ended=end_writes_on) as signals, \
            watching_the_reader(sys.stdout, engine.request_stop) as reader, \
            (key_echo_held(sys.stdout) if output is not None else contextlib.nullcontext(False)) as echo_held:
        events = start()
        try:
            for event in without_prefill_progress(events, status):
                texted = texted or isinstance(event, TextChunk)
                if isinstance(event, TextChunk) and record_room is not None:
                    record_room.add(event.text)
                if isinstance(event, TextChunk) and output is not None and not pipe_closed:
                    try:
                        output.write(event.text)
                    except BrokenPipeError as exc:
                        pipe_closed, closed_by = True, exc
                        engine.request_stop()
                elif isinstance(event, Finished):
                    completion = event
        except LocalgenError as exc:
            if completion is None:
                _close(events)  # now: the answer so far is saved (or said not to be) before the error is said
                if output is not None and not pipe_closed:
                    _end_before_error(output)
                raise
            late = exc
        except BaseException:  # a terminal closed mid-answer (EIO), a signal's exit: the answer so far saved now,
            _close(events)  # not once the frames the exception keeps are freed, which os._exit may never let come
            raise
        if pipe_closed or reader.gone:  # a Ctrl-C the reader died of outranks its going (130, not 141)
            await_a_ctrl_c_behind_the_reader(lambda: signals.signal is not None)
    if pipe_closed or reader.gone:  # the reader left: as the model wrote, or while the prompt was read or JSON kept
        raise _closed_exit(closed_by, signals.exit_code, line_ended=status.erased and not texted)
    assert completion is not None
    if echo_held and output is not None and signals.signal in ECHOES:  # the key's echo, after the text saved
        output.write(ECHOES[signals.signal])
    if signals.signal == signal.SIGINT and not (status.erased and not texted) and not _ends_the_line(output):
        line_ends.end_interrupted_line()  # (nor where the progress line was erased)
    return completion, signals.exit_code, late


def _ends_the_line(output: TextOutput | None) -> bool:
    """Whether the answer's newline ends the terminal's line a Ctrl-C's ^C is on: stdout is that terminal, or a pipe
    whose reader, alive after the Ctrl-C, shows what it reads there (`| (trap '' INT; cat)`)."""
    return output is not None and (output.ends_a_terminal_line
                                   or (output.ends_a_line and reader_shows_on_a_terminal(sys.stdout)))


def _close(events: Iterator[Event]) -> None:
    """Close a generation that an error outside it (writing its text out) cut short: its clean-up runs now."""
    close = getattr(events, "close", None)
    if close is not None:
        close()


def _end_before_error(output: TextOutput) -> None:
    """End the text shown of an answer that an error cut short (its last word, held for the line's wrap, and a
    newline), so that the error's line starts on its own: the answer as far as it came is the user's."""
    with contextlib.suppress(OSError, LocalgenError):  # a reader that left, a full disk: the error is what is said
        output.finish()


def finish_output(loaded: LoadedModel, completion: Finished, output: TextOutput | None,
                  conversation: str | None = None, *, signal_code: int | None = None) -> None:
    """End the streamed text (output), or print the whole result as one JSON object (output None), naming the saved
    conversation the exchange went into, if any (signal_code: the exit code of the signal that stopped the answer,
    which a reader gone by then leaves as it is)."""
    try:
        if output is None:
            record = completion.to_dict() | {"model": loaded.resolved.display_name,
                                             "model_path": str(loaded.resolved.path)}
            if loaded.prompt_format.think is not None:  # --think's, or the continued conversation's /think
                record["think"] = loaded.prompt_format.think
            if conversation is not None:
                record["conversation"] = conversation
            console.print_json(record)
        else:
            output.finish()
    except BrokenPipeError as exc:
        raise _closed_exit(exc, signal_code) from None


def _closed_exit(closed_by: BrokenPipeError | None, signal_code: int | None, *, line_ended: bool = False
                 ) -> typer.Exit:
    """The exit of a run whose stdout's reader left: the stopping signal's code (signal_code), else 141; a Ctrl-C's
    line is ended unless already (line_ended: the prefill status erased)."""
    silence_stdout()
    if isinstance(closed_by, WriteGivenUp):
        signal_code = signal_exit_code(closed_by.signum)
    elif closed_by is not None:  # a write found the reader gone
        note_reader_gone()
    if signal_code == EXIT_INTERRUPTED and not line_ended:
        line_ends.end_interrupted_line()
    return typer.Exit(EXIT_BROKEN_PIPE if signal_code is None else signal_code)


@contextlib.contextmanager
def stderr_quieted(quiet: bool) -> Iterator[Callable[[str], None]]:
    """With run's -q/--quiet, nothing reaches stderr while it lasts (notes, warnings, progress) but the warnings
    given to the function it yields (where a saved conversation's data went): an error is said once it is over, on
    the stderr there was (one raised while a Ctrl-C was handled too); a Ctrl-C (while the model loads, or stdin is
    read) is said by the exit code alone, as one that cuts the answer short is."""
    if not quiet:
        yield console.warn
        return
    kept = sys.stderr
    with open(os.devnull, "w") as devnull:
        sys.stderr = devnull
        try:
            yield lambda message: _warn_on(kept, message)
        except BaseException as exc:  # Python 3.11 wraps a Ctrl-C as a class is made (an import) in a RuntimeError
            if not isinstance(exc, LocalgenError) and isinstance(interrupt_behind(exc), KeyboardInterrupt):
                sys.stderr = kept
                line_ends.end_interrupted_line()
                raise typer.Exit(EXIT_INTERRUPTED) from None
            raise
        finally:
            sys.stderr = kept


def _warn_on(stream: Any, message: str) -> None:
    """A warning on this stream rather than on the stderr of now (a quieted one)."""
    quieted, sys.stderr = sys.stderr, stream
    try:
        console.warn(message)
    finally:
        sys.stderr = quieted

"""An answer recorded in its conversation turn as it streams: the model's exact text, or as far as it came."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable

from localgen.conversation import AnswerDetails, Turn
from localgen.events import Event, Finished, TextChunk


def gave_an_answer(finished: Finished) -> bool:
    """Whether a generation gave an answer (one that Ctrl-C stopped before any text gave none)."""
    return bool(finished.text or finished.thinking) or finished.finish_reason != "interrupted"


def recorded(events: Iterable[Event], turn: Turn, model: str | None,
             answered: Callable[[Finished], None] | None = None) -> Generator[Event, None, None]:
    """The events, with the answer recorded in turn (model: the one that gave it) as the model gave it, once it is
    complete (answered, when given, hears of it then); when an error, a signal or a reader that leaves ends the
    stream after some text, that text, marked interrupted (the user saw it). turn.answer stays as it was when no
    answer comes (an error, or Ctrl-C before any text)."""
    parts: list[str] = []
    complete = False
    try:
        for event in events:
            if isinstance(event, Finished) and gave_an_answer(event):
                turn.answer, turn.interrupted = event.text, event.finish_reason == "interrupted"
                turn.details, complete = AnswerDetails.of(event, model), True
                if answered is not None:
                    answered(event)
            yield event
            if isinstance(event, TextChunk):  # shown: a piece stdout could not take (a full disk) was not
                parts.append(event.text)
    except BaseException as exc:
        if parts and not complete:
            turn.answer, turn.interrupted = "".join(parts), True
            reason = "error" if isinstance(exc, Exception) else "interrupted"  # a signal, or the reader left
            turn.details = AnswerDetails(finish_reason=reason, model=model)
        raise

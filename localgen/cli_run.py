"""The steps of `localgen run`: its input gathered into one message, a new answer's stream, and the notes after it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from localgen.errors import UsageError

if TYPE_CHECKING:
    from localgen.events import Event, Finished
    from localgen.params import GenerationLimits, SamplingParams
    from localgen.runner import LoadedModel


def gather_user_text(prompt: str | None, files: list[str], *, stdin_asked: bool, model_given: str | None,
                     warnings: list[str]) -> tuple[list[str], str]:
    """The attachments (-f files and piped stdin) and the message they make with the prompt; their warnings are said
    here. A prompt that names a model (`ollama run NAME`) with no -m given (model_given), or a message with nothing
    in it, is refused."""
    from localgen import console
    from localgen.chat import compose_user_message
    from localgen.config import settings
    from localgen.inputs import gather_attachments
    from localgen.registry import reads_as_a_model

    attachments, _ = gather_attachments(files, sys.stdin.buffer if sys.stdin else None, warnings,
                                        stdin_asked=stdin_asked, waiting=_say_waiting_for)
    console.warn_each(warnings)
    only_prompt = prompt and not any(map(str.strip, attachments))
    if model_given is None and only_prompt and reads_as_a_model(prompt, settings().user_registry):
        raise UsageError(f"'{prompt}' is the name of a model, not a prompt",
                         hint=f'ask it with `localgen run -m {prompt} "..."`, or chat with `localgen chat -m {prompt}`')
    user_text = compose_user_message(prompt, attachments)
    if not user_text:
        chat_hint = "; `localgen chat` starts a conversation" if sys.stdin is not None and sys.stdin.isatty() else ""
        raise UsageError("nothing to send: the prompt is empty",
                         hint=f'give a prompt, e.g. localgen run "Why is the sky blue?", or pipe text in{chat_hint}')
    return attachments, user_text


def _say_waiting_for(source: str) -> None:
    """Tell a person at a terminal that the run waits for piped stdin, or a pipe given with -f, to end (it goes to
    the model first)."""
    from localgen import console

    if not sys.stderr.isatty():
        return
    if source == "stdin":
        console.say("localgen: waiting for stdin to end (it goes to the model with the prompt; "
                    "</dev/null runs without it)")
    else:
        console.say(f"localgen: waiting for {source} to end (a pipe given with -f: it goes to the model with the "
                    "prompt once its writer closes it)")


def fresh_answer(loaded: LoadedModel, prompt: str | None, attachments: list[str], system: str | None,
                 sampling: SamplingParams, limits: GenerationLimits, *, raw: bool, draft: str, prompt_cache: bool,
                 hide_thinking: bool) -> Callable[[], Iterator[Event]]:
    """What starts the answer to a message outside any conversation (a model without a chat template gets the text
    as a plain completion, exactly as given)."""
    from localgen import console
    from localgen.chat import Message, compose_user_message
    from localgen.runner import stream_answer
    from localgen.thinking import prompt_opens_thinking, without_thinking

    chat = loaded.prompt_format.is_chat
    user_text = compose_user_message(prompt, attachments, exact=not chat)
    if not chat and not raw:
        console.say(f"localgen: {loaded.resolved.display_name} has no chat template; "
                    "sending the text as a plain completion")
    messages = ([Message("system", system)] if system is not None else []) + [Message("user", user_text)]

    def start() -> Iterator[Event]:
        events = stream_answer(loaded, messages, sampling, limits, draft=draft, prompt_cache=prompt_cache)
        if not hide_thinking:
            return events
        return without_thinking(events, lambda: prompt_opens_thinking(loaded.prompt_format.render(messages)))

    return start


def report_after_run(completion: Finished, *, json_output: bool, stats: bool, limit_given: bool = True) -> None:
    """The notes on stderr once the answer is out: why it stopped early (a token limit named by where it came from:
    -n, or else a saved conversation's or models.toml's max_tokens), reasoning left out, and --stats."""
    from localgen import console

    source = "-n/--max-tokens" if limit_given else "max_tokens of the conversation or models.toml; -n overrides it"
    note = console.finish_note(completion, limit_source=source)
    if note and completion.finish_reason != "interrupted" and not json_output:  # --json: its finish_reason says it
        console.say(f"localgen: {note}")
    all_hidden = completion.thinking is not None and completion.usage.completion_tokens and not completion.text
    if all_hidden and not json_output:
        console.say("localgen: the answer ended inside its <think> reasoning, which --hide-thinking left out")
    if stats:
        console.say(console.format_stats(completion))

"""The room a chat's context leaves: for the conversation beside the answer, for a message beside the system prompt
(the user's, or the chat template's own), and the help a prompt that does not fit gets."""

from __future__ import annotations

import itertools
import shlex
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from localgen.chat import Message
from localgen.config import DEFAULT_BATCH_SIZE, DEFAULT_UBATCH_SIZE, settings
from localgen.conversation import MessageTooLongError, asks_for_no_system_prompt
from localgen.conversation_names import typed
from localgen.errors import ContextOverflowError, LocalgenError, answer_room_passes, beyond_the_model
from localgen.fit import fewest_tokens, text_bytes
from localgen.params import CHAT_SETTINGS, setting_given
from localgen.prompt_room import answer_room_warning, context_end_help, larger_context_words
from localgen.units import counted

if TYPE_CHECKING:
    from localgen.conversation import Conversation
    from localgen.params import GenerationLimits
    from localgen.runner import LoadedModel, ModelOptions
    from localgen.system_file import SystemFile

DEFAULT_ANSWER_RESERVE = 512
CHAT_CONTEXT_HELP = "start the chat with a larger --ctx-size"  # where the model does not say the most it takes
SAMPLED_CHARS = 65_536  # a longer attachment's first lines are counted first: one far too long shows it there


class ContextRoom:
    """What the context of a chat session's model has room for (ChatSession builds on it)."""

    loaded: LoadedModel
    limits: GenerationLimits
    conversation: Conversation
    keep_saved_settings: bool  # a run's session: its options hold for that run only
    attachments: list[str]  # the files attached to the next message
    in_chat = False  # the chat's prompt reads its messages (Repl sets it): its context is set until it starts again
    # whether the chat's start said it cannot be saved, and none of it has been saved since (Repl sets its LeaveGuard's)
    cannot_save: Callable[[], bool] = staticmethod(lambda: False)
    # the chat's options that show answers as it does now (--no-markdown, --stats...: Repl sets its state's)
    display_options: Callable[[], list[str]] = staticmethod(lambda: [])
    own_system: bool  # the system prompt was chosen (ChatSession's)
    system_file: SystemFile | None = None  # the file the chat's start read it from (--system-file)
    own_settings: set[str]  # the settings chosen (SessionSettings')
    own_stop: bool  # the stop strings were chosen (SessionSettings')
    options: ModelOptions  # how the model was asked for and loaded (ChatSession's)
    _room_warned: tuple[int, int] | None = None  # the context and token limit warned of once
    _room_warning_said: tuple[int, int] | None = None  # ... said for the turn under way: once it gets an answer

    if TYPE_CHECKING:
        def limit_source(self) -> str:
            """Where the token limit came from (SessionSettings')."""

        def settings(self) -> dict[str, object]:
            """The current sampling settings as plain data (SessionSettings')."""

    def _count(self, messages: list[Message]) -> int:
        """Tokens a conversation takes once rendered (ChatSession's)."""
        raise NotImplementedError

    def _budget(self) -> int:
        """Tokens a prompt may use, keeping room for the answer."""
        return self._budget_at(self.loaded.engine.n_ctx)

    def _budget_at(self, n_ctx: int) -> int:
        """Tokens a prompt may use in a context of n_ctx, keeping room for the answer."""
        return n_ctx - min(self.limits.max_tokens or DEFAULT_ANSWER_RESERVE, n_ctx // 4)

    def answer_room_warning_once(self, prompt_tokens: int) -> str | None:
        """run's warning (answer_room_warning) for a prompt of prompt_tokens that leaves the answer room for fewer
        tokens than its limit (a chat keeps a quarter of the context for it where the limit asks for more), said once
        for a context and limit: None where they fit, no limit is set, or it was said already."""
        limit, n_ctx = self.limits.max_tokens, self.loaded.engine.n_ctx
        if limit is None or self._room_warned == (n_ctx, limit):
            return None
        try:
            restart = (lambda size: restart_command(self, size, asking=True, unsaveable=self.cannot_save())) \
                if self.in_chat else None
            warning = answer_room_warning(self.loaded, prompt_tokens, limit, limit_source=self.limit_source(),
                                          restart=restart)
        except ContextOverflowError:  # no room at all: the answer says so
            return None
        self._room_warning_said = None if warning is None else (n_ctx, limit)
        return warning

    def _turn_ended(self, answered: bool) -> None:
        """Note how the turn the room warning was said before ended: answered, it is not said again for its context
        and limit; with no answer (Ctrl-C before any text, an error), the next message says it again."""
        if answered and self._room_warning_said is not None:
            self._room_warned = self._room_warning_said
        self._room_warning_said = None

    def _attachment_tokens(self, planned: Conversation, text: str) -> tuple[int, bool]:
        """The tokens the planned message (with text, a file's, the last attached) and the system prompt take, and
        whether counted: else at least so many, by their size where that alone rules them out, or by text's first
        lines where they alone take more than the context leaves (no tokenizer spends a second on a file far too
        long to say so)."""
        budget = self._budget()
        least = planned.fewest_tokens_alone(self.loaded.longest_token)
        if least > budget:
            return least, False
        if len(text) > SAMPLED_CHARS:
            cut = text.rfind("\n", 0, SAMPLED_CHARS) + 1 or SAMPLED_CHARS
            sampled = len(self.loaded.engine.tokenize(text[:cut], add_special=False))
            if sampled > budget:
                return sampled, False
        try:
            return self._count(planned.messages(planned.turns[-1:])), True
        except LocalgenError:  # a template that fails says so when the message is sent
            return least, False

    def _larger_context_help(self, prompt_tokens: int | None, *, counted: bool = True) -> str | None:
        """The help a prompt too long for the context gets where the model allows a larger one that may hold it (the
        --ctx-size that does, where its prompt_tokens are counted), else None; prompt_tokens: counted, or (counted
        False) at least so many, or None where not known. Once the chat reads messages (in_chat), the context is
        the one it started with: the help is the command that starts it again with a larger one."""
        engine = self.loaded.engine
        most = engine.n_ctx_train
        if engine.n_ctx >= most or (prompt_tokens is not None and self._budget_at(most) < prompt_tokens):
            return None  # not even the model's largest context holds it: no use suggesting one
        now = larger_context_words(engine)
        needed = None
        if prompt_tokens is not None and counted:
            needed = next(n for n in itertools.count(prompt_tokens) if self._budget_at(n) >= prompt_tokens)
        if self.in_chat:
            context = "a larger context" if needed is None else f"a context of {needed:,} or more"
            return f"{context}: {restart_command(self, needed, unsaveable=self.cannot_save())} ({now})"
        return f"a larger --ctx-size ({now})" if needed is None else f"--ctx-size {needed} or more ({now})"

    def context_end_help(self) -> str:
        """What an answer stopped at the end of the context window is told of a larger context: the command that goes
        on with one where the model takes one, else that this one is the most it takes."""
        return context_end_help(self.loaded.engine, lambda: self._larger_context_help(None) or CHAT_CONTEXT_HELP,
                                unknown=CHAT_CONTEXT_HELP)

    def _beyond_the_model(self, tokens: int, *, counted: bool, made_of: str,
                          hint: str | None) -> ContextOverflowError | None:
        """run's refusal of a prompt beyond the model's maximum context (errors.beyond_the_model), in its words, with
        the chat's hint (None: run's own), for a message of tokens (counted, or at least so many) that no context the
        model takes holds with the room kept for an answer; None where a larger one may (the chat's own refusal then
        says which)."""
        most = self.loaded.engine.n_ctx_train
        if most <= 0 or self._budget_at(most) >= tokens:
            return None
        kept = most - self._budget_at(most)
        beyond = beyond_the_model(tokens, most, made_of, at_least=not counted, kept=kept)
        if hint is None:
            return beyond
        if answer_room_passes(tokens, most, at_least=not counted, kept=kept):
            hint = f"{hint}; /set max_tokens {most - tokens} keeps less room for the answer"
        return ContextOverflowError(beyond.message, hint=hint)

    def _system_room(self, text: str | None) -> tuple[str, int | None] | None:
        """Why the system prompt text (None: the chat template's own, where it has one) leaves no room for a message
        in this model's context, with the tokens it takes beside an empty message (None where its size alone rules
        it out); None when it leaves some."""
        budget = self._budget()
        if text:  # by its size alone, before a tokenizer spends seconds on a long text to say so
            least = fewest_tokens(text_bytes(text), self.loaded.longest_token)
            if least >= budget:
                return f"the system prompt takes at least {counted(least, 'token')}, and the context leaves " \
                       f"{budget:,} for the whole conversation", None
        fixed = self._fixed_tokens(text)
        if fixed is None or fixed < budget:
            return None
        return f"{self._fixed_part(text)} takes {counted(fixed, 'token')}, and the context leaves {budget:,} for the " \
               "whole conversation", fixed

    def _fixed_tokens(self, text: str | None) -> int | None:
        """Tokens a prompt takes before its message's text: the system prompt text (None: the template's own) and
        the chat template's markup around an empty message; None where the template refuses them (the message says
        why)."""
        try:
            return self._count([*([] if text is None else [Message("system", text)]), Message("user", "")])
        except LocalgenError:
            return None

    def _fixed_part(self, text: str | None) -> str:
        """What takes the tokens _fixed_tokens counts, in words."""
        markup = self.loaded.prompt_format.is_chat
        if text:
            return "the system prompt" + (" with the chat template's markup" if markup else "")
        if text is None and self.loaded.prompt_format.default_system():
            return "the chat template's own system prompt with its markup"
        return "the chat template's markup"

    def _room_helps(self, text: str | None, prompt_tokens: int | None) -> list[str]:
        """What makes room for a message where the system prompt text (None: the template's own) leaves none: the
        /system commands (a run's -s) that give one that leaves some, and the --ctx-size that holds prompt_tokens
        (None: not counted)."""
        budget = self._budget()

        def leaves_room(other: str | None) -> bool:
            fixed = self._fixed_tokens(other)
            return fixed is not None and fixed < budget

        helps = []
        if self._is_run():  # no option of run's brings back the template's own system prompt
            if text != "" and leaves_room(""):
                helps.append('-s TEXT sets a shorter one, -s "" sets an empty one')
        elif text != "" and (leaves_room(None) or leaves_room("")):
            other = "/system none removes it" if text and leaves_room(None) else '/system "" sets an empty one'
            helps.append(f"/system TEXT sets a shorter one, {other}")
        larger = self._larger_context_help(prompt_tokens)
        return [*helps, *([larger] if larger else [])]

    def _is_run(self) -> bool:
        """A run's session (--continue, --conversation): run's options, not the chat's commands, change it."""
        return self.keep_saved_settings

    def _no_room(self, text: str | None) -> tuple[str, str | None] | None:
        """Why the system prompt text (None: the template's own) leaves no room for a message, and the hint for a
        one-token message (/system refuses it so); None when it leaves some."""
        room = self._system_room(text)
        if room is None:
            return None
        problem, fixed = room
        helps = self._room_helps(text, None if fixed is None else fixed + 1)
        return problem, "; ".join(helps) if helps else None

    def no_room_warning(self) -> str | None:
        """The warning for a conversation whose system prompt (or the template's own) leaves no room for a message
        in the context, said as the chat starts and after /model (the model is loaded: the prompt is what must
        change); None when a message fits."""
        no_room = self._no_room(self.conversation.system)
        if no_room is None:
            return None
        problem, hint = no_room
        return f"{problem}, so no message fits" + (f": {hint}" if hint else "")

    def last_exchange_warning(self, back: str) -> str | None:
        """The warning for a conversation whose last exchange alone takes more tokens than the context leaves it
        (said after /model): the next message goes without it and /regen cannot ask it again, with what has it seen
        again: a larger context the model takes that holds it, else back (the /model that goes back); None where it
        fits, or nothing can count it (no model, a template that refuses: the next message says why)."""
        conversation = self.conversation
        if not conversation.turns:
            return None
        alone = replace(conversation, context_start=len(conversation.turns) - 1)
        try:
            alone.fit(self._count, self._budget(), self.loaded.longest_token)
            return None
        except MessageTooLongError as exc:
            tokens = f"{'' if exc.counted else 'at least '}{exc.tokens:,}"
            larger = self._larger_context_help(exc.tokens, counted=exc.counted)
        except LocalgenError:
            return None
        return f"the last exchange takes {tokens} tokens, more than the {self._budget():,} the context leaves for " \
               f"the conversation: the next message goes without it, and /regen cannot ask it again; {larger or back}"

    def _no_room_overflow(self, planned: Conversation) -> ContextOverflowError | None:
        """The error for a planned conversation's last message that does not fit because the system prompt (or the
        template's own) leaves no room for any: the tokens each takes, not the message blamed alone; None where no
        such prompt is to blame, or the message is too long by its size alone (fit refused it uncounted)."""
        if planned.fewest_tokens_alone(self.loaded.longest_token) > self._budget():
            return None
        room = self._system_room(planned.system)
        if room is None or room[1] is None:
            return None
        (problem, fixed), whole = room, self._count(planned.messages(planned.turns[-1:]))  # as fit counted it
        helps = self._room_helps(planned.system, whole)
        return ContextOverflowError(f"this message takes {counted(max(whole - fixed, 1), 'token')}, but {problem}",
                                    hint="; ".join(helps) if helps else None)

    def _make_room(self, planned: Conversation, made_of: str = "") -> int:
        """Fit a planned conversation to the context (see Conversation.fit); a last exchange too long even alone
        is refused naming made_of, the files it holds (attached.with_attached), with what can help here: attached files
        to drop, a larger context the model allows that holds it; where the system prompt (or the template's own)
        leaves no room for any message, that is what is said."""
        try:
            return planned.fit(self._count, self._budget(), self.loaded.longest_token, made_of)
        except MessageTooLongError as exc:
            no_room = self._no_room_overflow(planned)
            if no_room is not None:
                raise no_room from None
            helps = ["shorten the message" + (" or the system prompt" if planned.system else "")]
            if self.attachments and not self._is_run():  # a run's -f files are dropped from its command line
                helps.append("/file none drops the attached files, which stay for the next message")
            beyond = self._beyond_the_model(exc.tokens, counted=exc.counted, made_of=made_of,
                                            hint=None if self._is_run() else "; ".join(helps))
            if beyond is not None:
                raise beyond from None
            larger = self._larger_context_help(exc.tokens, counted=exc.counted)
            raise ContextOverflowError(exc.message, hint="; ".join([*helps, *([larger] if larger else [])])) from None

    def context_used(self) -> int | None:
        """Tokens the conversation takes in the model's context as the next turn starts (the KV cache may still hold
        a question that got no answer); None when no model is loaded or the template fails."""
        if not self.loaded.engine.is_open:
            return None
        messages = self.loaded.prompt_format.with_own_system(self.conversation.messages())
        if not messages:  # not even a system prompt: the bare generation prompt is no part of the conversation
            return 0
        try:
            return min(self._count(messages), self.loaded.engine.n_ctx)  # an answer cut at the end counts whole
        except LocalgenError:
            return None

    def _replan_context(self) -> None:
        """Bring back into the model's context every earlier exchange that fits it now (a resumed chat's larger
        --ctx-size, another model's); the whole prompt is computed afresh anyway."""
        conversation = self.conversation
        conversation.context_start = 0
        if conversation.turns:
            try:
                conversation.fit(self._count, self._budget(), self.loaded.longest_token)
            except ContextOverflowError:  # the last exchange alone is too long: the next question says so
                conversation.context_start = len(conversation.turns) - 1

    def _bring_back_earlier(self) -> None:
        """Once the last exchange is gone (/undo), bring back into the context the earlier exchanges that fit it now,
        as _replan_context does, but never leave out one it holds: where none comes back the prompt is the same, and
        the KV cache still holds it."""
        conversation = self.conversation
        held = min(conversation.context_start, max(len(conversation.turns) - 1, 0))
        if held:
            try:
                self._replan_context()
            except LocalgenError:  # no model, or a template that refuses: the next message says why
                conversation.context_start = held
        conversation.context_start = min(conversation.context_start, held)


def restart_command(room: ContextRoom, needed: int | None, *, model: str | None = None, asking: bool = False,
                    unsaveable: bool = False, option: str | None = None) -> str:
    """How a chat, which takes its context as it starts, gets another one: /exit, then the command that goes on with
    its conversation (as the chat's closing note gives it, with the chat's loading options and how it shows answers,
    which the conversation does not keep) with one of needed tokens (None: not counted), by the name
    the closing note gives where it is saved first as the chat ends (its first exchange unsaved, or asking: the
    message about to be answered is its first), with another model's -m (model); a chat with no exchange, or one
    whose start said it cannot be saved (unsaveable), of which nothing is saved, gets the command that starts it
    again as it stands (start_options) with these; option: another option it is given in place of the context's
    (--chat-template FILE)."""
    conversation = room.conversation
    size = f"-c {'SIZE' if needed is None else needed}" if option is None else option
    kept = [*_loading_options(room.options, same_model=model is None), *room.display_options()]  # not saved with it
    options = "".join(f" {word}" for word in [*([f"-m {typed(model)}"] if model else []), *kept, size])
    if conversation.on_disk:
        return f"/exit, then `{resume_command(conversation.name, options)}`"
    if (asking or conversation.turns) and not unsaveable:
        return f"/exit, then `{resume_command('NAME', options)}` with the NAME the chat says it is saved as"
    started = model or conversation.model
    words = ["localgen chat", *([f"-m {typed(started)}"] if started else []),
             *start_options(room, same_model=model is None), size]
    why = "this chat cannot be saved, so there is nothing to resume" if unsaveable else \
        "it has no exchange saved to resume"
    return f"/exit, then start the chat again with `{' '.join(words)}`, as {why}"


def start_options(room: ContextRoom, *, same_model: bool = True) -> list[str]:
    """The options, each as a shell takes it, that start a chat as the one of room stands: the system prompt, settings
    and stop strings chosen for it (by its options, /system, /set), its thinking switch, its loading options (its
    --chat-template with the same_model alone, as /model drops it) and how it shows answers (display_options)."""
    words = [_system_option(room.conversation.system, room.system_file)] if room.own_system else []
    values = room.settings()
    words += [f"{_setting_option(key)} {setting_given(values[key])}" for key in CHAT_SETTINGS
              if key in room.own_settings]
    if room.own_stop:
        words += [_option_given(stop, "--stop", "--stop") for stop in room.limits.stop] or ["--stop ''"]
    if room.options.think is not None:
        words.append(f"--think {room.options.think}")
    return [*words, *_loading_options(room.options, same_model=same_model), *room.display_options()]


def _setting_option(key: str) -> str:
    """The option of a chat setting (CHAT_SETTINGS): its name's (--top-k), -n for max_tokens."""
    return "-n" if key == "max_tokens" else f"--{key.replace('_', '-')}"


def _system_option(system: str | None, file: SystemFile | None) -> str:
    """The option that gives a chat this system prompt (None: none, the chat template's own): the file it was read
    from where that gives it still (a long one would be too long a command), else the prompt itself."""
    if file is not None and file.gives(system):
        return f"--system-file {typed(str(file.path))}"
    if system is None:
        return "-s none"
    if asks_for_no_system_prompt(system):  # -s none or off would mean none: the word itself comes from a file
        return f"--system-file <(printf %s {typed(system)})"
    return _option_given(system, "-s", "--system")


def _option_given(value: str, option: str, long: str) -> str:
    """An option given a free text value, as a shell takes it within a hint's backticks: after its long name's '='
    where the value reads as an option (--system=-n), which click would take as one, each backtick as $'\\x60', an
    empty value as '' (written as nothing, the next word was taken for it)."""
    word = "$'\\x60'".join(typed(part) if part else "" for part in value.split("`")) or "''"
    return f"{long}={word}" if value.startswith("-") else f"{option} {word}"


def _loading_options(options: ModelOptions, *, same_model: bool) -> list[str]:
    """The loading options given in options, each as a shell takes it (the context's and model's aside), and --offline
    where the chat was started with it."""
    given = {"--threads": options.threads, "--threads-batch": options.threads_batch,
             "--gpu-layers": options.gpu_layers,
             "--batch-size": options.batch_size if options.batch_size != DEFAULT_BATCH_SIZE else None,
             "--ubatch-size": options.ubatch_size if options.ubatch_size != DEFAULT_UBATCH_SIZE else None,
             "--flash-attn": options.flash_attn if options.flash_attn != "auto" else None,
             "--kv-type": options.kv_type if options.kv_type != "f16" else None,
             "--chat-template": options.chat_template_file if same_model else None}
    words = [f"{option} {typed(str(value))}" for option, value in given.items() if value is not None]
    return words + [flag for flag, on in (("--no-gpu", options.no_gpu), ("--offline", settings().offline_flag)) if on]


def resume_command(name: str, options: str = "") -> str:
    """The command that goes on with the saved conversation name in a new chat, options (' -c 4096') after it."""
    return f"localgen chat --resume {shlex.quote(name)}{options}"

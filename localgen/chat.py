"""Chat messages and how they become a model's prompt: its chat template (rendered in a sandbox), then tokens."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING

from localgen.errors import LocalgenError, TemplateError
from localgen.template_sandbox import TEMPLATE_HINT, TemplateStopped, one_line, render_day, render_template
from localgen.think_switch import think_variables
from localgen.thinking import CLOSE_TAG, prompt_opens_thinking, split_reasoning

if TYPE_CHECKING:
    from localgen.engine import Engine
    from localgen.prompt_tokens import Tokenizer

log = logging.getLogger("localgen.chat")
# between a system prompt and the user's text in one message, as Gemma 3's own template and llama.cpp's built-in Gemma
# one put them (llama.cpp's Jinja path puts "\n")
SYSTEM_FOLD_SEPARATOR = "\n\n"
_SYSTEM_MARK, _USER_MARK = "\ue000system\ue000", "\ue000user\ue000"  # private-use marks no template writes


@dataclass(frozen=True)
class Message:
    """One chat message."""

    role: str
    content: str

    def to_dict(self) -> dict[str, str]:
        """The {role, content} dict chat templates expect."""
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class ReasonedMessage(Message):
    """An assistant's answer as llama-server gives it to a chat template: the answer as its content, the reasoning
    beside it (GPT-OSS's template reads it as `thinking`, Qwen3's as `reasoning_content`)."""

    reasoning: str = ""

    def to_dict(self) -> dict[str, str]:
        """The {role, content} dict, with the reasoning under both names where there is any."""
        given = super().to_dict()
        return {**given, "thinking": self.reasoning, "reasoning_content": self.reasoning} if self.reasoning else given


@dataclass(frozen=True)
class PromptFormat:
    """How messages become prompt text for one model: its template, or plain completion."""

    template: str | None
    bos_token: str
    eos_token: str
    adds_bos: bool
    model_name: str  # where the template came from, for errors
    template_hint: str = TEMPLATE_HINT
    control_tokens: frozenset[str] = frozenset()  # texts the tokenizer reads as control tokens (<|im_end|>, ...)
    think: str | None = None  # --think, /think: on, off or an effort the template's switch is given; None: its default
    _own_system: dict[str | None, str | None] = field(default_factory=dict, init=False, repr=False, compare=False)
    _folds_system: dict[str, bool] = field(default_factory=dict, init=False, repr=False, compare=False)
    _marked: dict[str | None, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def is_chat(self) -> bool:
        """True when messages go through a chat template."""
        return self.template is not None

    @classmethod
    def for_engine(cls, engine: Engine, *, override: str | None, raw: bool, model_name: str,
                   template_hint: str = TEMPLATE_HINT, control_tokens: frozenset[str] = frozenset(),
                   think: str | None = None) -> PromptFormat:
        """The prompt format of a loaded model (override template wins; raw forces plain text)."""
        template = None if raw else (override or engine.chat_template())
        return cls(template=template, bos_token=engine.bos_text, eos_token=engine.eos_text,
                   adds_bos=engine.adds_bos, model_name=model_name, template_hint=template_hint,
                   control_tokens=control_tokens, think=think)

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str:
        """Messages as prompt text: the template's output (a system prompt before the first user message's text,
        where the template has no place for one: folds_system), or the non-empty texts joined by blank lines."""
        if self.template is None:
            return "\n\n".join(m.content for m in messages if m.content)
        if any(m.role == "system" for m in messages) and self.folds_system():
            messages = with_system_folded(messages)
        return self._render_as_given(messages, add_generation_prompt=add_generation_prompt)

    def _render_as_given(self, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str:
        """The chat template's output for the messages as they are (refused where it is empty and they are not)."""
        assert self.template is not None
        text = render_template(self.template, messages, bos_token=self.bos_token, eos_token=self.eos_token,
                               add_generation_prompt=add_generation_prompt, model_name=self.model_name,
                               hint=self.template_hint, variables=think_variables(self.template, self.think))
        if not text and any(m.content for m in messages):
            raise TemplateError(f"{one_line(self.model_name)}: the chat template turns the messages into no text",
                                hint=self.template_hint)
        return text

    def left_out_warning(self, text: str, messages: Sequence[Message]) -> str | None:
        """A warning when the rendered prompt text lacks the text of the last user message (stripped, not empty): the
        chat template left it out, and the model does not see it; else None."""
        last = next((m.content.strip() for m in reversed(messages) if m.role == "user"), "")
        if self.template is None or not last or last in text:
            return None
        return (f"{one_line(self.model_name)}: the chat template left the message out of the prompt: the model does "
                f"not see it ({self.template_hint})")

    def default_system(self) -> str | None:
        """The system prompt the chat template writes where the messages carry none (SmolLM2's and Qwen's do),
        else None (also where the template fails); a render that worked is kept, for the day where the template
        writes today's date."""
        if self.template is None or self.folds_system():
            return None  # no place for a system message: none of its own
        day = render_day(self.template)
        try:
            return self._own_system[day]
        except KeyError:
            pass
        try:
            found = self._render_own_system()
        except LocalgenError:
            return None  # kept for no call: the next renders again
        self._own_system.clear()  # a day past
        self._own_system[day] = found
        return found

    def _render_own_system(self) -> str | None:
        """default_system, found by rendering the template with and without a system message (a failed render
        raises)."""
        system, user = _SYSTEM_MARK, _USER_MARK
        marked = self._render_marked()
        plain = self._render_as_given([Message("user", user)], add_generation_prompt=False)
        opening, found, rest = marked.partition(system)
        between = rest.partition(user)[0]  # the system block's end and the user block's start
        if not found or not plain.startswith(opening) or between + user not in plain:
            return None
        return plain[len(opening):plain.index(between + user)].strip() or None

    def _render_marked(self) -> str:
        """A marked system and user message rendered as they are, without the generation prompt (as llama.cpp probes
        a template): read by default_system and folds_system, so kept for the day (a failed render raises)."""
        day = render_day(self.template or "")
        if day not in self._marked:
            marked = self._render_as_given([Message("system", _SYSTEM_MARK), Message("user", _USER_MARK)],
                                           add_generation_prompt=False)
            self._marked.clear()  # a day past
            self._marked[day] = marked
        return self._marked[day]

    def with_own_system(self, messages: list[Message]) -> list[Message]:
        """The messages, or where there are none, the chat template's own system prompt as one: what the prompt holds
        before the first message (the template writes its own where the messages carry none)."""
        default = None if messages else self.default_system()
        return [Message("system", default)] if default else messages

    def folds_system(self) -> bool:
        """Whether the chat template has no place for a system message, as Gemma 1 and 2's, Mistral v0.1's and the
        first Phi-3's have none: it refuses one, or leaves it out. Its text then goes before the first user message's,
        as llama.cpp puts it (with_system_folded). Found once for the template (where a render was stopped at a
        limit, again next time)."""
        if self.template is None:
            return False
        try:
            return self._folds_system[self.template]
        except KeyError:
            pass
        found, settled = self._find_folds_system()
        if settled:
            self._folds_system[self.template] = found
            if found:
                log.debug("%s: the chat template has no place for a system message: the system prompt goes before "
                          "the first user message's text", one_line(self.model_name))
        return found

    def _find_folds_system(self) -> tuple[bool, bool]:
        """folds_system, found by rendering a marked system and user message as they are, then folded where the
        template leaves the system message out, or refuses it and also a system, user and assistant message (a
        template refusing one count of messages, or an alternation counted from the system message, takes the
        other); and whether that is settled: not where a render was stopped at the time or memory limit (another
        may pass): then the messages stay as they are where the first render was stopped, and are folded where a
        later one was (the render passes, or says it was stopped, where as given it would be refused)."""
        marked = [Message("system", _SYSTEM_MARK), Message("user", _USER_MARK)]
        try:
            kept = self._keeps_system(marked)
        except TemplateStopped:
            return False, False
        try:
            if kept is None:
                kept = self._keeps_system([*marked, Message("assistant", _USER_MARK)])
            if kept:
                return False, True
            return bool(self._keeps_system(with_system_folded(marked))), True  # refused too: its own error says so
        except TemplateStopped:
            return True, False

    def _keeps_system(self, messages: list[Message]) -> bool | None:
        """Whether the template's render of the messages as they are (without the generation prompt) keeps the
        marked system text; None where it refuses them (raising TemplateStopped where stopped at a limit)."""
        try:
            if messages == [Message("system", _SYSTEM_MARK), Message("user", _USER_MARK)]:
                return _SYSTEM_MARK in self._render_marked()
            return _SYSTEM_MARK in self._render_as_given(messages, add_generation_prompt=False)
        except TemplateStopped:
            raise
        except LocalgenError:
            return None

    def tokenize(self, tokenizer: Tokenizer, text: str) -> list[int]:
        """Tokenize rendered text (a template's control tokens read as such), adding BOS only when the model wants
        it and the text lacks it."""
        return tokenizer.tokenize(text, add_special=self._needs_bos(text), parse_special=self.is_chat)

    def _needs_bos(self, text: str) -> bool:
        """Whether tokenizing text must add the BOS token."""
        return self.adds_bos and not (self.bos_token and text.startswith(self.bos_token))

    def prompt(self, tokenizer: Tokenizer, messages: Sequence[Message]) -> tuple[str, list[int]]:
        """The prompt text and tokens for messages (tokenizer: the engine, or a ReusingTokenizer in front of it).

        The template's own text is read with its control tokens; the messages' texts are not: a message or
        document that contains '<|im_end|>' gives the model those characters, not a turn's end. Before rendering,
        each control-token text inside a message is defused with a character the messages do not use (so the
        template still sees, trims or rewrites the message's real text); in the rendered prompt, each defused
        occurrence is tokenized on its own, as plain text (split where llama.cpp would read it as its token even so).
        """
        messages = self._reasoning_apart(messages)
        if not self.is_chat:
            text = self.render(messages)
            return text, self._as_text(tokenizer, text)
        pattern = _control_pattern(self.control_tokens)
        if pattern is None or not any(pattern.search(_all_text(m)) for m in messages):
            text = self.render(messages)
            return text, self.tokenize(tokenizer, text)
        mark = _unused_character(messages)
        defused = self.render([_defused(m, pattern, mark) for m in messages])
        texts: list[str] = []
        tokens: list[int] = []
        for number, piece in enumerate(_defused_pattern(self.control_tokens, mark).split(defused)):
            template_text = number % 2 == 0  # the split alternates template text and a defused occurrence
            part = piece.replace(mark, "")  # a defused text a template cut short is left as plain characters
            if template_text:
                tokens += tokenizer.tokenize(part, add_special=number == 0 and self._needs_bos(part))
            else:
                tokens += _as_characters(tokenizer, part)
            texts.append(part)
        return "".join(texts), tokens

    def _as_text(self, tokenizer: Tokenizer, text: str) -> list[int]:
        """A plain completion's tokens (--raw): all of it characters, a control token's text too, even one llama.cpp
        reads as its token with special tokens unparsed (GPT-OSS's <|end|>); a text llama.cpp reads as characters
        whole is tokenized whole, as it was."""
        whole = self.tokenize(tokenizer, text)
        pattern = _control_pattern(self.control_tokens)
        if pattern is None or not pattern.search(text) or not _control_ids(tokenizer, self.control_tokens) & {*whole}:
            return whole
        tokens: list[int] = []
        for number, piece in enumerate(re.split(f"({pattern.pattern})", text)):
            if number % 2:
                tokens += _as_characters(tokenizer, piece)
            elif piece or number == 0:
                tokens += tokenizer.tokenize(piece, add_special=number == 0 and self._needs_bos(text),
                                             parse_special=False)
        return tokens

    def _reasoning_apart(self, messages: Sequence[Message]) -> list[Message]:
        """The messages as llama-server gives them to a chat template: an assistant's answer that holds closed
        reasoning (a <think> block, the one the generation prompt opens, a harmony answer's analysis channel) as a
        ReasonedMessage, so the template reads the answer alone as content, never the markup it would see defused."""
        if not self.is_chat:
            return list(messages)
        opened: bool | None = None  # whether the generation prompt opens a <think> block: asked once, where needed
        apart: list[Message] = []
        for message in messages:
            found = split_reasoning(message.content, opened=False) if message.role == "assistant" else None
            if found is None and message.role == "assistant" and CLOSE_TAG in message.content:
                if opened is None:
                    opened = self._opens_thinking([m for m in messages if m.role != "assistant"])
                found = split_reasoning(message.content, opened=True) if opened else None
            apart.append(message if found is None else ReasonedMessage(message.role, found[1], reasoning=found[0]))
        return apart

    def _opens_thinking(self, messages: Sequence[Message]) -> bool:
        """Whether the template's generation prompt after messages opens a <think> block (False where it fails)."""
        try:
            return prompt_opens_thinking(self.render(messages))
        except LocalgenError:
            return False


def _all_text(message: Message) -> str:
    """A message's text the template may write: its content, and its reasoning where it carries some apart."""
    return message.content + message.reasoning if isinstance(message, ReasonedMessage) else message.content


def _defused(message: Message, pattern: re.Pattern[str], mark: str) -> Message:
    """The message with each control-token text in it defused by mark after its first character."""
    def defuse(text: str) -> str:
        return pattern.sub(lambda found: found[0][0] + mark + found[0][1:], text)

    if isinstance(message, ReasonedMessage):
        return replace(message, content=defuse(message.content), reasoning=defuse(message.reasoning))
    return Message(message.role, defuse(message.content))


def _control_ids(tokenizer: Tokenizer, control_tokens: frozenset[str]) -> set[int]:
    """The ids of the control tokens whose text llama.cpp reads as one token."""
    ids = (tokenizer.tokenize(text, add_special=False, parse_special=True) for text in control_tokens)
    return {found[0] for found in ids if len(found) == 1}


def _as_characters(tokenizer: Tokenizer, text: str) -> list[int]:
    """The tokens of a control token's text as characters: tokenized with no special tokens parsed, and where
    llama.cpp reads the text as its token even so (one it types user-defined at load, as GPT-OSS's <|end|>), its
    first character tokenized apart from the rest."""
    tokens = tokenizer.tokenize(text, add_special=False, parse_special=False)
    if len(text) < 2 or tokens != tokenizer.tokenize(text, add_special=False, parse_special=True):
        return tokens
    return _as_characters(tokenizer, text[:1]) + _as_characters(tokenizer, text[1:])


def _unused_character(messages: Sequence[Message]) -> str:
    """A private-use character that no message contains."""
    for code in range(0xE000, 0xF900):
        if not any(chr(code) in _all_text(m) for m in messages):
            return chr(code)
    raise TemplateError("the messages use every private-use character", hint="send less unusual text")


@lru_cache(maxsize=8)
def _control_pattern(tokens: frozenset[str]) -> re.Pattern[str] | None:
    """A pattern finding any of the control tokens' texts (None when there are none)."""
    if not tokens:
        return None
    return re.compile("|".join(re.escape(token) for token in sorted(tokens, key=len, reverse=True)))


@lru_cache(maxsize=8)
def _defused_pattern(tokens: frozenset[str], mark: str) -> re.Pattern[str]:
    """A pattern that splits out control-token texts defused by mark after their first character (captured)."""
    defused = (re.escape(token[0] + mark + token[1:]) for token in sorted(tokens, key=len, reverse=True))
    return re.compile(f"({'|'.join(defused)})")


_LEADING_BLANK_LINES = re.compile(r"\A(?:[^\S\n]*\n)+")  # lines of nothing but spaces


def compose_user_message(instruction: str | None, attachments: Sequence[str], *, exact: bool = False) -> str:
    """Attachments (files, then stdin) first, then the instruction, separated by blank lines; CRLF line ends become
    LF. The instruction goes as typed, but for its blank lines before and its whitespace after: pasted code keeps the
    indentation of its first line, as Ollama keeps it.

    exact keeps every part byte for byte (a plain completion: a trailing newline or space is part of the text),
    adding only the newlines a blank line between two parts still needs.
    """
    if not exact:  # Windows line ends become \n, as a text-mode read makes them
        parts = [a.replace("\r\n", "\n").strip("\n") for a in attachments if a.strip()]
        if instruction and instruction.strip():
            parts.append(_LEADING_BLANK_LINES.sub("", instruction.rstrip()))
        return "\n\n".join(parts)
    text = ""
    for part in [*attachments, instruction or ""]:
        if part:
            text += ("" if not text or text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n") + part
    return text


def with_system_folded(messages: Sequence[Message]) -> list[Message]:
    """The messages with each system message's text put before the next user message's (SYSTEM_FOLD_SEPARATOR
    between), or in a user message of its own where no user message comes next; an empty one left out."""
    result: list[Message] = []
    pending: list[str] = []
    for message in messages:
        if message.role == "system":
            pending += [message.content] if message.content else []
            continue
        if pending and message.role == "user":
            message = Message("user", SYSTEM_FOLD_SEPARATOR.join(filter(None, [*pending, message.content])))
        elif pending:
            result.append(Message("user", SYSTEM_FOLD_SEPARATOR.join(pending)))
        pending = []
        result.append(message)
    if pending:
        result.append(Message("user", SYSTEM_FOLD_SEPARATOR.join(pending)))
    return result

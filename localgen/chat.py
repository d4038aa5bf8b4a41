"""Conversations and chat templates: messages rendered in a sandbox, then tokenized."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING

from localgen.errors import TemplateError

if TYPE_CHECKING:
    from jinja2 import Template

    from localgen.engine import Engine

TEMPLATE_TIME_LIMIT_S = 2.0
TEMPLATE_OUTPUT_LIMIT_CHARS = 4 * 1024 * 1024
ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Message:
    """One chat message."""

    role: str
    content: str

    def to_dict(self) -> dict[str, str]:
        """The {role, content} dict chat templates expect."""
        return {"role": self.role, "content": self.content}


class _TemplateRaised(Exception):
    """A template called raise_exception()."""


def _raise_exception(message: str) -> None:
    """The raise_exception() helper that Hugging Face chat templates call."""
    raise _TemplateRaised(message)


def _strftime_now(fmt: str) -> str:
    """The strftime_now() helper some templates use for today's date."""
    return datetime.now().strftime(fmt)


@lru_cache(maxsize=8)
def _compile(source: str) -> Template:
    """Compile a chat template in Jinja2's immutable sandbox."""
    from jinja2 import TemplateSyntaxError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, autoescape=False)
    env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)
    try:
        return env.from_string(source)
    except TemplateSyntaxError as exc:
        raise TemplateError(f"the chat template is not valid Jinja: {exc.message} (line {exc.lineno})",
                            hint="set a `template` override for this model in your models.toml") from exc


def render_template(source: str, messages: Sequence[Message], *, bos_token: str, eos_token: str,
                    add_generation_prompt: bool = True, model_name: str = "this model") -> str:
    """Render a chat template safely: sandboxed, time-limited and size-limited."""
    try:
        template = _compile(source)
    except TemplateError as exc:
        raise TemplateError(f"{model_name}: {exc.message}", hint=exc.hint) from exc
    context = {
        "messages": [m.to_dict() for m in messages],
        "bos_token": bos_token,
        "eos_token": eos_token,
        "add_generation_prompt": add_generation_prompt,
    }
    hint = "set a `template` override for this model in your models.toml, or use --raw"
    try:
        return "".join(_bounded(template.generate(context), model_name))
    except _TemplateRaised as exc:
        raise TemplateError(f"{model_name}: the chat template refused the messages: {exc}", hint=hint) from exc
    except TemplateError:
        raise
    except Exception as exc:  # a hostile or broken template must never crash the process
        raise TemplateError(f"{model_name}: the chat template failed: {type(exc).__name__}: {exc}",
                            hint=hint) from exc


def _bounded(pieces: Iterator[str], model_name: str) -> Iterator[str]:
    """Pass template output through, stopping at the time and size limits."""
    deadline = time.monotonic() + TEMPLATE_TIME_LIMIT_S
    size = 0
    for piece in pieces:
        size += len(piece)
        if size > TEMPLATE_OUTPUT_LIMIT_CHARS:
            raise TemplateError(f"{model_name}: the chat template output exceeds "
                                f"{TEMPLATE_OUTPUT_LIMIT_CHARS:,} characters",
                                hint="set a `template` override for this model in your models.toml")
        if time.monotonic() > deadline:
            raise TemplateError(f"{model_name}: the chat template took over {TEMPLATE_TIME_LIMIT_S:g} s",
                                hint="set a `template` override for this model in your models.toml")
        yield piece


@dataclass(frozen=True)
class PromptFormat:
    """How messages become prompt text for one model: its template, or plain completion."""

    template: str | None
    bos_token: str
    eos_token: str
    adds_bos: bool
    model_name: str

    @property
    def is_chat(self) -> bool:
        """True when messages go through a chat template."""
        return self.template is not None

    @classmethod
    def for_engine(cls, engine: Engine, *, override: str | None, raw: bool, model_name: str) -> PromptFormat:
        """The prompt format of a loaded model (override template wins; raw forces plain text)."""
        template = None if raw else (override or engine.chat_template())
        return cls(template=template, bos_token=engine.bos_text, eos_token=engine.eos_text,
                   adds_bos=engine.adds_bos, model_name=model_name)

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str:
        """Messages as prompt text: the template's output, or the plain texts joined."""
        if self.template is None:
            return "\n\n".join(m.content for m in messages)
        return render_template(self.template, messages, bos_token=self.bos_token, eos_token=self.eos_token,
                               add_generation_prompt=add_generation_prompt, model_name=self.model_name)

    def tokenize(self, engine: Engine, text: str) -> list[int]:
        """Tokenize rendered text, adding BOS only when the model wants it and the text lacks it."""
        has_bos = bool(self.bos_token) and text.startswith(self.bos_token)
        return engine.tokenize(text, add_special=self.adds_bos and not has_bos, parse_special=self.is_chat)


def compose_user_message(instruction: str | None, attachments: Sequence[str]) -> str:
    """Attachments (files, then stdin) first, then the instruction, separated by blank lines."""
    parts = [a.strip("\n") for a in attachments if a.strip()]
    if instruction and instruction.strip():
        parts.append(instruction.strip())
    return "\n\n".join(parts)

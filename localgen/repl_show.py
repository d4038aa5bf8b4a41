"""A chat's /show: what it runs with, whole or one part (Ollama's /show info, parameters, system, template and
license)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from localgen import console
from localgen.errors import LocalgenError, UsageError
from localgen.repl_text import brief, exchanges_in_context
from localgen.stopping import escaped
from localgen.think_switch import think_line

if TYPE_CHECKING:
    from localgen.session import ChatSession

SHOW_PARTS = ("info", "settings", "system", "template", "license")
EMPTY_SYSTEM = "(empty: the template's default is left out)"  # system "": the model gets an empty system prompt
TEMPLATE_SYSTEM_WAYS = '/system TEXT replaces it, /system "" leaves it out'  # the template's own system prompt
BLANK_SYSTEM = "(whitespace only)"  # a system prompt of spaces or newlines (a --system-file of them): sent as it is
_ALSO = {"parameters": "settings"}  # Ollama's name


def show(session: ChatSession, part: str, settings_text: str) -> None:
    """Say what /show PART asks for (everything when part is empty); settings_text is the sampling settings' line."""
    wanted = _ALSO.get(part.lower(), part.lower())
    if wanted == "modelfile":
        raise UsageError("localgen has no Modelfile", hint="a model's settings go in models.toml, as README's "
                                                           "Models section says; /show says what this chat uses")
    if wanted and wanted not in SHOW_PARTS:
        raise UsageError(f"/show has no part '{part}'", hint=f"/show alone, or one of: {', '.join(SHOW_PARTS)}")
    if wanted in ("", "info"):
        _model(session)
    if wanted in ("", "settings"):
        _settings(session, settings_text)
    if wanted == "":
        conversation = session.conversation
        default = None if conversation.system is not None else session.loaded.prompt_format.default_system()
        console.say(f"system: {brief(conversation.system) or BLANK_SYSTEM}" if conversation.system else
                    f"system: {EMPTY_SYSTEM}" if conversation.system == "" else
                    f"system: (none; the chat template adds {brief(default)!r})" if default else "system: (none)")
        console.say(f"conversation: {conversation.name}, {exchanges_in_context(conversation)}")
    elif wanted == "system":
        console.say(system_prompt_line(session))
    elif wanted == "template":
        template = session.loaded.prompt_format.template
        console.say(template.rstrip("\n") if template else "no chat template: plain completion")
    elif wanted == "license":
        console.say(f"license: {_license(session)}")


def system_prompt_line(session: ChatSession, *, cleared: bool = False) -> str:
    """The chat's system prompt in full, or the chat template's own that goes in its place (/show system, /system;
    cleared: /system none or off, which just cleared it)."""
    if cleared and session.conversation.system is None:
        default = session.loaded.prompt_format.default_system()
        return (f"system prompt cleared; the chat template adds its own: {default!r} ({TEMPLATE_SYSTEM_WAYS})"
                if default else "system prompt cleared: the model gets none (/system TEXT sets one)")
    if session.conversation.system:
        return f"system prompt: {session.conversation.system if session.conversation.system.strip() else BLANK_SYSTEM}"
    if session.conversation.system == "":
        return f"system prompt: {EMPTY_SYSTEM} (/system none lets the template add its own)"
    default = session.loaded.prompt_format.default_system()
    if default:
        return f"no system prompt set; the chat template adds its own: {default!r} ({TEMPLATE_SYSTEM_WAYS})"
    return "no system prompt (/system TEXT sets one)"


def _model(session: ChatSession) -> None:
    """The model, its file, context, GPU layers, threads, KV type and memory plan."""
    loaded = session.loaded
    opts = loaded.engine.options
    console.say(f"model: {loaded.resolved.display_name} ({loaded.resolved.shown_source})")
    console.say(f"path: {loaded.resolved.path}", wrapped=False)  # after its label, whole, to be copied: the terminal
    # folds it where it is wider than what the line has left
    console.say(f"context: {loaded.engine.n_ctx:,} tokens (trained {loaded.engine.n_ctx_train:,}); "
                f"GPU layers: {opts.n_gpu_layers}; threads: {opts.n_threads}; KV type: {opts.kv_layout}")
    if loaded.plan is not None:
        console.say(f"plan: {loaded.plan.describe()}")


def _settings(session: ChatSession, settings_text: str) -> None:
    """The sampling settings, this chat's stop strings, and its thinking switch."""
    console.say(f"settings: {settings_text}")
    if session.limits.stop:  # --stop, /set stop or models.toml's: for this chat, not kept with the conversation
        console.say(stop_strings_line(session.limits.stop, from_models_toml=not session.own_stop))
    console.say(think_line(session.loaded.prompt_format.template, session.options.think))


def stop_strings_line(stops: tuple[str, ...], *, from_models_toml: bool = False) -> str:
    """This chat's stop strings, each written as /set stop reads it back ('\\t', "it's"), and whether models.toml
    gave them; or how to set some."""
    if not stops:
        return 'no stop strings (/set stop TEXT sets them; quote one with spaces or commas: "User says:")'
    source = "this chat, from models.toml" if from_models_toml else "this chat"
    return f"stop strings ({source}): {', '.join(map(escaped, stops))}"


def _license(session: ChatSession) -> str:
    """The license models.toml gives the model, else the one its file names, else 'unknown'."""
    from localgen.gguf_reader import read_gguf

    spec = session.loaded.resolved.spec
    if spec is not None and spec.license:
        return spec.license
    try:
        named = read_gguf(session.loaded.resolved.path).metadata.get("general.license")
    except LocalgenError:
        named = None
    return str(named) if named else "unknown (the model file names none)"

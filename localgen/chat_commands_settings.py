"""The chat's commands for what it runs with: /system, /set (and /set stop), /stats, /think, /thinking, /markdown
and /wrap."""

from __future__ import annotations

import shlex

from localgen import console
from localgen.chat_settings import setting_key, setting_text
from localgen.conversation import asks_for_no_system_prompt  # off, as /wrap off and /stats off switch theirs off
from localgen.conversation_summary import details_line, model_name, saved_figures
from localgen.conversation_turn import Turn
from localgen.errors import UnbalancedQuoteError, UsageError
from localgen.repl_input import history_path, unwrap_block, usage_error
from localgen.repl_show import EMPTY_SYSTEM, stop_strings_line, system_prompt_line
from localgen.repl_state import ChatState
from localgen.session import ChatSession
from localgen.stopping import words_read
from localgen.think_switch import CHAT_HINT, parse_think, refuse_think, think_line

UNSET_MEANS = {"seed": "random", "max_tokens": "no limit"}  # what /set says a setting of none does
KEEPS_HISTORY = "always keeps the input history"  # what localgen does of Ollama's /set history and /set nohistory
OLLAMA_SWITCHES = {  # Ollama's /set WORD and /set noWORD that localgen has no switch for: what it does, and the way
    "format": ("does not make a chat's answers JSON", 'localgen run --json-schema SCHEMA "..." answers in JSON that '
                                                     "follows a schema"),
    "history": (KEEPS_HISTORY,
                "`ln -sf /dev/null {history}` keeps none, in place of the history kept so far"),
}
OLLAMA_ALREADY = {  # Ollama's /set WORD that asks for what localgen always does: the note that says so
    "history": f"localgen {KEEPS_HISTORY} (Up and Ctrl-R recall it) and the conversation (/clear starts afresh)",
    "noformat": "localgen never makes a chat's answers JSON: they come as the model writes them",
}


def system_command(state: ChatState, argument: str) -> None:
    """/system [TEXT|none|off|""]: show the system prompt, set it, clear it, or make it empty."""
    session = state.session
    if not argument:
        console.say(system_prompt_line(session))
        return
    text = _unquoted(unwrap_block(argument))  # a triple-quoted block, as Ollama's /set system takes
    if asks_for_no_system_prompt(argument):  # "none" or "off" quoted is the word itself
        had_one = session.conversation.system is not None
        session.set_system(None)
        console.say(system_prompt_line(session, cleared=had_one))  # none was set: it says there is none
    elif not text:  # "" or '', as -s "" gives: an empty one, not the template's own
        session.set_system("")
        console.say(f"system prompt set: {EMPTY_SYSTEM}")
    else:
        session.set_system(text)
        console.say("system prompt set")


def set_command(state: ChatState, argument: str) -> None:
    """/set PARAM VALUE: change a setting (PARAM alone shows it; Ollama's spellings too)."""
    _refuse_joined(argument)
    word, _, rest = argument.partition(" ")
    ollama = {"parameter": lambda: set_command(state, rest.strip()),
              "system": lambda: system_command(state, rest.strip()),
              "verbose": lambda: stats_command(state, "on"), "quiet": lambda: stats_command(state, "off"),
              "wordwrap": lambda: wrap_command(state, "on"), "nowordwrap": lambda: wrap_command(state, "off"),
              "think": lambda: think_command(state, "on"), "nothink": lambda: think_command(state, "off")}
    switches = ("verbose", "quiet", "wordwrap", "nowordwrap", "think", "nothink", *OLLAMA_ALREADY)  # /set WORD alone
    switch = word.lower().removeprefix("no")
    if word.lower() in switches and rest.strip():
        raise UsageError(f"/set {word.lower()} takes no argument", hint=f"type /set {word.lower()} alone")
    if word.lower() in OLLAMA_ALREADY:  # Ollama's /set history: on here already
        console.say(f"/set {word.lower()} is Ollama's: {OLLAMA_ALREADY[word.lower()]}")
        return
    if switch in OLLAMA_SWITCHES:  # Ollama's /set nothink, /set format json, /set nowordwrap
        does, way = OLLAMA_SWITCHES[switch]
        raise UsageError(f"/set {word.lower()} is Ollama's: localgen {does}",
                         hint=way.format(history=shlex.quote(str(history_path()))))
    if word.lower() == "stop":  # /set stop TEXT..., as Ollama's /set parameter stop (for this chat, as --stop)
        _set_stop(state.session, rest.strip())
        return
    if word.lower() in ollama:  # Ollama's spellings: /set parameter NAME VALUE, /set system TEXT, /set verbose
        ollama[word.lower()]()
        return
    parts = argument.split(None, 1)
    if len(parts) == 1:  # /set temp: the current value
        key, value = state.session.value_of(parts[0])
        console.say(f"{key} = {value} (/set {key} VALUE changes it)")
        return
    if len(parts) != 2:
        raise usage_error("/set", "/set needs a setting and its value")
    key, value = state.session.set_value(parts[0], parts[1])
    console.say(f"{key} = {value}" + (f" ({UNSET_MEANS[key]})" if value == "none" and key in UNSET_MEANS else ""))


def _refuse_joined(argument: str) -> None:
    """Refuse a setting and its value joined by '=' (/set temperature=0.7, /set temperature= 0.7, as a config file
    writes them; /set stop=a, /set system=TEXT) with the command that sets it; a stop string or system prompt after a
    blank may be or hold '=' (/set stop =, /set stop a=b)."""
    name, joined, value = argument.lstrip("=").partition("=")
    if not joined or len(name.split()) != 1:
        return
    word = name.strip()
    free_text = word.lower() in ("stop", "system")  # their own commands, which take text
    if free_text and word != name:
        return
    key = word.lower() if free_text else setting_key(word)
    raise UsageError(f"/set takes a setting and its value apart, not '{argument}'",
                     hint=f"/set {key} {value.strip(' =') or ('TEXT' if free_text else 'VALUE')}")


def _set_stop(session: ChatSession, argument: str) -> None:
    """/set stop TEXT...: this chat's stop strings (quoted as in a shell, with their escapes read as /show writes
    them: stopping.words_read; none clears them; alone: shows them; commas alone, which name none, are refused)."""
    if not argument:
        console.say(stop_strings_line(session.limits.stop, from_models_toml=not session.own_stop))
        return
    if argument.lower() == "none":
        session.set_stop(())
        console.say("stop strings cleared")
        return
    try:
        words = words_read(argument)
    except ValueError:  # said as /file, /load and /model say it
        raise UnbalancedQuoteError("/set stop TEXT...",
                                   more=" (a backslash as \\\\, as /show writes it: 'C:\\\\')") from None
    if not words:  # ',' or ', ,': separators only, which name no stop string (none clears them)
        raise UsageError("/set stop: no stop string was given (commas and spaces only part them)",
                         hint='/set stop none clears them; a comma itself is one quoted or escaped: /set stop "," '
                              "or /set stop \\,")
    if "" in words:
        raise UsageError("/set stop: a stop string is empty", hint="give each stop string some text")
    session.set_stop(tuple(words))
    console.say(stop_strings_line(session.limits.stop))


def stats_command(state: ChatState, argument: str) -> None:
    """/stats [on|off]: the last answer's figures, or turn them on or off after every answer."""
    if argument:
        switch = _on_or_off(argument, "/stats")
        state.stats_after_answers = switch
        console.say(f"stats {'after every answer' if switch else 'on request (/stats)'}")
        return
    say_stats(state.session)


def say_stats(session: ChatSession) -> None:
    """The last answer's figures, with the context the conversation uses (/stats, and after every answer); those
    saved with it where it came with the conversation loaded; none where another model file than the one in use
    gave them (the toolbar's rule), that model named."""
    turns = session.conversation.turns
    if turns and turns[-1].answer is not None and not session.figures_of_model_in_use():
        console.say(f"no answer from the model in use yet: {_last_answer_by(turns[-1], session.conversation.model)}")
        return
    last = session.last
    if last is None:
        answered = any(turn.answer is not None for turn in turns)
        if saved_figures(turns) is not None:
            console.say(f"the saved answer's figures (it came with the conversation loaded): {details_line(turns[-1])}")
        else:
            console.say("no figures for the last answer: it came with the conversation loaded, or an error cut it "
                        "short" if answered else "no answer yet")
        return
    used = session.context_used()
    context = None if used is None else (used, session.loaded.engine.n_ctx)
    console.say(console.format_stats(last, context=context))


def _last_answer_by(turn: Turn, in_use: str | None) -> str:
    """Which model gave an answer, in words, for /stats where it was another file than the model in use (in_use: how
    the conversation names that one): by its path where its file name is the one in use's too."""
    given = turn.details.model if turn.details is not None else None
    if given is None:
        return "the last answer came from another model"
    named = given if in_use is not None and model_name(given) == model_name(in_use) else model_name(given)
    return f"the last answer came from {named} (/stats shows the figures of answers from the model in use)"


def last_decode_speed(session: ChatSession) -> float | None:
    """The last answer's decode tok/s (the toolbar's), or the one saved with it where it came with the conversation
    loaded; None where there is none, or another model file than the one in use gave it (/model switched models since
    it, or /undo made an answer of the previous model the last)."""
    if not session.figures_of_model_in_use():
        return None
    if session.last is not None:
        return session.last.timings.decode_tokens_per_s
    saved = saved_figures(session.conversation.turns)
    return saved.decode_tokens_per_s if saved is not None else None


def thinking_command(state: ChatState, argument: str) -> None:
    """/thinking [on|off]: show or hide the reasoning the model writes (alone: say which)."""
    if not argument:
        console.say("reasoning is shown (/thinking off hides it)" if state.show_thinking
                    else "reasoning is hidden (/thinking on shows it)")
        return
    state.show_thinking = _on_or_off(argument, "/thinking")
    console.say(f"reasoning is {'shown' if state.show_thinking else 'hidden'}")


def think_command(state: ChatState, argument: str) -> None:
    """/think [on|off|low|medium|high]: let the model think before it answers, or not, through its chat template's
    switch (alone: say which); a template without one changes nothing."""
    session = state.session
    prompt_format = session.loaded.prompt_format
    if argument:
        think = parse_think(argument, "/think")
        refuse_think(prompt_format.template, think, model_name=prompt_format.model_name, flag="/think",
                     hide_hint=CHAT_HINT)
        session.choose_think(think)
    console.say(think_line(prompt_format.template, session.options.think))


def markdown_command(state: ChatState, argument: str) -> None:
    """/markdown [on|off]: render answers as Markdown, or print them exactly as written (alone: say which)."""
    if not argument:
        console.say("answers are shown as Markdown (/markdown off prints them exactly as written)" if state.markdown
                    else "answers are shown as plain text, exactly as written (/markdown on renders Markdown)")
        return
    switch = _on_or_off(argument, "/markdown")
    if switch and not state.escapes:
        console.say("Markdown needs a terminal that takes escape sequences (TERM=dumb here); answers stay plain")
    else:
        state.markdown = switch
        console.say(f"answers are shown {'as Markdown' if switch else 'as plain text, exactly as written'}")


def wrap_command(state: ChatState, argument: str) -> None:
    """/wrap [on|off]: break answers' lines between words at the window's edge, or keep them whole (alone: say
    which)."""
    if not argument:
        console.say("answers' lines break between words at the window's edge (/wrap off keeps them whole)"
                    if state.wrap else "answers' lines are kept whole, the terminal breaking them at its edge "
                    "(/wrap on breaks them between words)")
        return
    state.wrap = _on_or_off(argument, "/wrap")
    console.say("answers' lines break between words at the window's edge" if state.wrap
                else "answers' lines are kept whole, the terminal breaking them at its edge")


def settings_text(session: ChatSession) -> str:
    """The sampling settings as 'name=value, ...' (unset ones as none)."""
    return ", ".join(f"{key}={setting_text(value)}" for key, value in session.settings().items())


def _unquoted(text: str) -> str:
    """Text without the quotes around it when it is one quoted string ("Be brief." as -s takes it from a shell);
    other text as it is (quotes inside it, or only at one end, are its own)."""
    stripped = text.strip()
    quote = stripped[:1]
    if quote in ("'", '"') and len(stripped) >= 2 and stripped.endswith(quote) and quote not in stripped[1:-1]:
        return stripped[1:-1]
    return text


def _on_or_off(argument: str, command: str) -> bool:
    """A switch command's argument as True (on) or False (off); anything else is refused with the command's usage."""
    switch = argument.lower()
    if switch not in ("on", "off"):
        raise usage_error(command, f"{command} takes on or off, not {argument!r}")
    return switch == "on"

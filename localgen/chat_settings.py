"""How a chat reads a setting typed by name and value (/set, a run's or a resumed conversation's options): the
settings' names, the command line's and Ollama's names for them, and their values as text."""

from __future__ import annotations

from localgen.errors import UsageError
from localgen.params import CHAT_SETTINGS, SETTING_EXAMPLES, number_text
from localgen.slips import did_you_mean

SETTING_NAMES = tuple(CHAT_SETTINGS)
SETTING_ALIASES = {"temp": "temperature", "n": "max_tokens",  # the command line's other names (--temp, -n)
                   "num_predict": "max_tokens"}  # and Ollama's
STARTUP_ONLY = {  # what is set as the chat starts, by its option's names and Ollama's: what it is, how to set it
    **dict.fromkeys(("num_ctx", "ctx_size", "c"), ("the context size", "-c N (--ctx-size)")),
    **dict.fromkeys(("num_thread", "threads", "t"), ("the thread count", "-t N (--threads)")),
    **dict.fromkeys(("num_gpu", "gpu_layers", "ngl"), ("the number of GPU layers", "-ngl N (--gpu-layers)")),
}


def setting_name(name: str) -> str:
    """The name a setting typed by any of its names is read as (temp, --top-p, -n, num_predict), known or not."""
    key = name.lstrip("-").replace("-", "_").lower()
    return SETTING_ALIASES.get(key, key)


def setting_key(name: str) -> str:
    """A setting's canonical name: it goes by its name, or as on the command line (temp, --top-p, -n)."""
    key = setting_name(name)
    if key in STARTUP_ONLY:
        what, option = STARTUP_ONLY[key]
        raise UsageError(f"{what} is set when the chat starts",
                         hint=f"start it with {option}; /show says what it is now")
    if key not in SETTING_NAMES:
        raise UsageError(f"unknown setting '{name}'", hint=f"{did_you_mean(key, SETTING_NAMES)}settings: "
                                                             f"{', '.join(SETTING_NAMES)}")
    return key


def parse_setting(key: str, raw: str) -> int | float | None:
    """Parse a /set value for a setting, as the right type (quoted too: /set temperature "0.7")."""
    kind = CHAT_SETTINGS[key]
    raw = _unquoted(raw.strip())
    text = raw.lower()
    if key == "seed" and text in ("none", "random"):
        return None
    if key == "max_tokens" and text in ("none", "off", "-1"):
        return None
    try:
        if not raw.isascii() or "_" in raw:  # int() and float() read other scripts' digits and 1_0 as 10
            raise ValueError(raw)
        return kind(raw)
    except ValueError:
        from localgen.cli_options import number_slip_hint

        slip = number_slip_hint(raw, whole=kind is int, example=f"/set {key} {{}}")  # 0,7 as the command line says it
        raise UsageError(f"'{raw}' is not a valid value for {key}",
                         hint=slip or f"e.g. /set {key} {SETTING_EXAMPLES[key]}") from None


def setting_text(value: object) -> str:
    """A setting's value as the chat writes it (/set, /show, a command that starts it again): none where unset, a
    number in its shortest form (500 for 500.0, 0.1)."""
    return "none" if value is None else number_text(value)


def _unquoted(text: str) -> str:
    """A value without the quotes around it ("0.7" or '0.7')."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1].strip()
    return text

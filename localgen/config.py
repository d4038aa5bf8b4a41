"""Paths, environment settings and defaults: localgen's settings are read from the environment here and only here
(the terminal's convention TERM is read where output is written, HF_ENDPOINT where Hub addresses are)."""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Iterator

    from localgen.errors import ConfigError, LocalgenError

SettingError = TypeVar("SettingError", bound="LocalgenError")

APP_NAME = "localgen"

DEFAULT_CONTEXT_CAP = 8192
DEFAULT_BATCH_SIZE = 512
DEFAULT_UBATCH_SIZE = 512
DEFAULT_TEMPERATURE = 0.8
DEFAULT_TOP_K = 40
DEFAULT_TOP_P = 0.95
DEFAULT_MIN_P = 0.05
DEFAULT_REPEAT_PENALTY = 1.1
DEFAULT_REPEAT_LAST_N = 64
DEFAULT_PROMPT_CACHE_BYTES = 2 * 1024**3
DEFAULT_DRAFT = "none"  # speculative decoding for `run`: "lookup" or "none" (chosen by measurement, see README)
PROMPT_CACHE_DIRNAME = "prompts"
PROMPT_CACHE_BYTES_ENV = "LOCALGEN_PROMPT_CACHE_BYTES"
USER_REGISTRY_FILE = "models.toml"
MEMORY_LIMIT_ENV = "LOCALGEN_MEMORY_LIMIT"  # caps the RAM the load planner counts on (bytes or a size: 4GiB)
VRAM_LIMIT_ENV = "LOCALGEN_VRAM_LIMIT"  # caps the VRAM budget the same way
LEAST_LIMIT_BYTES = 2**20  # a RAM or VRAM limit or a prompt cache bound below this (=8, meaning 8GiB) holds nothing
MOST_PROMPT_CACHE_BYTES = 2**50  # 1 PiB: a larger prompt cache bound is more than a disk holds, so a typo
# Any one set to 1 turns the network off; TRANSFORMERS_OFFLINE only where HF_HUB_OFFLINE is unset or empty, as
# huggingface_hub reads it in HF_HUB_OFFLINE's place
OFFLINE_ENVS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "LOCALGEN_OFFLINE")


TRUE_VALUES = frozenset({"1", "true", "yes", "on"})
FALSE_VALUES = frozenset({"", "0", "false", "no", "off"})
OWN_FLAG_ENVS = ("LOCALGEN_OFFLINE", "LOCALGEN_DEBUG", "LOCALGEN_NO_LAST_RUN")
AMX_ENV = "LOCALGEN_AMX"
ENDING_WRITE_WAIT_ENV = "LOCALGEN_ENDING_WRITE_WAIT"  # seconds a write its reader keeps waiting may wait at the end
DEFAULT_ENDING_WRITE_WAIT_S = 2.0  # once a signal ends the program: how long a write its reader keeps waiting waits
MOST_ENDING_WRITE_WAIT_S = 3600.0
# LOCALGEN_AMX's values: llama.cpp's AMX weight buffers without the probe (a build whose kernels crash crashes), never,
# or where the probe finds they work (engine.amx); no yes or on, which would read as the safe choice and is not
AMX_VALUES: dict[str, bool | None] = {"1": True, "0": False, "auto": None, "": None}


def _env_flag(name: str) -> bool:
    """True when an environment variable is set to a truthy value."""
    return os.environ.get(name, "").strip().lower() in TRUE_VALUES


def debug_asked() -> bool:
    """LOCALGEN_DEBUG=1: debug logging and tracebacks; read without the settings, which need a home folder."""
    return _env_flag("LOCALGEN_DEBUG")


def login_shell() -> str:
    """The name of the user's shell as $SHELL gives it (/usr/bin/zsh: zsh), lower case; empty where it is unset."""
    return Path(os.environ.get("SHELL", "").strip()).name.lower()


def _offline_envs() -> tuple[str, ...]:
    """The variables of OFFLINE_ENVS that turn offline mode on, read as huggingface_hub reads them: TRANSFORMERS_OFFLINE
    where HF_HUB_OFFLINE is unset or empty (HF_HUB_OFFLINE=0 keeps the network on), or beside HF_HUB_OFFLINE=1, as it
    turns the network off again once that is unset."""
    stand_in = not os.environ.get("HF_HUB_OFFLINE") or _env_flag("HF_HUB_OFFLINE")
    return tuple(name for name in OFFLINE_ENVS if _env_flag(name) and (name != "TRANSFORMERS_OFFLINE" or stand_in))


def _ending_write_wait(value: str) -> float | None:
    """LOCALGEN_ENDING_WRITE_WAIT's seconds (unset or empty: the default); None for what is no such number."""
    try:
        seconds = float(value) if value.strip() else DEFAULT_ENDING_WRITE_WAIT_S
    except ValueError:
        return None
    return seconds if 0 <= seconds <= MOST_ENDING_WRITE_WAIT_S else None


def _ending_write_wait_or_default() -> float:
    """LOCALGEN_ENDING_WRITE_WAIT's seconds, or the default where it is no such number (check_environment says so)."""
    seconds = _ending_write_wait(os.environ.get(ENDING_WRITE_WAIT_ENV, ""))
    return DEFAULT_ENDING_WRITE_WAIT_S if seconds is None else seconds


def _amx_choice() -> bool | None:
    """LOCALGEN_AMX: True (1) or False (0) where it forces AMX buffers on or off; None where the probe decides."""
    return AMX_VALUES.get(os.environ.get(AMX_ENV, "").strip().lower())


FOLDER_ENVS = ("LOCALGEN_HOME", "HF_HOME", "HF_HUB_CACHE")
# The XDG base directories and their fallbacks under the home folder; huggingface_hub keeps its files under
# XDG_CACHE_HOME too, where HF_HOME is unset
XDG_FALLBACKS = {"XDG_CONFIG_HOME": ".config", "XDG_DATA_HOME": ".local/share", "XDG_CACHE_HOME": ".cache"}


def _nearest_existing(path: Path) -> Path | None:
    """path or the nearest folder above it that exists (None when none can be told, as under a folder that may
    not be entered)."""
    try:
        return next((p for p in (path, *path.parents) if p.exists() or p.is_symlink()), None)
    except OSError:
        return None


def _folder_envs_read() -> list[str]:
    """The folder variables set that localgen or huggingface_hub keeps files under: FOLDER_ENVS; the XDG base
    directories without LOCALGEN_HOME, XDG_CACHE_HOME without HF_HOME too; HOME where a folder falls back to it."""
    xdg = [*XDG_FALLBACKS] if not os.environ.get("LOCALGEN_HOME") else []
    if not os.environ.get("HF_HOME") and "XDG_CACHE_HOME" not in xdg:
        xdg.append("XDG_CACHE_HOME")
    home = ["HOME"] if _home_movers() and "HOME" in os.environ else []  # set empty too: ~ would be /
    return [name for name in (*FOLDER_ENVS, *xdg) if os.environ.get(name)] + home


def _home_movers() -> list[str]:
    """The variables that would move the folders localgen or huggingface_hub keep files in that fall back to HOME:
    LOCALGEN_HOME for localgen's own, without it where their XDG variable is unset or relative; HF_HOME for the hub
    cache, without HF_HUB_CACHE, HF_HOME and an absolute XDG_CACHE_HOME (none: no folder falls back to HOME)."""
    own = not os.environ.get("LOCALGEN_HOME") and any(not _xdg_absolute(name) for name in XDG_FALLBACKS)
    hub = not os.environ.get("HF_HUB_CACHE") and not os.environ.get("HF_HOME") and not _xdg_absolute("XDG_CACHE_HOME")
    return [name for name, falls_back in (("LOCALGEN_HOME", own), ("HF_HOME", hub)) if falls_back]


def _home_hint(*, is_set: bool = True) -> str:
    """The hint of a home folder refused (HOME empty, relative or a file, or unset with none known): set HOME right, or
    unset it where it is set (the user's home folder is looked up then), or move what falls back to it."""
    movers = _home_movers()
    where = f"{' and '.join(movers)} to {'folders of their own' if len(movers) > 1 else 'a folder of its own'}"
    return f"set HOME to your home folder's absolute path{' or unset it' if is_set else ''}, or set {where}"


def _unknown_home_error() -> ConfigError | None:
    """The error where a folder falls back to the home folder and none is known: HOME unset, and the user without an
    entry in the password database (Path.home() fails); None otherwise."""
    from localgen.errors import ConfigError

    if "HOME" in os.environ or not _home_movers():
        return None
    try:
        Path.home()
    except RuntimeError:
        return ConfigError(f"no home folder is known: HOME is unset, and user {os.getuid()} has no entry in the "
                           "password database", hint=_home_hint(is_set=False))
    return None


def _xdg_absolute(name: str) -> bool:
    """Whether an XDG variable names an absolute path (spaces around it too: they are refused); the XDG spec ignores
    any other value, spaces alone included."""
    return Path(os.environ.get(name, "").strip()).is_absolute()


def _folder_error(name: str, value: str) -> ConfigError | None:
    """The error for a folder variable set to what can hold no folder (spaces around it, a file, a link that leads
    to nothing; for HOME, a path that is not absolute); None where localgen can make and use the folder."""
    from localgen.errors import ConfigError
    from localgen.links import broken_link

    if name in XDG_FALLBACKS and not _xdg_absolute(name):
        return None  # ignored, as the XDG spec says
    if name == "HOME" and not value:  # Python takes / for ~ then
        return ConfigError("HOME is set but empty, so the folders kept under it would be made under /",
                           hint=_home_hint())
    if value.strip() != value:
        return spaced_setting_error(ConfigError, name, value, what="the folder", kept="they would be part of its name",
                                    fixed=value.strip())
    if not Path(value).is_absolute() and name == "HOME":  # refused: unlike XDG_*, nothing says where to look instead
        return ConfigError(f"HOME={value} is not an absolute path, so the folders kept under it would follow the "
                           "current folder", hint=_home_hint())
    path = Path(value).expanduser()
    blocker = _nearest_existing(path)
    if blocker is None or blocker.is_dir():
        return None
    link = broken_link(blocker)  # not made: mkdir follows no link
    if link is not None:
        where = "is" if blocker == path else f"is inside {blocker},"
        return ConfigError(f"{name}={value} {where} {link}",
                           hint=f"point the link at a folder that is there or remove it, point {name} at another "
                                "directory, or unset it")
    where = "is not a directory" if blocker == path else f"is inside {blocker}, which is not a directory"
    return ConfigError(f"{name}={value} {where}",
                       hint=_home_hint() if name == "HOME" else f"point {name} at a directory (it is created if "
                                                                "missing), or unset it")


def spaced_setting_error(error: type[SettingError], name: str, value: str, *, what: str, kept: str, fixed: str,
                         unset: str = "") -> SettingError:
    """The error (of class error) for a setting with spaces around its value: what the value names ("the folder"),
    kept: what the spaces would do, fixed: the value without them (empty: unset it), unset: what unsetting gives."""
    instead = f"set {name}={fixed} (without the spaces), or unset it" if fixed else "unset it"
    return error(f"{name} {value!r} has spaces around {what}, and {kept}", hint=instead + unset)


def check_environment() -> None:
    """A ConfigError for variables set to what they cannot mean, checked as a command starts; an empty folder
    variable is removed, so that it counts as unset (huggingface_hub would read HF_HOME="" as the current folder), and
    so is an XDG_CACHE_HOME that is not absolute, which the XDG spec ignores and huggingface_hub would follow."""
    from localgen.errors import ConfigError

    for name in OWN_FLAG_ENVS:
        value = os.environ.get(name, "")
        if value.strip().lower() not in TRUE_VALUES | FALSE_VALUES:
            raise ConfigError(f"{name}={value} is neither on nor off", hint=f"set {name}=1 or {name}=0")
    amx = os.environ.get(AMX_ENV, "")
    if amx.strip().lower() not in AMX_VALUES:
        raise ConfigError(f"{AMX_ENV}={amx} is none of its values: auto, 1 or 0",
                          hint=f"{AMX_ENV}=auto (or unset) uses Intel AMX where a probe finds it works with this "
                               "build, 1 without the probe (the kernels crash some builds), 0 never")
    wait = os.environ.get(ENDING_WRITE_WAIT_ENV, "")
    if _ending_write_wait(wait) is None:
        raise ConfigError(f"{ENDING_WRITE_WAIT_ENV}={wait} is no number of seconds from 0 to "
                          f"{MOST_ENDING_WRITE_WAIT_S:.0f}",
                          hint=f"set {ENDING_WRITE_WAIT_ENV}=2 (the default), for example, or unset it")
    for name in FOLDER_ENVS:
        if os.environ.get(name) == "":
            del os.environ[name]
    for name in _folder_envs_read():
        error = _folder_error(name, os.environ[name])
        if error is not None:
            raise error
    if (unknown := _unknown_home_error()) is not None:
        raise unknown
    if not Path(os.environ.get("XDG_CACHE_HOME", "/")).is_absolute():
        del os.environ["XDG_CACHE_HOME"]
    prompt_cache_bytes()  # the sizes are read late (after a load, at a run's end): a typo is heard of now
    size_limit(settings().memory_limit, MEMORY_LIMIT_ENV)
    size_limit(settings().vram_limit, VRAM_LIMIT_ENV)


def size_limit(value: str | None, name: str) -> int | None:
    """A RAM or VRAM limit in bytes as set in the variable name (None when unset), or a ConfigError: one too small to
    hold any model (8 meant as 8GiB reads as 8 bytes) is refused; LOCALGEN_VRAM_LIMIT=0 keeps models off the GPU."""
    from localgen.units import parse_size

    if not value:
        return None
    limit = parse_size(value, name=name)
    if limit < LEAST_LIMIT_BYTES and not (limit == 0 and name == VRAM_LIMIT_ENV):
        off_gpu = f", or {name}=0 to keep models off the GPU" if name == VRAM_LIMIT_ENV else ""
        raise _too_small(value, limit, name, "any model", example="8GiB", also=off_gpu,
                         zero_advice="unset it for no limit, or give a size")
    return limit


def _too_small(value: str, size: int, name: str, what: str, *, example: str, also: str = "",
               zero_advice: str = "") -> ConfigError:
    """The error for a size setting below LEAST_LIMIT_BYTES, too little to hold what, hinting at the unit a bare
    number lacks (8 meant as 8GiB reads as 8 bytes)."""
    from localgen.errors import ConfigError
    from localgen.units import binary_size, counted

    amount = counted(size, "byte") if size < 1024 else binary_size(size)
    bare = value.strip().isdigit()
    advice = (zero_advice if size == 0 else
              "a plain number counts bytes: give the unit" if bare else "give 1 MiB or more")
    return ConfigError(f"{name}={value!r} is {amount}, too little to hold {what}",
                       hint=f"{advice}, as in {name}={example}{also}")


@dataclass(frozen=True)
class Settings:
    """Where localgen keeps its files and how it was asked to behave."""

    config_dir: Path
    data_dir: Path
    cache_dir: Path
    debug: bool
    offline: bool
    offline_envs: tuple[str, ...] = ()  # the variables of OFFLINE_ENVS that turned offline mode on
    offline_flag: bool = False  # --offline turned it on for the whole command (offline_given)
    memory_limit: str | None = None  # LOCALGEN_MEMORY_LIMIT as set (size_limit reads it)
    vram_limit: str | None = None  # LOCALGEN_VRAM_LIMIT as set
    prompt_cache_size: str | None = None  # LOCALGEN_PROMPT_CACHE_BYTES as set (prompt_cache_bytes reads it)
    amx: bool | None = None  # LOCALGEN_AMX: 1 uses llama.cpp's AMX weight buffers, 0 not; auto/unset: where they work
    no_last_run: bool = False  # LOCALGEN_NO_LAST_RUN: a plain run keeps no record for run --continue
    no_color: bool = False  # NO_COLOR set and not empty (no-color.org): no dim text on a terminal
    ending_write_wait_s: float = DEFAULT_ENDING_WRITE_WAIT_S  # LOCALGEN_ENDING_WRITE_WAIT (checked as a command starts)

    @property
    def user_registry(self) -> Path:
        """The user's models.toml that extends the built-in registry."""
        return self.config_dir / USER_REGISTRY_FILE

    @property
    def verified_dir(self) -> Path:
        """Markers recording files whose sha256 was verified."""
        return self.cache_dir / "verified"


def _xdg(var: str) -> Path:
    """An XDG base directory with its usual fallback under the home directory (the spec ignores a relative one)."""
    value = Path(os.environ.get(var) or ".")  # `~/x` too is relative: shells expand only an unquoted ~
    return value if value.is_absolute() else Path.home() / XDG_FALLBACKS[var]


def load_settings() -> Settings:
    """Read the environment once into a Settings value."""
    home = os.environ.get("LOCALGEN_HOME")
    if home:
        base = Path(home).expanduser().absolute()  # a relative one means where localgen started
        config_dir, data_dir, cache_dir = base / "config", base / "data", base / "cache"
    else:
        config_dir = _xdg("XDG_CONFIG_HOME") / APP_NAME
        data_dir = _xdg("XDG_DATA_HOME") / APP_NAME
        cache_dir = _xdg("XDG_CACHE_HOME") / APP_NAME
    offline_envs = _offline_envs()
    return Settings(
        config_dir=config_dir,
        data_dir=data_dir,
        cache_dir=cache_dir,
        debug=debug_asked(),
        offline=bool(offline_envs),
        offline_envs=offline_envs,
        memory_limit=os.environ.get(MEMORY_LIMIT_ENV, "").strip() or None,
        vram_limit=os.environ.get(VRAM_LIMIT_ENV, "").strip() or None,
        prompt_cache_size=os.environ.get(PROMPT_CACHE_BYTES_ENV, "").strip() or None,
        amx=_amx_choice(),
        no_last_run=_env_flag("LOCALGEN_NO_LAST_RUN"),
        no_color=bool(os.environ.get("NO_COLOR")),
        ending_write_wait_s=_ending_write_wait_or_default(),
    )


_settings: Settings | None = None


def settings() -> Settings:
    """The process-wide settings, read from the environment on first use."""
    global _settings
    if _settings is None:
        _settings = load_settings()
    return _settings


@contextmanager
def offline_given(given: bool) -> Iterator[None]:
    """--offline, where given: offline mode while the command runs, as LOCALGEN_OFFLINE=1 turns it on, its hints saying
    to drop the flag; the settings as they were afterwards."""
    global _settings
    if not given:
        yield
        return
    before = settings()
    _settings = replace(before, offline=True, offline_flag=True)
    try:
        yield
    finally:
        _settings = before


def prompt_cache_bytes() -> int:
    """The prompt cache's size bound: LOCALGEN_PROMPT_CACHE_BYTES (e.g. 500M, 4G; 0 disables it) or the default; a
    ConfigError for a bound under 1 MiB but 0, or over MOST_PROMPT_CACHE_BYTES."""
    from localgen.errors import ConfigError
    from localgen.units import binary_size, parse_size

    raw, name = settings().prompt_cache_size, PROMPT_CACHE_BYTES_ENV
    if raw is None:
        return DEFAULT_PROMPT_CACHE_BYTES
    off = "; 0 turns the prompt cache off"
    bound = parse_size(raw, name=name, hint=f"use bytes or a size such as 512MiB or 4GiB{off}")
    if 0 < bound < LEAST_LIMIT_BYTES:
        raise _too_small(raw, bound, name, "a prompt's state", example="4GiB", also=off)
    if bound > MOST_PROMPT_CACHE_BYTES:
        raise ConfigError(f"{name}={raw!r} is over {binary_size(MOST_PROMPT_CACHE_BYTES)}, more than a disk holds",
                          hint=f"give a size such as {name}=64GiB{off}")
    return bound

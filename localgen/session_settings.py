"""A chat's sampling settings and stop strings: the values in use, which the user chose, and the defaults models.toml
gives."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace

from localgen.chat_settings import parse_setting, setting_key, setting_text
from localgen.errors import UsageError
from localgen.params import CHAT_SETTINGS, STOP_SETTING, GenerationLimits, SamplingParams, with_settings


@dataclass(frozen=True)
class SettingsState:
    """A chat's settings at one moment, with what chose them: restored where a conversation's load fails."""

    sampling: SamplingParams
    limits: GenerationLimits
    own_settings: frozenset[str]
    own_stop: bool
    limit_set: bool


class SessionSettings:
    """The sampling settings and stop strings of a chat session (ChatSession builds on it): what /set, /show and a
    save use (stop strings the user chose are saved too, models.toml's not)."""

    def __init__(self, sampling: SamplingParams, limits: GenerationLimits,
                 model_settings: Mapping[str, int | float | None] | None, own_settings: Iterable[str], *,
                 model_stop: tuple[str, ...] = (), own_stop: bool = False) -> None:
        self.sampling = sampling
        self.limits = limits
        self.model_settings = dict(model_settings or {})  # what models.toml gives the loaded model
        self.own_settings = set(own_settings)  # chosen by flags, /set or a resumed chat: /model keeps them
        self.model_stop = model_stop  # the stop strings models.toml gives the loaded model
        self.own_stop = own_stop  # chosen (--stop, /set stop, a resumed chat's): /model keeps them
        self._stop_flag = own_stop  # --stop was given: it wins over a conversation's saved ones on --resume, not /load
        self._start_stop = limits.stop  # before any conversation's: --stop's, else models.toml's
        self._flags = set(own_settings)  # the settings the command line chose
        self._start_settings = self.settings()  # before any conversation's: what /load starts from
        self._limit_set = False  # /set max_tokens chose the token limit of this conversation

    def value_of(self, name: str) -> tuple[str, str]:
        """A setting's canonical name and its value as text (none when unset)."""
        key = setting_key(name)
        return key, setting_text(self.settings()[key])

    def _apply_setting(self, name: str, raw: str) -> str:
        """Change one sampling setting from text, without saving; return its canonical name."""
        key = setting_key(name)
        value = parse_setting(key, raw)
        try:
            if key == "max_tokens":
                self.limits = replace(self.limits, max_tokens=value)  # type: ignore[arg-type]
            else:
                self.sampling = self.sampling.with_value(key, value)
        except UsageError as exc:
            message = exc.message
            if isinstance(value, float) and math.isinf(value):  # 1e400 is read as inf: said as typed
                message = message.replace(f" {value} ", f" {raw.strip()} ", 1)
            raise UsageError(message, hint=f"{exc.hint or 'see /show'}: /set {key} VALUE") from None
        return key

    def chose_in_chat(self, key: str) -> None:
        """Keep a setting /set chose (when /model switches; the token limit's note names /set)."""
        self.own_settings.add(key)
        self._limit_set = self._limit_set or key == "max_tokens"

    def chose_on_resume(self, overrides: Mapping[str, str]) -> None:
        """Keep the settings given on the command line over a conversation just resumed (its own and /set's gone)."""
        self.own_settings |= set(overrides)
        self._limit_set = False

    def chosen_settings(self) -> SettingsState:
        """The settings in use and what chose them, as a conversation's load changes them (see restore_settings)."""
        return SettingsState(self.sampling, self.limits, frozenset(self.own_settings), self.own_stop, self._limit_set)

    def restore_settings(self, state: SettingsState) -> None:
        """Go back to the settings of chosen_settings, after a conversation's load that failed part way."""
        self.sampling, self.limits, self.own_stop = state.sampling, state.limits, state.own_stop
        self.own_settings, self._limit_set = set(state.own_settings), state.limit_set

    def limit_source(self) -> str:
        """Where the token limit came from, as the note on an answer it stopped names it: /set, -n, models.toml or
        the conversation's saved settings."""
        limit = self.limits.max_tokens
        if self._limit_set:
            return "/set max_tokens"
        if "max_tokens" in self._flags and limit == self._start_settings.get("max_tokens"):
            given = "-n/--max-tokens"
        elif limit == self.model_settings.get("max_tokens"):
            given = "max_tokens in models.toml"
        else:
            given = "max_tokens saved with the conversation"
        return f"{given}; /set max_tokens changes it"

    def settings(self) -> dict[str, object]:
        """The current sampling settings as plain data (what /show prints and a save keeps)."""
        sampling = {key: value for key, value in asdict(self.sampling).items() if key in CHAT_SETTINGS}
        return {**sampling, "max_tokens": self.limits.max_tokens}

    def default_settings(self) -> dict[str, object]:
        """The settings a chat with this model has when the user chooses none: models.toml's over the built-in."""
        built_in = {key: value for key, value in asdict(SamplingParams()).items() if key in CHAT_SETTINGS}
        return {**built_in, "max_tokens": None, **self.model_settings}

    def _take_model_settings(self, chosen: Mapping[str, int | float | None]) -> None:
        """Take a new model's models.toml settings where the user chose none (one only the previous model's entry
        gave goes back to its built-in value)."""
        given_by_a_model = set(self.model_settings) | set(chosen)
        keys = given_by_a_model - self.own_settings
        self.model_settings = dict(chosen)
        defaults = self.default_settings()
        self.sampling, self.limits = with_settings(self.sampling, self.limits, {key: defaults[key] for key in keys})
        self._start_settings |= {key: defaults[key] for key in given_by_a_model - self._flags}

    def set_stop(self, stops: tuple[str, ...]) -> None:
        """Use these stop strings (/set stop; () clears them), kept when /model switches."""
        self.limits = replace(self.limits, stop=stops)
        self.own_stop = True

    def _take_model_stop(self, stop: tuple[str, ...]) -> None:
        """Take a new model's models.toml stop strings unless the user chose some (or none)."""
        self.model_stop = stop
        if not self._stop_flag:
            self._start_stop = stop
        if not self.own_stop:
            self.limits = replace(self.limits, stop=stop)

    def _take_saved_stop(self, saved: object, *, flag_wins: bool) -> None:
        """A resumed or loaded conversation's stop strings: --stop's where it wins over saved settings (flag_wins:
        --resume, run --conversation; not /load), else those it saved (a list), else --stop's or models.toml's (not
        the previous conversation's /set stop)."""
        if (self._stop_flag and flag_wins) or not isinstance(saved, list):
            self.limits, self.own_stop = replace(self.limits, stop=self._start_stop), self._stop_flag
        else:
            self.limits, self.own_stop = replace(self.limits, stop=tuple(saved)), True

    def saved_stop(self) -> dict[str, list[str]]:
        """What a save keeps of the stop strings: those the user chose (none too), not models.toml's."""
        return {STOP_SETTING: list(self.limits.stop)} if self.own_stop else {}

"""The model registry: models.toml's entries by name (the built-in file's, then the user's), how references name
them, and the defaults they give. Reading and checking an entry is registry_entries.py's."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

from localgen.errors import ConfigError, LocalgenError, ModelNotFoundError, UsageError, os_reason
from localgen.links import broken_link
from localgen.own_files import own_file_problem
from localgen.params import CHAT_SETTINGS, stored_setting
from localgen.references import (
    OLLAMA_HUB_HINT,
    ModelRef,
    OllamaAddressError,
    hub_prefixes,
    ollama_model,
    parse_reference,
    quant_of_filename,
)
from localgen.registry_entries import BUILTIN_SOURCE, STOP_KEY, ModelSpec, in_real_folder, parse_registry
from localgen.registry_toml import read_toml
from localgen.shorten import shown_name
from localgen.slips import close_names
from localgen.typed_paths import is_existing_file, is_existing_folder, short_path
from localgen.units import alternatives

_CHAT_TAG_WORDS = {"instruct", "chat", "it"}  # the words of an Ollama tag for a chat model: qwen2.5:7b-instruct
_BASE_TAG_WORDS = {"text", "base"}  # those of a tag for the base (pre-trained) model: llama3.2:1b-text
_SIZE_TAG = re.compile(r"e?(?:(\d+)x)?(\d+(?:\.\d+)?)([bm])")  # Ollama's size tags: 0.5b, 14b, 360m, 8x7b, e2b
_OLLAMA_QUANTS = {"FP16": "F16", "FP32": "F32"}  # its tags' names for the quants GGUF files are named by


@dataclass(frozen=True)
class Registry:
    """All known model specs, by name, and the default model's name."""

    models: dict[str, ModelSpec]
    default_model: str  # as the file gives it: a name, a Hub reference or a file's path, as -m takes them
    default_source: Path | None = None  # the user file that named default_model, when one did
    default_system: str | None = None  # [defaults] system: for any model whose entry gives none
    default_settings: tuple[tuple[str, int | float], ...] = ()  # [defaults] temperature = 0.3, ...
    default_stop: tuple[str, ...] = ()  # [defaults] stop = ["###"]: for any model whose entry gives none

    def default_reference(self) -> str:
        """The default model as -m takes it: an entry's name (NAME:QUANT for a quant of it), a Hub model as every
        command names it however it was written (hub_names.kept_hub_reference: acme/Tiny-GGUF:Q8_0), or a file's
        path (a relative one taken from the folder of the models.toml that gives it); a user default that names no
        model is an error naming its file."""
        source, text = self.default_source, self.default_model
        if source is None:
            return text
        fix = "(`localgen models default REF` sets it), or remove the line"
        try:
            ref = self.reference(text, base=source.parent)
        except UsageError as exc:
            raise ConfigError(f"{source}: [defaults] model: {exc.message}",
                              hint=f"{exc.hint} {fix}" if exc.hint else f"fix it {fix}") from None
        if ref.name is not None:
            if ref.name not in self.models:
                raise self._no_entry_refusal(f"{source}: [defaults] model '{shown_name(text)}'", ref.name, fix)
            return f"{ref.name}:{ref.quant}" if ref.quant else ref.name
        if ref.path is None:  # a Hub reference, as every command names it (hf.co/... where -m would read a file here)
            from localgen.hub_names import kept_hub_reference

            return kept_hub_reference(ref)
        return str(in_real_folder(source.parent / ref.path))  # as an entry's path =

    def get(self, name: str, *, typed: str | None = None) -> ModelSpec:
        """The spec named name (typed: as typed, where the reference held more), or an error suggesting close names."""
        spec = self.models.get(self._entry_name(name.lower(), typed or name))
        if spec is not None:
            return spec
        shown = shown_name(_name_as_typed(name, typed))
        sizes = self._sizes_of(name.lower())  # qwen2.5: every size, where close names might leave one out
        if len(sizes) == 1:  # a file or folder of the family's name here: spec_for names both
            raise ModelNotFoundError(f"unknown model '{shown}'", hint=f"for the registry's model, use {sizes[0]}")
        meant = self._names_meant(name)
        if meant.sizes:
            raise ModelNotFoundError(f"'{shown}' {meant.said}", hint=meant.hint)
        raise ModelNotFoundError(f"unknown model '{shown}'",
                                 hint=meant.hint or "see `localgen models list --all` for the names")

    def _entry_name(self, name: str, typed: str, folder: Path | None = None) -> str:
        """The entry a name means: its own, else the one size of a family the registry has in one size alone (smollm2:
        smollm2-135m, as Ollama's NAME means its default size) where no file or folder here (in folder, else the
        current one) has the name as typed; a family of several sizes, or of a file's name, is left as it is."""
        if name in self.models:
            return name
        sizes = self._sizes_of(name)
        return sizes[0] if len(sizes) == 1 and not _named_here(typed, folder) else name

    def reference(self, text: str, base: Path | None = None) -> ModelRef:
        """parse_reference (base: the folder a relative path's file is looked for in), reading Ollama's NAME:SIZE
        (qwen2.5:0.5b, llama3.2:1b) as the entry NAME-SIZE where the registry has that entry and no NAME."""
        ref = self._parse(text, base)
        spec = self.models.get(ref.name) if ref.name is not None else None
        return ref if spec is None or spec.path is None else _own_file(ref, spec)

    def _parse(self, text: str, base: Path | None = None) -> ModelRef:
        """parse_reference with Ollama's NAME:SIZE read as the entry NAME-SIZE, a family's name as its one size's entry
        (_entry_name), and Ollama's address of a model refused with this registry's name for it."""
        try:
            ref = self._with_size_tag(parse_reference(text, base))
        except OllamaAddressError as exc:
            raise UsageError(exc.message, hint=self._ollama_hint(exc.model)) from None
        return ref if ref.name is None else replace(ref, name=self._entry_name(ref.name, ref.text, base))

    def _ollama_hint(self, model: str) -> str:
        """For Ollama's NAME[:TAG]: the entries of the registry that are that model (NAME-SIZE for NAME alone), else
        where to find its GGUF files."""
        try:
            ref = self._with_size_tag(parse_reference(model)) if "/" not in model else None
        except (UsageError, ModelNotFoundError):  # not a name, or a base model's tag
            ref = None
        if ref is None or ref.name is None:
            return OLLAMA_HUB_HINT
        if ref.name in self.models:
            names = [f"{ref.name}:{ref.quant}" if ref.quant else ref.name]
        else:  # NAME alone, as Ollama's default size: each size of it
            names = [] if ref.quant else self._sizes_of(ref.name)
        if not names:
            return OLLAMA_HUB_HINT
        return f"localgen's name for it is {alternatives(names)} (`localgen models list --all`)"

    def own_file_entry(self, text: str) -> ModelSpec | None:
        """The entry naming a file of the user's own (path =) that a reference means, with a quant or without one
        (`mine`, `mine:Q4`): what pull and models rm refuse whole, whatever quant is asked for."""
        ref = self._parse(text)
        spec = self.models.get(ref.name) if ref.name is not None else None
        return spec if spec is not None and spec.path is not None else None

    def _with_size_tag(self, ref: ModelRef) -> ModelRef:
        """Ollama's NAME:SIZE as the entry NAME-SIZE, where the registry has that entry and no NAME; its longer tags
        of the chat model too (NAME:SIZE-instruct-q4_K_M: that entry at the quant the tag ends with, else its default);
        a base model's tag (-base, -text) is refused as no entry's."""
        if ref.name is None or ref.quant is None or ref.name in self.models:
            return ref
        size, _, rest = ref.quant.lower().partition("-")
        tagged = f"{ref.name}-{size}"
        quant = quant_of_filename(rest) if rest else None
        words = set((rest.removesuffix(quant.lower()) if quant else rest).split("-")) - {""}
        if tagged in self.models and words & _BASE_TAG_WORDS:
            raise ModelNotFoundError(f"'{shown_name(ref.text)}' is Ollama's tag of the base model of {tagged}, and the "
                                     "registry has entries for chat models only",
                                     hint=f"for the chat model, use {tagged}; for the base model, give its GGUF repo "
                                          "on Hugging Face as ORG/REPO[:QUANT]")
        if tagged not in self.models and _SIZE_TAG.fullmatch(size) and (sizes := self._sizes_of(ref.name)):
            raise ModelNotFoundError(f"the registry has no {_size_as_typed(size, ref.text)} size of "
                                     f"{_name_as_typed(ref.name, ref.text)}",
                                     hint=f"it has {', '.join(sizes)}; for another size, {OLLAMA_HUB_HINT}")
        if tagged not in self.models or not words <= _CHAT_TAG_WORDS:
            return ref
        return replace(ref, name=tagged, quant=_OLLAMA_QUANTS.get(quant or "", quant))

    def _no_entry_refusal(self, setting: str, name: str, fix: str) -> ConfigError:
        """The error of a setting naming no entry: the sizes of a family of that name, or the names close to it."""
        meant = self._names_meant(name)
        if meant.sizes:
            return ConfigError(f"{setting} {meant.said}", hint=f"{meant.hint}: `localgen models default "
                                                                f"{meant.sizes[0]}` sets it, or remove the line")
        return ConfigError(f"{setting} is not in the registry",
                           hint=f"{f'{meant.hint} ' if meant.hint else ''}name a model from `localgen models list "
                                f"--all` {fix}")

    def _names_meant(self, name: str) -> NamesMeant:
        """What a name no entry has may mean: the sizes (smallest first) of the family of that name where it comes in
        several, else the entries named close to it."""
        sizes = self._sizes_of(name.lower())
        return NamesMeant(sizes, []) if len(sizes) > 1 else NamesMeant([], close_names(name.lower(), list(self.models)))

    def _sizes_of(self, name: str) -> list[str]:
        """The entries NAME-SIZE of a model NAME (qwen2.5-0.5b, not qwen2.5-coder-1.5b), smallest first."""
        sizes = [entry for entry in self.models if _SIZE_TAG.fullmatch(entry.removeprefix(f"{name}-"))
                 and entry.startswith(f"{name}-")]
        return sorted(sizes, key=lambda entry: _size_value(entry.removeprefix(f"{name}-")))

    def spec_for(self, ref: ModelRef) -> ModelSpec | None:
        """The entry a reference names (None for a Hub repo or a path); an unknown name that a file here has is
        told how to mean the file."""
        if ref.name is None:
            return None
        try:
            return self.get(ref.name, typed=ref.text)
        except ModelNotFoundError as exc:
            from localgen.model_file_errors import family_here_error, model_file_here, named_here_hint

            family = self._sizes_of(ref.name.lower())
            if len(family) == 1:  # its one size is what the name means, but for a file or folder here of that name
                raise family_here_error(ref.text, family[0]) from None
            here = model_file_here(ref.text)
            if here is not None and here != ref.text:
                raise ModelNotFoundError(exc.message, hint=f"for the file {here} here, use ./{here}; or "
                                                           f"{exc.hint}") from None
            named = named_here_hint(ref.text, Path(ref.text))
            if named is not None:
                raise ModelNotFoundError(exc.message, hint=f"{named}; or {exc.hint}") from None
            if ref.name.endswith("gguf"):  # a Hub repo named without its owner
                typed = ref.text.strip()  # its quant kept: ORG/NAME-GGUF:Q4_K_M
                owner = f"a Hugging Face repo is named with its owner: ORG/{typed}"
                hint = (f"{exc.hint} for a Hugging Face repo, add its owner: ORG/{typed}"
                        if exc.hint.endswith("?") else f"{owner}; or {exc.hint}")
                raise ModelNotFoundError(f"unknown model '{typed.partition(':')[0]}'", hint=hint) from None
            raise


class NamesMeant(NamedTuple):
    """What a name no entry has may mean, as an error offers it: a family's sizes, or names close to it."""

    sizes: list[str]  # the family's, smallest first, where the name is a family of several sizes
    close: list[str]  # else the entries named close to it

    @property
    def said(self) -> str:
        """The sizes the family comes in, as the error says them."""
        return f"comes in {len(self.sizes)} sizes: {', '.join(self.sizes)}"

    @property
    def hint(self) -> str | None:
        """The smallest size to name, or the close names to choose from (None: nothing close)."""
        if self.sizes:
            return f"name one of them (the smallest: {self.sizes[0]})"
        return f"did you mean {alternatives(self.close)}?" if self.close else None


def _name_as_typed(name: str, typed: str | None) -> str:
    """A model's name as the user typed it (Nope, not nope), where the reference typed is that name and a quant."""
    spelled = (typed or "").strip().partition(":")[0]
    return spelled if spelled.lower() == name.lower() else name


def _size_as_typed(size: str, typed: str) -> str:
    """A size tag as the user typed it (70B, not 70b), where the reference typed is NAME:SIZE[-TAG]."""
    spelled = typed.strip().partition(":")[2][:len(size)]
    return spelled if spelled.lower() == size else size


def _named_here(typed: str, folder: Path | None) -> bool:
    """Whether a file or folder in folder (None: the current one) has the name typed."""
    path = str(Path(folder or ".") / typed.strip())
    return is_existing_file(path) or is_existing_folder(path)


def _size_value(size: str) -> float:
    """A model size tag's parameter count (0.5b, 360m, 8x7b) in billions, for ordering sizes."""
    found = _SIZE_TAG.fullmatch(size)
    return float(found[2]) * int(found[1] or 1) * (1e-3 if found[3] == "m" else 1) if found else 0.0


def _own_file(ref: ModelRef, spec: ModelSpec) -> ModelRef:
    """A reference to an entry that names a file of the user's own (path =): the file, as `-m PATH` means it, still
    known by the entry's name; a quant of it is refused (the file is the one quant there is)."""
    assert spec.path is not None
    if ref.quant is not None:
        raise UsageError(f"'{ref.text}': {spec.name} is the file {short_path(spec.path)} ({spec.origin}), which has "
                         "no quants to choose from", hint=f"name it without a quant, {spec.name}; for another quant's "
                                                          "file, add an entry with its path")
    return replace(ref, path=spec.path)


def own_file_entry_for(text: str | None) -> ModelSpec | None:
    """The user's models.toml entry naming a file of one's own (path =) that a reference means (None: the default
    model), or None (for a reference that is no such entry's, or cannot be read)."""
    from localgen.config import settings

    try:
        registry = load_registry(settings().user_registry)
        return registry.own_file_entry(registry.default_reference() if text is None else text)
    except LocalgenError:
        return None


def own_file_refusal(spec: ModelSpec, doing: str) -> UsageError:
    """The refusal to download or delete (doing) the file an entry names with path: it is the user's own."""
    assert spec.path is not None
    problem = own_file_problem(spec.path)
    if problem is not None and doing == "delete":  # no file to delete: the entry is what is left of it
        there = "nothing is there to delete" if problem == "missing" else f"{short_path(spec.path)} is {problem}"
        hint = f"{there}; take the entry out of that models.toml if you no longer need it"
    elif problem == "missing":
        hint = "put the file there, or fix that entry's path"
    elif problem is not None:
        hint = f"fix that entry's path: {short_path(spec.path)} is {problem}"
    elif doing == "download":
        hint = f"it is already here: `localgen run -m {spec.name}` uses it as it is"
    else:
        hint = "delete the file yourself if you no longer need it, and the entry with it"
    return UsageError(f"{spec.name} is your own file {short_path(spec.path)} ({spec.origin}); localgen does not "
                      f"{doing} it", hint=hint)


class ModelDefaults(NamedTuple):
    """What models.toml gives a model for a run or chat where the command line gives nothing."""

    settings: dict[str, int | float | None]  # sampling settings and max_tokens (-1 read as none)
    system: str | None  # the system prompt
    stop: tuple[str, ...]  # stop strings


def model_defaults(spec: ModelSpec | None) -> ModelDefaults:
    """The sampling settings, system prompt and stop strings models.toml gives a model (its entry's over
    [defaults]'), read now; spec is None for a model given by path or repo."""
    from localgen.config import settings

    registry = load_registry(settings().user_registry)
    system = spec.system if spec is not None and spec.system is not None else registry.default_system
    stop = spec.stop if spec is not None and spec.stop is not None else registry.default_stop
    chosen = dict(registry.default_settings) | dict(spec.settings if spec is not None else ())
    return ModelDefaults({key: stored_setting(key, value) for key, value in chosen.items()}, system, stop)


def builtin_registry_text() -> str:
    """The text of the models.toml shipped with localgen."""
    return resources.files("localgen").joinpath("models.toml").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _builtin_entries(text: str) -> tuple[dict[str, Any], dict[str, ModelSpec], dict[str, Any]]:
    """The built-in models.toml's text as data, as specs and its [defaults], parsed once a process (a run reads the
    registry four times)."""
    builtin = read_toml(text, BUILTIN_SOURCE)
    models, defaults = parse_registry(builtin, BUILTIN_SOURCE)
    return builtin, models, defaults


def load_registry(user_file: Path | None = None) -> Registry:
    """The built-in registry extended (and overridden by name) by the user's file."""
    builtin, builtin_models, defaults = _builtin_entries(builtin_registry_text())
    models = dict(builtin_models)
    default = defaults.get("model")
    text = user_file_text(user_file) if user_file is not None else None
    if user_file is not None and text is not None:
        tables = {name.lower(): table for name, table in builtin.get("models", {}).items()}
        user_models, user_defaults = parse_registry(read_toml(text, user_file), user_file, inherit=tables)
        models = {**models, **user_models}
        settings = tuple((key, value) for key, value in user_defaults.items() if key in CHAT_SETTINGS)
        shared = {"default_system": user_defaults.get("system"), "default_settings": settings,
                  "default_stop": user_defaults.get(STOP_KEY, ())}
        if "model" in user_defaults:  # checked when the default is used, so other commands keep working
            return Registry(models=models, default_model=str(user_defaults["model"]).strip(),
                            default_source=user_file, **shared)
        return Registry(models=models, default_model=(default or "").lower(), **shared)
    return Registry(models=models, default_model=(default or "").lower())


def user_file_text(user_file: Path) -> str | None:
    """The text of the user's models.toml; None when there is none (a link to nothing, or no file, is an error)."""
    try:
        broken = broken_link(user_file)  # its target not there, or a loop of links
        if broken is not None:
            raise ConfigError(f"{user_file}: {broken}", hint="point the link at your models.toml, or remove it")
        if user_file.exists() and not user_file.is_file():
            raise ConfigError(f"{user_file}: not a file", hint="models.toml must be a TOML file; remove or rename this")
        if not user_file.is_file():
            return None
    except OSError as exc:  # a folder above it that may not be entered: whether it is there cannot be told
        raise ConfigError(f"{user_file}: cannot be read ({os_reason(exc)})",
                          hint="check the permissions of its folder and those above it") from exc
    try:
        return user_file.read_text(encoding="utf-8-sig")  # a byte order mark, as Windows editors write it
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{user_file}: not UTF-8 text (byte {exc.start})",
                          hint="save it as UTF-8 in your editor, or remove it") from None
    except OSError as exc:
        raise ConfigError(f"{user_file}: cannot be read ({os_reason(exc)})",
                          hint="check the file's permissions") from exc


def names_a_model(word: str, user_file: Path | None) -> bool:
    """Whether a word is a registry name (NAME or NAME:QUANT): a habit from `ollama run NAME`, not a prompt."""
    if not word or any(c.isspace() for c in word):
        return False
    try:
        registry = load_registry(user_file)
        return registry.reference(word).name in registry.models
    except (ConfigError, UsageError):
        return False


def reads_as_a_model(word: str, user_file: Path | None) -> bool:
    """Whether a prompt of one word is rather a model (`run MODEL` alone): a registry name, a .gguf file, or a Hub
    repo of GGUF files (hf.co/ORG/REPO, or ORG/REPO with GGUF in its name; "TCP/IP" stays a prompt). A Hub address
    that is no model's (a dataset's) raises parse_reference's UsageError: it is no prompt either."""
    if not word or any(c.isspace() for c in word):
        return False
    lower = word.lower()
    if ollama_model(word) is not None:  # Ollama's address of a model: refused as such
        load_registry(user_file).reference(word)
    if lower.startswith(hub_prefixes()):
        parse_reference(word)
        return True
    hub_repo = lower.count("/") == 1 and "gguf" in lower and not lower.startswith(("/", "."))
    return lower.endswith(".gguf") or hub_repo or names_a_model(word, user_file)


def hub_target(ref: ModelRef, spec: ModelSpec | None) -> tuple[str, str | None, str | None]:
    """The repo, quant and file name a registry entry or Hub reference points at."""
    repo = spec.repo if spec is not None else ref.repo
    if repo is None:
        raise ModelNotFoundError(f"'{ref.text}' does not name a Hub model")
    quant = ref.quant or (spec.quant if spec is not None else None)
    filename = ref.filename or (spec.file if spec is not None and ref.quant is None else None)
    return repo, quant, filename

"""The model registry (models.toml): its entries, their checks, and the defaults they give."""

from __future__ import annotations

import difflib
import os
import re
import stat
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from localgen.errors import ConfigError, ModelNotFoundError, UsageError
from localgen.inputs import expand_user_path, is_existing_file, short_path
from localgen.params import CHAT_SETTINGS, check_context_bounds, check_setting, stored_setting
from localgen.references import (
    NAME_PATTERN,
    ModelRef,
    check_safe_filename,
    hub_prefixes,
    is_repo_id,
    parse_reference,
    quant_of_filename,
)

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

_PACKAGE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # a top-level module: finding it imports nothing
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_CHAT_TAG_WORDS = {"instruct", "chat", "it"}  # the words of an Ollama tag for a chat model: qwen2.5:7b-instruct
_OLLAMA_QUANTS = {"FP16": "F16", "FP32": "F32"}  # its tags' names for the quants GGUF files are named by
BUILTIN_SOURCE = "built-in models.toml"  # the source of the entries shipped with localgen


@dataclass(frozen=True)
class ModelSpec:
    """One registry entry: where a model's GGUF lives and how to run it."""

    name: str
    repo: str = ""  # the Hugging Face repo ('' for an entry that names a file of the user's own: path)
    quant: str = ""  # the default quant of repo
    file: str | None = None
    context: int | None = None
    template: str | None = None
    license: str | None = None
    description: str = ""
    sha256: str | None = None
    size: int | None = None
    package: str | None = None
    package_file: str | None = None
    system: str | None = None  # the system prompt when -s is not given
    settings: tuple[tuple[str, int | float], ...] = ()  # sampling settings when not given (temperature = 0.3)
    path: Path | None = None  # a local GGUF (its first shard) instead of a repo: absolute, ~ expanded
    source: str = field(default="", compare=False)  # the models.toml that defined the entry, for messages
    given: frozenset[str] = field(default=frozenset(), compare=False)  # the keys source gives (not the built-in's)

    @property
    def origin(self) -> str:
        """Where the entry is defined, for messages: [models.NAME] in FILE."""
        return f"[models.{self.name}] in {self.source or 'models.toml'}"

    def user_gives(self, key: str) -> bool:
        """Whether a user's models.toml gives the entry's key (repo, quant...): the user can fix it there."""
        return bool(self.source) and self.source != BUILTIN_SOURCE and key in self.given

    @property
    def distribution(self) -> str:
        """The pip name of the package the bundled file comes with ('' when none)."""
        return (self.package or "").replace("_", "-")


@dataclass(frozen=True)
class Registry:
    """All known model specs, by name, and the default model's name."""

    models: dict[str, ModelSpec]
    default_model: str
    default_source: Path | None = None  # the user file that named default_model, when one did
    default_system: str | None = None  # [defaults] system: for any model whose entry gives none
    default_settings: tuple[tuple[str, int | float], ...] = ()  # [defaults] temperature = 0.3, ...

    def default_reference(self) -> str:
        """The default model's name; a user default that names no model is an error naming its file."""
        if self.default_source is not None and self.default_model not in self.models:
            raise ConfigError(f"{self.default_source}: [defaults] model '{self.default_model}' is not in the "
                              "registry", hint="name a model from `localgen models list --all`, or remove the line")
        return self.default_model

    def get(self, name: str) -> ModelSpec:
        """The spec named name, or an error suggesting close names."""
        spec = self.models.get(name.lower())
        if spec is not None:
            return spec
        close = difflib.get_close_matches(name.lower(), list(self.models), n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else "see `localgen models list --all` for the names"
        raise ModelNotFoundError(f"unknown model '{name}'", hint=hint)

    def reference(self, text: str) -> ModelRef:
        """parse_reference, reading Ollama's NAME:SIZE (qwen2.5:0.5b, llama3.2:1b) as the entry NAME-SIZE where
        the registry has that entry and no NAME."""
        ref = self._with_size_tag(parse_reference(text))
        spec = self.models.get(ref.name) if ref.name is not None else None
        return ref if spec is None or spec.path is None else _own_file(ref, spec)

    def own_file_entry(self, text: str) -> ModelSpec | None:
        """The entry naming a file of the user's own (path =) that a reference means, with a quant or without one
        (`mine`, `mine:Q4`): what pull and models rm refuse whole, whatever quant is asked for."""
        ref = self._with_size_tag(parse_reference(text))
        spec = self.models.get(ref.name) if ref.name is not None else None
        return spec if spec is not None and spec.path is not None else None

    def _with_size_tag(self, ref: ModelRef) -> ModelRef:
        """Ollama's NAME:SIZE as the entry NAME-SIZE, where the registry has that entry and no NAME; its longer tags
        of the chat model too (NAME:SIZE-instruct-q4_K_M: that entry at the quant the tag ends with, else its default;
        a base model's tag, -base or -text, is no entry's)."""
        if ref.name is None or ref.quant is None or ref.name in self.models:
            return ref
        size, _, rest = ref.quant.lower().partition("-")
        tagged = f"{ref.name}-{size}"
        quant = quant_of_filename(rest) if rest else None
        words = set((rest.removesuffix(quant.lower()) if quant else rest).split("-")) - {""}
        if tagged not in self.models or not words <= _CHAT_TAG_WORDS:
            return ref
        return replace(ref, name=tagged, quant=_OLLAMA_QUANTS.get(quant or "", quant))

    def spec_for(self, ref: ModelRef) -> ModelSpec | None:
        """The entry a reference names (None for a Hub repo or a path); an unknown name that a file here has is
        told how to mean the file."""
        if ref.name is None:
            return None
        try:
            return self.get(ref.name)
        except ModelNotFoundError as exc:
            if is_existing_file(ref.text):
                raise ModelNotFoundError(exc.message, hint=f"for the file of that name here, use ./{ref.text}; or "
                                                           f"{exc.hint}") from None
            raise


def _own_file(ref: ModelRef, spec: ModelSpec) -> ModelRef:
    """A reference to an entry that names a file of the user's own (path =): the file, as `-m PATH` means it, still
    known by the entry's name; a quant of it is refused (the file is the one quant there is)."""
    assert spec.path is not None
    if ref.quant is not None:
        raise UsageError(f"'{ref.text}': {spec.name} is the file {short_path(spec.path)} ({spec.origin}), which has "
                         "no quants to choose from", hint=f"name it without a quant, {spec.name}; for another quant's "
                                                          "file, add an entry with its path")
    return replace(ref, path=spec.path)


def own_file_problem(path: Path) -> str | None:
    """Why an entry's own file cannot be used, in a word or two ('missing', 'not a file', 'unreadable'), or None when
    it is a file: what `models list` shows, as `run` would refuse it."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "missing"
    except (OSError, ValueError):  # a loop of links, a folder that cannot be searched, a name too long
        return "unreadable"
    return None if stat.S_ISREG(mode) else "not a file"


def own_file_refusal(spec: ModelSpec, doing: str) -> UsageError:
    """The refusal to download or delete (doing) the file an entry names with path: it is the user's own."""
    assert spec.path is not None
    problem = own_file_problem(spec.path)
    if problem == "missing":
        hint = "put the file there, or fix that entry's path"
    elif problem is not None:
        hint = f"fix that entry's path: {short_path(spec.path)} is {problem}"
    elif doing == "download":
        hint = f"it is already here: `localgen run -m {spec.name}` uses it as it is"
    else:
        hint = "delete the file yourself if you no longer need it, and the entry with it"
    return UsageError(f"{spec.name} is your own file {short_path(spec.path)} ({spec.origin}); localgen does not "
                      f"{doing} it", hint=hint)


_FIELDS = {
    "repo": str, "path": str, "quant": str, "file": str, "context": int, "template": str, "license": str,
    "description": str, "sha256": str, "size": int, "package": str, "package_file": str, "system": str,
}
_HUB_KEYS = ("quant", "file", "package", "package_file")  # about a repo's files: not for path (sha256, size pin either)


def _spec_from_table(name: str, table: object, source: Path | str, given: frozenset[str] | None = None) -> ModelSpec:
    """Build a ModelSpec from one [models.NAME] table, checking field names and types (given: the keys the file
    itself gives, when the table has a built-in entry's under them; else all)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [models.{name}] must be a table", hint=f'write [models.{name}] and its keys')
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(f"{source}: [models.{name!r}]: model names use letters, digits, '.', '_' and '-'",
                          hint="rename the entry")
    if name.lower().endswith(".gguf"):
        raise ConfigError(f"{source}: [models.\"{name}\"]: a name ending in .gguf would be read as a file path",
                          hint=f"rename the entry, e.g. [models.\"{name[:-5]}\"]")
    settings = {key: value for key, value in table.items() if key in CHAT_SETTINGS}
    for key, value in table.items():
        expected = _FIELDS.get(key)
        if key in settings:
            continue
        if expected is None:
            hint = (f'quote names that contain dots: [models."{_dotted_name(name, key, value)}"]'
                    if isinstance(value, dict)
                    else f"known keys: {', '.join(_FIELDS)}, and the settings {', '.join(CHAT_SETTINGS)}")
            raise ConfigError(f"{source}: [models.{name}] has unknown key '{key}'", hint=hint)
        if not isinstance(value, expected) or isinstance(value, bool):
            example = '"text"' if expected is str else "4096"
            raise ConfigError(f"{source}: [models.{name}].{key} must be {_TYPE_WORDS[expected]}",
                              hint=f"write {key} = {example}")
    where = f"{source}: [models.{name}]"
    if "path" in table:
        _check_path_entry(where, table)
    elif "repo" not in table:
        raise ConfigError(f"{where} needs 'repo' (a model on the Hugging Face Hub) or 'path' (a file of your own)",
                          hint='add repo = "ORG/NAME-GGUF" and quant = "Q4_K_M", or path = "/path/to/model.gguf"')
    else:
        _check_repo_entry(where, table)
    _check_settings(where, settings)
    values = {key: value for key, value in table.items() if key not in settings}
    if "sha256" in values:
        values["sha256"] = str(values["sha256"]).lower()
    if "path" in values:
        values["path"] = _entry_path(where, str(values["path"]), source)
    return ModelSpec(name=name.lower(), source=str(source), settings=tuple(settings.items()),
                     given=frozenset(table) if given is None else given, **values)


def _dotted_name(name: str, key: str, table: dict[str, Any]) -> str:
    """The name an unquoted [models.A.B.C] meant, whose dots TOML read as tables nested in each other: A.B.C."""
    parts = [name, key]
    while len(table) == 1:
        ((inner, nested),) = table.items()
        if not isinstance(nested, dict) or inner in _FIELDS or inner in CHAT_SETTINGS:
            break
        parts.append(inner)
        table = nested
    return ".".join(parts)


def _check_path_entry(where: str, table: dict[str, object]) -> None:
    """An entry for a file of one's own names it with path alone: no repo, nor keys about a repo's files."""
    if "repo" in table:
        raise ConfigError(f"{where} has both 'repo' and 'path'",
                          hint="keep repo (and quant) for a model on the Hugging Face Hub, or path for a file of your "
                               "own")
    extra = next((key for key in _HUB_KEYS if key in table), None)
    if extra is not None:
        raise ConfigError(f"{where}.{extra} is about a repo's files, and this entry names one file with path",
                          hint=f"remove {extra}")
    _check_spec_values(where, table)


def _check_repo_entry(where: str, table: dict[str, object]) -> None:
    """An entry for a model on the Hub: a repo id first (a misspelt one matters more than a key left out), then a
    quant, then the other values."""
    repo = str(table["repo"])
    if not is_repo_id(repo):
        raise ConfigError(f"{where}.repo {repo!r:.80} is not a Hugging Face repo id", hint=_repo_hint(repo))
    if "quant" not in table:
        raise ConfigError(f"{where} needs 'quant'", hint='add quant = "Q4_K_M"')
    _check_spec_values(where, table)


def _repo_hint(text: str) -> str:
    """How to write an entry's repo that is not ORG/NAME: the repo id of the address or reference given (with its
    quant or file as keys of their own), else the form."""
    try:
        ref = parse_reference(text)
    except (UsageError, ValueError):
        ref = None
    if ref is None or ref.repo is None:
        return 'write repo = "ORG/NAME"'
    extra = f' and file = "{ref.filename}"' if ref.filename else f' and quant = "{ref.quant}"' if ref.quant else ""
    return f'write repo = "{ref.repo}"{extra}'


def _entry_path(where: str, text: str, source: Path | str) -> Path:
    """An entry's path: ~ expanded, and a relative one taken from the folder of the models.toml that says it."""
    if not text.strip() or "\x00" in text:
        raise ConfigError(f"{where}.path {text!r:.80} is not a file path", hint='write path = "/path/to/model.gguf"')
    try:
        path = expand_user_path(text)
    except UsageError as exc:
        raise ConfigError(f"{where}.path: {exc.message}", hint=exc.hint) from None
    folder = source.parent if isinstance(source, Path) else Path(str(resources.files("localgen")))
    joined = folder / path
    return joined.parent.resolve() / joined.name  # ../models/x.gguf as the folder it means; the file's own name kept


def model_defaults(spec: ModelSpec | None) -> tuple[dict[str, int | float | None], str | None]:
    """The sampling settings and system prompt models.toml gives a model (its entry's over [defaults]'), read now;
    spec is None for a model given by path or repo."""
    from localgen.config import settings

    registry = load_registry(settings().user_registry)
    system = spec.system if spec is not None and spec.system is not None else registry.default_system
    chosen = dict(registry.default_settings) | dict(spec.settings if spec is not None else ())
    return {key: stored_setting(key, value) for key, value in chosen.items()}, system


def _check_settings(where: str, settings: dict[str, object]) -> None:
    """Sampling settings of an entry must have their type and range (as on the command line)."""
    for key, value in settings.items():
        kind = CHAT_SETTINGS[key]
        if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int):
            raise ConfigError(f"{where}.{key} must be {'a number' if kind is float else 'an integer'}",
                              hint=f"write {key} = {'0.7' if kind is float else '40'}")
        try:
            check_setting(key, value)
        except UsageError as exc:
            raise ConfigError(f"{where}.{key}: {exc.message}", hint=exc.hint) from None


_TYPE_WORDS = {str: "a string", int: "an integer"}


def _check_spec_values(where: str, table: dict[str, object]) -> None:
    """Refuse values that parse but cannot be right: unsafe file names, an empty quant, sizes that are not
    positive, a context size out of range."""
    for key in ("file", "package_file"):
        if key in table:
            try:
                check_safe_filename(str(table[key]))
            except UsageError as exc:
                raise ConfigError(f"{where}.{key}: {exc.message}", hint=exc.hint) from None
    if "package" in table and not _PACKAGE.fullmatch(str(table["package"])):
        raise ConfigError(f"{where}.package {str(table['package'])!r:.80} is not the name of a top-level Python "
                          "package", hint='write package = "NAME", the folder name of an installed package')
    if "quant" in table and not str(table["quant"]).strip():
        raise ConfigError(f"{where}.quant is empty", hint='write quant = "Q4_K_M", for example')
    if "size" in table and int(table["size"]) <= 0:  # type: ignore[call-overload]
        raise ConfigError(f"{where}.size must be a positive integer", hint="write the file's size in bytes")
    if "context" in table:
        try:
            check_context_bounds(int(table["context"]))  # type: ignore[call-overload]
        except UsageError as exc:
            raise ConfigError(f"{where}.context: {exc.message}", hint="write context = 4096, for example") from None
    if "sha256" in table and not _SHA256.fullmatch(str(table["sha256"])):
        raise ConfigError(f"{where}.sha256 must be 64 hexadecimal digits, not {str(table['sha256'])!r:.80}",
                          hint="write the file's full sha256 (`sha256sum FILE` prints it), or remove the line")


def _toml(text: str, source: Path | str) -> dict[str, Any]:
    """One models.toml text as data, or a ConfigError naming the file."""
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        reason = exc if isinstance(exc, tomllib.TOMLDecodeError) else "nested too deeply"
        raise ConfigError(f"{source}: not valid TOML ({reason})", hint="fix or remove the file") from exc


def _parse_registry(data: dict[str, Any], source: Path | str, inherit: dict[str, dict] | None = None,
                    ) -> tuple[dict[str, ModelSpec], dict[str, Any]]:
    """Parse one models.toml's data into specs and its [defaults] (the default model's name, a system prompt and
    sampling settings for every model).

    An entry named as one in inherit (the built-in tables) that keeps its repo changes only the keys it gives (a
    smaller context, another quant), so the bundled copy and the checksum stay; with another repo it replaces it.
    """
    unknown = sorted(set(data) - {"models", "defaults"})
    if unknown:
        raise ConfigError(f"{source}: unknown table or key '{unknown[0]}'",
                          hint="the file holds [models.NAME] entries and an optional [defaults] model = \"NAME\"")
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise ConfigError(f"{source}: 'models' must be a table of [models.NAME] entries",
                          hint="write [models.NAME] tables")
    specs: dict[str, ModelSpec] = {}
    for name, table in models.items():
        if name.lower() in specs:
            first = next(other for other in models if other.lower() == name.lower())
            raise ConfigError(f"{source}: [models.{first}] and [models.{name}] are the same name (names ignore case)",
                              hint="remove or rename one of them")
        given = frozenset(table) if isinstance(table, dict) else frozenset()
        specs[name.lower()] = _spec_from_table(name, _inherited(table, (inherit or {}).get(name.lower())), source,
                                               given)
    defaults = data.get("defaults", {})
    default = defaults.get("model") if isinstance(defaults, dict) else None
    if not isinstance(defaults, dict) or not isinstance(default, (str, type(None))):
        raise ConfigError(f"{source}: [defaults] model must be a model name", hint='write model = "NAME"')
    unknown = sorted(set(defaults) - {"model", "system", *CHAT_SETTINGS})
    if unknown:
        raise ConfigError(f"{source}: [defaults] has unknown key '{unknown[0]}'",
                          hint=f"[defaults] takes model, system and the settings {', '.join(CHAT_SETTINGS)}")
    if not isinstance(defaults.get("system", ""), str):
        raise ConfigError(f"{source}: [defaults].system must be a string", hint='write system = "text"')
    _check_settings(f"{source}: [defaults]", {key: value for key, value in defaults.items() if key in CHAT_SETTINGS})
    return specs, defaults


def _inherited(table: object, base: dict | None) -> object:
    """A user's table over the built-in one of the same name, when it names the same repo (or none)."""
    if base is None or not isinstance(table, dict) or "path" in table:  # a file of one's own replaces the entry
        return table
    if str(table.get("repo", base.get("repo", ""))).lower() != str(base.get("repo", "")).lower():
        return table

    def same(key: str) -> bool:
        return str(table.get(key, base.get(key, ""))).lower() == str(base.get(key, "")).lower()

    if not (same("quant") and same("file")):  # another file of the repo: the bundled copy and checksum are not its
        base = {key: value for key, value in base.items() if key not in ("file", "quant", "sha256", "size",
                                                                         "package", "package_file")}
    return {**base, **table}


def builtin_registry_text() -> str:
    """The text of the models.toml shipped with localgen."""
    return resources.files("localgen").joinpath("models.toml").read_text(encoding="utf-8")


def load_registry(user_file: Path | None = None) -> Registry:
    """The built-in registry extended (and overridden by name) by the user's file."""
    builtin = _toml(builtin_registry_text(), BUILTIN_SOURCE)
    models, defaults = _parse_registry(builtin, BUILTIN_SOURCE)
    default = defaults.get("model")
    if user_file is not None and user_file.is_symlink() and not user_file.exists():
        raise ConfigError(f"{user_file}: a link to {os.readlink(user_file)}, which is not there",
                          hint="point the link at your models.toml, or remove it")
    if user_file is not None and user_file.exists() and not user_file.is_file():
        raise ConfigError(f"{user_file}: not a file", hint="models.toml must be a TOML file; remove or rename this")
    if user_file is not None and user_file.is_file():
        try:
            text = user_file.read_text(encoding="utf-8-sig")  # a byte order mark, as Windows editors write it
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{user_file}: not UTF-8 text (byte {exc.start})",
                              hint="save it as UTF-8 in your editor, or remove it") from None
        except OSError as exc:
            raise ConfigError(f"{user_file}: cannot be read ({exc.strerror or exc})",
                              hint="check the file's permissions") from exc
        tables = {name.lower(): table for name, table in builtin.get("models", {}).items()}
        user_models, user_defaults = _parse_registry(_toml(text, user_file), user_file, inherit=tables)
        models = {**models, **user_models}
        settings = tuple((key, value) for key, value in user_defaults.items() if key in CHAT_SETTINGS)
        shared = {"default_system": user_defaults.get("system"), "default_settings": settings}
        if "model" in user_defaults:  # checked when the default is used, so other commands keep working
            return Registry(models=models, default_model=str(user_defaults["model"]).lower(),
                            default_source=user_file, **shared)
        return Registry(models=models, default_model=(default or "").lower(), **shared)
    return Registry(models=models, default_model=(default or "").lower())


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

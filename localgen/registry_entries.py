"""models.toml's entries: ModelSpec, and how a file's [models.NAME] tables and [defaults] become them, with their
checks (names, keys, types and values)."""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from localgen.chat_settings import SETTING_ALIASES
from localgen.errors import ConfigError, UsageError
from localgen.params import CHAT_SETTINGS, SETTING_EXAMPLES, check_context_bounds, check_setting, check_stop_strings
from localgen.references import NAME_PATTERN, check_safe_filename, is_repo_id, parse_reference, quant_of_filename
from localgen.slips import did_you_mean
from localgen.typed_paths import expand_user_path, refuse_file_as_folder

_PACKAGE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # a top-level module: finding it imports nothing
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
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
    stop: tuple[str, ...] | None = None  # stop strings when --stop is not given (None: [defaults]'; (): none)
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

    def context_beyond(self, maximum: int | None) -> bool:
        """Whether the entry's context is beyond its model's maximum (the context length of its file's header)."""
        return bool(self.context and maximum and self.context > maximum)

    @property
    def distribution(self) -> str:
        """The pip name of the package the bundled file comes with ('' when none)."""
        return (self.package or "").replace("_", "-")


def context_beyond_note(spec: ModelSpec | None, maximum: int | None) -> str | None:
    """What to say of a user's models.toml entry whose context is beyond its model's maximum, which a load caps at
    that maximum (as it would refuse --ctx-size beyond it); None where it is not."""
    if spec is None or not spec.context_beyond(maximum) or not spec.user_gives("context"):
        return None
    return (f"{spec.origin}: context = {spec.context} is beyond the model's maximum of {maximum:,}, so it is "
            f"capped at {maximum:,}; write context = {maximum} or less there")


def warn_context_beyond(spec: ModelSpec | None, maximum: int | None) -> None:
    """Warn, once in a process, of a models.toml entry's context beyond its model's maximum (context_beyond_note)."""
    from localgen import console
    from localgen.once import first_time

    message = first_time(context_beyond_note(spec, maximum))
    if message is not None:
        console.warn(message)


_FIELDS = {
    "repo": str, "path": str, "quant": str, "file": str, "context": int, "template": str, "license": str,
    "description": str, "sha256": str, "size": int, "package": str, "package_file": str, "system": str,
}
STOP_KEY = "stop"  # stop strings, as Ollama's PARAMETER stop: a list of strings (or one), not a setting /set takes
_HUB_KEYS = ("quant", "file", "package", "package_file")  # about a repo's files: not for path (sha256, size pin either)
_KEY_ALIASES = {**SETTING_ALIASES, "num_ctx": "context", "n_ctx": "context", "ctx": "context", "ctx_size": "context",
                "context_length": "context", "context_size": "context", "quantization": "quant", "filename": "file",
                "system_prompt": "system", "model": "repo", "reverse_prompt": "stop", "stop_sequences": "stop",
                "stops": "stop"}  # other tools' names (Ollama's, llama-cli's, the APIs')


def _spec_from_table(name: str, table: object, source: Path | str, given: frozenset[str] | None = None) -> ModelSpec:
    """Build a ModelSpec from one [models.NAME] table, checking field names and types (given: the keys the file
    itself gives, when the table has a built-in entry's under them; else all)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [models.{name}] must be a table", hint=f'write [models.{name}] and its keys')
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(f"{source}: [models.{name!r}]: a model name starts with an ASCII letter or digit, then uses "
                          "ASCII letters, digits, '.', '_' and '-'", hint="rename the entry")
    if name.lower().endswith(".gguf"):
        raise ConfigError(f"{source}: [models.\"{name}\"]: a name ending in .gguf would be read as a file path",
                          hint=f"rename the entry, e.g. [models.\"{name[:-5]}\"]")
    settings = {key: value for key, value in table.items() if key in CHAT_SETTINGS}
    for key, value in table.items():
        expected = _FIELDS.get(key)
        if key in settings or key == STOP_KEY:
            continue
        if expected is None:
            hint = (f'quote names that contain dots: [models."{_dotted_name(name, key, value)}"]'
                    if isinstance(value, dict)
                    else did_you_mean(key, (*_FIELDS, STOP_KEY, *CHAT_SETTINGS), _KEY_ALIASES)
                    + f"known keys: {', '.join(_FIELDS)}, {STOP_KEY}, and the settings {', '.join(CHAT_SETTINGS)}")
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
    if STOP_KEY in values:
        values[STOP_KEY] = stop_strings(where, values[STOP_KEY])
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
        if not isinstance(nested, dict) or inner in _FIELDS or inner == STOP_KEY or inner in CHAT_SETTINGS:
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
    folder = source.parent if isinstance(source, Path) else Path(str(resources.files("localgen")))
    try:
        path = expand_user_path(text, folder)
    except UsageError as exc:
        raise ConfigError(f"{where}.path: {exc.message}", hint=exc.hint) from None
    joined = folder / path
    try:
        refuse_file_as_folder(text, joined)
    except UsageError as exc:
        raise ConfigError(f"{where}.path: {exc.message}", hint=exc.hint) from None
    return in_real_folder(joined)


def in_real_folder(path: Path) -> Path:
    """path with its folder's real path (../models/x.gguf as the folder it means) and the file's own name kept; a
    folder that cannot be resolved (a loop of links) is kept as far as it resolves, so the file is unusable, not the
    registry."""
    return Path(os.path.realpath(path.parent)) / path.name  # realpath, unlike Path.resolve, raises at no loop


def _check_settings(where: str, settings: dict[str, object]) -> None:
    """Sampling settings of an entry must have their type and range (as on the command line)."""
    for key, value in settings.items():
        kind = CHAT_SETTINGS[key]
        if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int):
            raise ConfigError(f"{where}.{key} must be {'a number' if kind is float else 'an integer'}",
                              hint=f"write {key} = {SETTING_EXAMPLES[key]}")
        try:
            check_setting(key, value)
        except UsageError as exc:
            raise ConfigError(f"{where}.{key}: {exc.message}", hint=exc.hint) from None


def stop_strings(where: str, value: object) -> tuple[str, ...]:
    """An entry's or [defaults]' stop: an array of strings, each with some text, as --stop takes them (one string
    alone is one stop string, as Ollama's PARAMETER stop and the OpenAI API's stop take it; [] is none)."""
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(stop, str) for stop in stops):
        raise ConfigError(f"{where}.{STOP_KEY} must be a string or an array of strings",
                          hint=f'write {STOP_KEY} = ["<|im_end|>", "###"]')
    try:
        check_stop_strings(tuple(stops))
    except UsageError as exc:
        raise ConfigError(f"{where}.{STOP_KEY}: {exc.message}",
                          hint=f'give each stop string some text, or {STOP_KEY} = [] for none') from None
    return tuple(stops)


_TYPE_WORDS = {str: "a string", int: "an integer"}


def _check_spec_values(where: str, table: dict[str, object]) -> None:
    """Refuse values that parse but cannot be right: unsafe file names, an empty quant or template, sizes that are
    not positive, a context size out of range."""
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
    if "template" in table and not str(table["template"]).strip():  # as an empty --chat-template file is
        from localgen.inputs import emptiness

        raise ConfigError(f"{where}.template is not a chat template (it {emptiness(str(table['template']))})",
                          hint="remove the line to use the model's own template, or write a Jinja chat template there")
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


def _defaults_meant(key: str) -> str:
    """What an unknown [defaults] key may have meant: did_you_mean's guess, or, for a context size (num_ctx, context),
    where one is set instead."""
    if _KEY_ALIASES.get(key.lower().replace("-", "_"), key.lower()) == "context":
        return "the context size is set per model ([models.NAME] context = N) or with --ctx/-c; "
    return did_you_mean(key, ("model", "system", STOP_KEY, *CHAT_SETTINGS), _KEY_ALIASES)


def parse_registry(data: dict[str, Any], source: Path | str, inherit: dict[str, dict] | None = None,
                    ) -> tuple[dict[str, ModelSpec], dict[str, Any]]:
    """Parse one models.toml's data into specs and its [defaults] (the default model's name, a system prompt, stop
    strings (read as a tuple) and sampling settings for every model).

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
    unknown = sorted(set(defaults) - {"model", "system", STOP_KEY, *CHAT_SETTINGS})
    if unknown:
        raise ConfigError(f"{source}: [defaults] has unknown key '{unknown[0]}'",
                          hint=_defaults_meant(unknown[0])
                          + f"[defaults] takes model, system, {STOP_KEY} and the settings {', '.join(CHAT_SETTINGS)}")
    if not isinstance(defaults.get("system", ""), str):
        raise ConfigError(f"{source}: [defaults].system must be a string", hint='write system = "text"')
    _check_settings(f"{source}: [defaults]", {key: value for key, value in defaults.items() if key in CHAT_SETTINGS})
    if STOP_KEY in defaults:
        defaults = {**defaults, STOP_KEY: stop_strings(f"{source}: [defaults]", defaults[STOP_KEY])}
    return specs, defaults


_STALE_FOR_ANOTHER_FILE = ("file", "sha256", "size", "package", "package_file")  # a built-in entry's, of its file


def _names_bundled_file(table: dict, base: dict) -> bool:
    """Whether the user's `file` (a name or a glob) names the built-in entry's bundled file."""
    bundled = str(base.get("package_file", "")).lower()
    pattern = str(table.get("file", "")).lower()
    return bool(bundled and pattern) and (bundled == pattern or fnmatch.fnmatchcase(bundled, pattern))


def _inherited(table: object, base: dict | None) -> object:
    """A user's table over the built-in one of the same name, when it names the same repo (or none)."""
    if base is None or not isinstance(table, dict) or "path" in table:  # a file of one's own replaces the entry
        return table
    if str(table.get("repo", base.get("repo", ""))).lower() != str(base.get("repo", "")).lower():
        return table

    def same(key: str) -> bool:
        return str(table.get(key, base.get(key, ""))).lower() == str(base.get(key, "")).lower()

    another_file = not (same("quant") and (same("file") or _names_bundled_file(table, base)))
    if another_file:  # the bundled copy and checksum are not its
        base = {key: value for key, value in base.items() if key not in _STALE_FOR_ANOTHER_FILE}
        if "file" in table and "quant" not in table:  # the quant a glob of another quant's files carries, else kept
            base["quant"] = quant_of_filename(str(table["file"])) or base.get("quant")
    return {**base, **table}

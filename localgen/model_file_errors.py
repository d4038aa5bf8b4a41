"""A model file's errors named as the user gave the file: its header's by the path typed or by its models.toml entry,
and what to pass instead of a path that is missing or a folder: the model files beside it or in it; and why models rm
removes no path."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from localgen.errors import GGUFError, ModelNotFoundError, UsageError
from localgen.gguf_format import GGUF_MAGIC
from localgen.slips import misspells
from localgen.typed_paths import is_existing_file, is_existing_folder, short_path, unset_variables_hint

if TYPE_CHECKING:
    from localgen.registry import ModelSpec

FOLDER_FILES_SHOWN = 4  # the model files named in the hint for a folder given as a model; more are counted


@contextlib.contextmanager
def named_as_typed(model: str | None) -> Iterator[None]:
    """Name a local model file given by path as typed in the header errors met within (they name the file alone:
    `-m ./notes/README.md` is not 'README.md: not a GGUF file'), and a models.toml entry's own file (path =) by its
    path and the entry; without a model, the default's errors say which setting gives it too."""
    try:
        yield
    except GGUFError as exc:
        from localgen.registry import own_file_entry_for

        entry = own_file_entry_for(model)
        named = exc if entry is None else entry_file_error(exc, entry)
        if model is None:
            from localgen.default_model import blamed_on_default

            raise blamed_on_default(named) from exc
        if named is not exc:
            raise named from exc
        if model == os.path.basename(model) or not os.path.isfile(os.path.expanduser(model)):
            raise
        raise type(exc)(with_path_named(exc.message, model), hint=exc.hint, exit_code=exc.exit_code) from exc


def with_path_named(message: str, path: Path | str) -> str:
    """A header error's message, which names the file by its base name, naming it by path instead (the message as
    it is where it does not start with that name)."""
    name = os.path.basename(path)
    return f"{short_path(path)}{message[len(name):]}" if message.startswith(f"{name}: ") else message


def entry_file_error(exc: GGUFError, spec: ModelSpec) -> GGUFError:
    """A header error met in the file an entry names (path =), naming that file by its path and the entry, as the
    error for a missing file does."""
    assert spec.path is not None
    return type(exc)(f"{with_path_named(exc.message, spec.path)} ({spec.origin})", hint=exc.hint,
                     exit_code=exc.exit_code)


def missing_file_hint(path: Path, typed: str) -> str:
    """What to check for a model file that is not there: a $VAR in it that is not set, the name with .gguf added,
    where that file is, the model file in its folder that it misspells (case, separators, or a letter or two with the
    same numbers; .gguf added where it lacks it; written so as to tell it from the path typed), else the model files
    the folder holds (vision projectors left out; not where they hold one the path typed cannot be told from)."""
    unset = unset_variables_hint(typed)
    if unset:
        return f"{unset}: set it, or write the path in full"
    hub_file = _hub_file_after_colon(typed)
    if hub_file is not None:
        return hub_file
    with_suffix = path.with_name(f"{path.name}.gguf")
    if not path.name.lower().endswith(".gguf") and is_existing_file(str(with_suffix)):
        return _naming("did you mean ", [f"{typed}.gguf"], "?")
    names = [name for name in folder_models(path.parent) if not name.lower().startswith("mmproj")]
    shown = [os.path.join(os.path.dirname(typed), name) for name in names]
    meant = misspelt_model_file(path.name, names)  # ./Model for ./model.gguf
    told = _told_apart(typed, os.path.join(os.path.dirname(typed), meant)) if meant is not None else None
    if told is not None:
        return told
    if shown and meant is None:
        return _naming("check the path; this folder holds: ", shown)
    return "check the path, or pass a registry name"


def _told_apart(typed: str, meant: str) -> str | None:
    """'did you mean MEANT?' for a path typed that misspells the file meant; where the two print alike (a byte that
    is not UTF-8 shows as U+FFFD, as a C1 code does; a tab or a line end as a space; ESC as ^[, the two characters
    ^[ alike), both written with the escapes of the tab-separated listings (\\xff), or None where even those do not
    tell them apart (a difference in the middle a long path's cut leaves out)."""
    from localgen.console import one_line
    from localgen.tab_separated import escaped_field

    if one_line(short_path(meant)) != one_line(short_path(typed)):
        return _naming("did you mean ", [meant], "?")
    meant, typed = short_path(escaped_field(meant)), short_path(escaped_field(typed))
    return f"did you mean {meant}? {typed} was typed; \\xHH is a byte that does not print" if meant != typed else None


def _hub_file_after_colon(typed: str) -> str | None:
    """For ORG/REPO:NAME.gguf, no file here and no folder ORG: the Hub reference it stands for, ORG/REPO:QUANT where
    NAME is a quant tag (Q4_K_M.gguf), else ORG/REPO/NAME.gguf (a quant goes after a colon, a file after a slash)."""
    import re

    from localgen.references import quant_of_filename

    matched = re.fullmatch(r"([\w.-]+/[\w.-]+):([^/:]+)\.gguf", typed, re.IGNORECASE)
    if matched is None or os.path.isdir(typed.split("/")[0]):
        return None
    repo, name = matched.groups()
    if quant_of_filename(name) == name.upper():
        return f"did you mean {repo}:{name}? a quant follows the repo after a colon, without .gguf"
    return f"did you mean {repo}/{name}.gguf? a file of a Hub repo follows the repo after a slash"


def model_file_here(name: str) -> str | None:
    """The file in the current folder that a name typed without a folder stands for: a file of that name, else the
    model file it misspells, .gguf added where it lacks it (model.gguf for Model), or None."""
    if is_existing_file(name):
        return name
    return misspelt_model_file(name, folder_models(Path(".")))


def misspelt_model_file(name: str, names: list[str]) -> str | None:
    """The first of a folder's model files (names) that a name misspells, .gguf added where it lacks it (model.gguf
    for Model) or as typed (model.gguf for model.ggu, a slip of .gguf itself), or None."""
    typed = [name] if name.lower().endswith(".gguf") else [f"{name}.gguf", name]
    return next((found for found in names if any(misspells(each, found) for each in typed)), None)


def folder_models(folder: Path) -> list[str]:
    """The names of the model files in a folder: its .gguf files, a split model's first shard alone, and a vision
    projector (mmproj) only where nothing else is there."""
    from localgen.gguf_split import split_name_parts

    try:
        names = sorted(entry.name for entry in folder.iterdir()
                       if entry.name.lower().endswith(".gguf") and entry.is_file())
    except OSError:
        return []
    names = [name for name in names if (split_name_parts(name, ignore_case=True) or ("", 1, 1))[1] == 1]
    return [name for name in names if not name.lower().startswith("mmproj")] or names


def folder_gguf_models(folder: Path) -> list[str]:
    """folder_models that start as a GGUF model does: never a web page or notes saved under a .gguf name."""
    return [name for name in folder_models(folder) if _reads_as_gguf(folder / name)]


def folder_hint(folder: Path, typed: str, *, quoted: bool = False, verb: str = "pass") -> str:
    """What to give instead of a folder given as a model file (typed: the folder as given): the GGUF models in it
    (quoted: as a shell takes them; verb: what to do with one, pass it or, for an entry's path, point it at it)."""
    import shlex

    shown = [shlex.quote(path) if quoted else path
             for path in (os.path.join(typed, n) for n in folder_gguf_models(folder))]
    if not shown:
        return f"{verb} the path of a .gguf model file; this folder holds none"
    if len(shown) == 1:
        return _naming("did you mean ", shown, "?")
    return _naming(f"{verb} one of the {len(shown)} models in this folder: ", shown)


def named_here_hint(typed: str, there: Path) -> str | None:
    """What a hint says of a name that means a file or folder here (there: its path) rather than a model: the path to
    pass for it (shell-quoted), or the model files in the folder; None where it names neither."""
    import shlex

    if is_existing_file(str(there)):
        return f"for the file of that name here, use {shlex.quote(f'./{typed}')}"
    if is_existing_folder(str(there)):
        return f"{typed} here is a folder, not a model: {folder_hint(there, f'./{typed}', quoted=True)}"
    return None


def family_here_error(typed: str, entry: str) -> ModelNotFoundError:
    """The error for a name that is both a file or folder here and a family the registry has in one size (entry, the
    name that means it alone): what the file or folder is, and the way to mean each."""
    name = typed.strip()
    registry = f"for the registry's model, use {entry}"
    if is_existing_file(name):
        what = "a model file here" if _reads_as_gguf(Path(name)) else "a file here, not a model file,"
        return ModelNotFoundError(f"'{name}' is both {what} and a model family of the registry",
                                  hint=f"{registry}; for the file, use ./{name}")
    models = [os.path.join(f"./{name}", found) for found in folder_gguf_models(Path(name))]
    if not models:
        return ModelNotFoundError(f"'{name}' is both a folder here, which holds no .gguf file, and a model family of "
                                  "the registry", hint=f"{registry}; for a model file, pass its path")
    yours = "the folder's model" if len(models) == 1 else f"one of the folder's {len(models)} models"
    return ModelNotFoundError(f"'{name}' is both a folder here, not a model file, and a model family of the registry",
                              hint=_naming(f"{registry}; for {yours}, use ", models))


def path_not_removed(typed: str, path: Path | None) -> UsageError:
    """The refusal of a path given to models rm (typed; path: where it leads), which removes only the models localgen
    downloaded: a folder (`.`) is said to be one, not a model; a file is left to its owner to delete."""
    if path is not None and is_existing_folder(str(path)):
        return UsageError(f"{typed} is a folder, not a model; localgen only removes models it downloaded",
                          hint="pass the name of a downloaded model: `localgen models list` names them")
    return UsageError(f"{typed} is a file path; localgen only removes models it downloaded",
                      hint="delete the file yourself if you no longer need it")


def _reads_as_gguf(path: Path) -> bool:
    """Whether a file starts as a GGUF model does."""
    try:
        with path.open("rb") as file:
            return file.read(len(GGUF_MAGIC)) == GGUF_MAGIC
    except OSError:
        return False


def _naming(before: str, paths: list[str], after: str = "") -> str:
    """A hint that names model files by path (the first few, and how many more), short; a byte of a name that is not
    UTF-8 is written \\xff, as the tab-separated listings write it (the U+FFFD it prints as names no file when
    typed), with a note that says so."""
    from localgen.console import without_surrogates
    from localgen.tab_separated import escaped_field

    listed = paths[:FOLDER_FILES_SHOWN]
    escaped = any(without_surrogates(path) != path for path in listed)
    named = ", ".join(short_path(escaped_field(path) if escaped else path) for path in listed)
    more = f" and {len(paths) - FOLDER_FILES_SHOWN} more" if len(paths) > FOLDER_FILES_SHOWN else ""
    note = f"{' ' if after else '; '}\\xHH is a byte that is not UTF-8 (Tab completes it)" if escaped else ""
    return f"{before}{named}{more}{after}{note}"

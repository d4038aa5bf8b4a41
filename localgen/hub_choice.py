"""Choosing a model's files among a Hub repo's GGUF files: by file name, by quant tag, else by preference."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

from localgen.errors import HubError
from localgen.gguf_split import split_name_parts
from localgen.hub_types import HubFile, NotInRepoError
from localgen.references import normalize_quant, quant_of_filename
from localgen.units import alternatives

# Without an explicit quant: the first of these the repo has. 4-5 bit k-quants are the usual
# size/quality sweet spot; then the older 4/5-bit formats, then bigger (better, slower) quants,
# then smaller (worse) ones, then unquantized weights. Tags not listed come after, alphabetically.
QUANT_PREFERENCE = (
    "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q5_K_S", "IQ4_XS", "IQ4_NL", "MXFP4", "MXFP4_MOE", "NVFP4", "Q4_0", "Q4_1",
    "Q5_0", "Q5_1", "Q4_K_L", "Q5_K_L", "Q6_K", "Q6_K_L", "Q8_0", "Q3_K_L", "Q3_K_M", "Q3_K_S", "IQ3_M", "IQ3_S",
    "IQ3_XS", "IQ3_XXS", "Q2_K_L", "Q2_K", "Q2_K_S", "IQ2_M", "IQ2_S", "IQ2_XS", "IQ2_XXS", "TQ2_0",
    "IQ1_M", "IQ1_S", "TQ1_0", "F16", "BF16", "FP16", "F32", "FP32",
)
DYNAMIC_PREFIX = "UD-"  # Unsloth's "dynamic" quants: the tag a file name carries before its quant (UD-Q4_K_XL)
EMPTY_ON_THE_HUB = "an empty file (0 bytes) on the Hub, not a model"  # a file the Hub lists with no bytes
# GGUF files in a model repo that are not a chat model: never chosen unless named.
# projectors (mmproj as a word anywhere: llava-v1.5-7b-mmproj-f16.gguf) and imatrix data (a name that starts with it:
# model files quantized with an imatrix may carry the word too)
_AUXILIARY = re.compile(r"(?:^|[-_.])mmproj(?:[-_.]|$)|^imatrix", re.IGNORECASE)


def no_gguf_files(repo: str) -> HubError:
    """The error for a repo that holds no GGUF file (the original weights, say), naming the registry's entry for its
    GGUF conversion where the registry has one."""
    entry = _gguf_entry_of(repo)
    found = f": the registry's {entry[0]} is its GGUF conversion ({entry[1]}); use that name" if entry else \
        "; look for a repo whose name ends in -GGUF"
    return NotInRepoError(f"no GGUF files in {repo}", hint=f"localgen runs GGUF models{found}", key="repo")


def _gguf_entry_of(repo: str) -> tuple[str, str] | None:
    """The registry entry (name, repo) whose repo is ORG/NAME's GGUF conversion (NAME-GGUF, or ORG_NAME-GGUF as
    bartowski names them), if any."""
    from localgen.config import settings
    from localgen.errors import LocalgenError
    from localgen.registry import load_registry

    org, _, name = repo.lower().partition("/")
    wanted = {f"{name}-gguf", f"{org}_{name}-gguf"}
    try:
        specs = sorted(load_registry(settings().user_registry).models.values(), key=lambda s: s.name)
    except LocalgenError:
        return None
    return next(((s.name, s.repo) for s in specs if s.repo and s.repo.lower().partition("/")[2] in wanted), None)


def only_auxiliary(repo: str, files: Sequence[HubFile]) -> HubError:
    """The error for a repo whose GGUF files are all projectors or imatrix files."""
    names = ", ".join(f.filename for f in files[:4]) + (", ..." if len(files) > 4 else "")
    return NotInRepoError(f"{repo} holds no language model, only projector or imatrix files ({names})",
                          hint="these go with a model in another repository: pass that one", key="repo")


def _meant_quants(wanted: str, available: list[str]) -> list[str]:
    """The repo's quants a quant it lacks may have meant: spelled alike but for separators, an O for a 0 and FP for F
    (Q4KM, Q8_O, FP16 for F16) or the quant a longer tag holds (Q4_K_M of UD-Q4_K_M), else those it or its quant
    begins (Q8: Q8_0; Q4_K and UD-Q4_K: Q4_K_M, Q4_K_S), at most three; a file's name given as the quant
    (m-Q4_K_M.gguf) stands for its quant."""
    def key(tag: str) -> str:
        return tag.upper().replace("_", "").replace("-", "").replace("FP", "F").replace("O", "0")

    if wanted.upper().endswith(".GGUF"):  # a file's name given as the quant (hf.co/ORG/REPO:m-Q4_K_M.gguf)
        wanted = quant_of_filename(wanted) or wanted[:-len(".GGUF")]

    inner = quant_of_filename(wanted)  # a tag's quant: Q4_K_M of UD-Q4_K_M, where no file carries the tag whole
    same = [tag for tag in available if key(tag) == key(wanted) or tag == inner]
    beginnings = [key(text) for text in (wanted, inner or "") if len(key(text)) > 1]
    begun = [tag for tag in available if any(key(tag).startswith(start) for start in beginnings)]
    return (same or begun)[:3]


def lacking_quant_hint(model: str, meant: Sequence[str], choices: str) -> str:
    """The hint for a quant a repo lacks, with the quants it may have meant and those it has, each to be chosen as
    model:QUANT (model: the repo, or the registry name typed)."""
    alike = [f"{model}:{tag}" for tag in meant]
    return (f"did you mean {alternatives(alike)}? " if alike else "") + f"{choices}; choose one with {model}:QUANT"


def choose_model(files: list[HubFile], *, quant: str | None, filename: str | None,
                 repo: str) -> tuple[HubFile, ...]:
    """The files of one model: by file name (exact, then name, then glob), by quant, else by preference."""
    if not files:
        raise no_gguf_files(repo)
    groups = _group_shards(files)
    if filename:
        return _check_complete(_pick(_narrowed(_match_filename(groups, filename, repo), quant)), repo)
    candidates = [g for g in groups if not is_auxiliary(g[0])]
    if not candidates:
        raise only_auxiliary(repo, files)
    available = _quants(candidates)
    if quant:
        wanted = normalize_quant(quant)
        matches = [g for g in candidates if carries_tag(g[0].filename, wanted)]
        if not matches:
            listed = ", ".join(available) if available else "none (no file name carries a quant tag)"
            meant, choices = tuple(_meant_quants(wanted, available)), f"quants in this repo: {listed}"
            raise NotInRepoError(f"{repo} has no {wanted} file", hint=lacking_quant_hint(repo, meant, choices),
                                 key="quant", choices=choices, meant=meant)
        return _check_complete(_pick(matches), repo)
    usable = [g for g in candidates if g[0].size > 0] or candidates  # a file the Hub lists empty is no model
    for tag in (*QUANT_PREFERENCE, *sorted(set(available) - set(QUANT_PREFERENCE))):
        matches = [g for g in usable if g[0].quant == tag]
        if matches:
            return _check_complete(_pick(matches), repo)
    if len(candidates) == 1:
        return _check_complete(candidates[0], repo)
    names = ", ".join(g[0].filename for g in candidates[:6])
    raise HubError(f"{repo} has several GGUF files and none names a quant",
                   hint=f"name one: {repo}/FILE.gguf (files: {names})")


def lookalikes(files: list[HubFile], chosen: tuple[HubFile, ...]) -> tuple[HubFile, ...]:
    """The first files (a split model's first shard) of the repo's other models of the chosen one's quant tag
    (m-instruct-Q4_K_M.gguf beside m-Q4_K_M.gguf), which choose_model passed over for a shorter name."""
    quant = chosen[0].quant
    if quant is None:
        return ()
    return tuple(g[0] for g in _group_shards(files) if g[0].quant == quant and g[0] is not chosen[0]
                 and not is_auxiliary(g[0]))


def carries_tag(filename: str, tag: str) -> bool:
    """Whether a file is of the quant tag asked for: its quant (quant_of), or, for a tag that is more than a quant,
    the tag whole between separators in its path: Unsloth's UD-Q4_K_XL (Qwen3-8B-UD-Q4_K_XL.gguf), as Hugging Face's
    "Use this model" writes it for Ollama and llama.cpp; an underscore after it goes on with the quant (UD-Q4_K is not
    UD-Q4_K_XL)."""
    tag = normalize_quant(tag)
    if quant_of(filename) == tag:
        return True
    if quant_of_filename(tag) in (None, tag) or tag.endswith(".GGUF"):  # a file's name given as a quant: refused
        return False
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(tag)}(?![A-Za-z0-9_])", filename, re.IGNORECASE) is not None


def named_tag(filename: str) -> str | None:
    """The tag a listing names a file's quant by: its quant (quant_of), with Unsloth's UD- where its name says it
    (UD-Q4_K_XL of Qwen3-8B-UD-Q4_K_XL.gguf: the tag Hugging Face's "Use this model" gives and the user pulls)."""
    quant = quant_of(filename)
    if quant is None:
        return None
    tagged = f"{DYNAMIC_PREFIX}{quant}"
    return tagged if carries_tag(filename, tagged) else quant


def _group_shards(files: list[HubFile]) -> list[tuple[HubFile, ...]]:
    """Single files as 1-tuples; shards of one split model together, in shard order."""
    groups: dict[str, list[HubFile]] = {}
    singles: list[tuple[HubFile, ...]] = []
    for f in files:
        key = shard_group_key(f.filename)
        if key == f.filename:
            singles.append((f,))
        else:
            groups.setdefault(key, []).append(f)
    split = [tuple(sorted(g, key=lambda f: f.shard_index or 0)) for g in groups.values()]
    return sorted([*singles, *split], key=lambda g: g[0].filename)


def _check_complete(group: tuple[HubFile, ...], repo: str) -> tuple[HubFile, ...]:
    """A split model must have every shard exactly once."""
    first = group[0]
    if first.shard_count is None:
        return group
    have = [f.shard_index for f in group]
    missing = sorted(set(range(1, first.shard_count + 1)) - set(have))
    if missing or len(have) != first.shard_count:
        raise HubError(f"{repo}: split model {first.filename} is incomplete on the Hub "
                       f"(missing shards {', '.join(map(str, missing)) or '?'} of {first.shard_count})",
                       hint="choose another quant with ORG/REPO:QUANT")
    return group


def is_auxiliary(file: HubFile) -> bool:
    """Projector and imatrix files (mmproj-model-f16.gguf, llava-v1.5-7b-mmproj-f16.gguf, imatrix.gguf): not a model
    on their own."""
    return is_auxiliary_name(file.filename)


def is_auxiliary_name(filename: str) -> bool:
    """Whether a file of a repo (its path in it) is a projector or imatrix file, by its name."""
    return _AUXILIARY.search(filename.rsplit("/", 1)[-1]) is not None


def model_labels(files: Sequence[HubFile]) -> list[str]:
    """What a repo's GGUF files hold, as a listing names it: its quant tags in preference order, then the file names
    of its untagged models (projectors and imatrix files left out)."""
    groups = _group_shards([f for f in files if not is_auxiliary(f)])
    return [*_quants(groups), *(g[0].filename for g in groups if not g[0].quant)]


def _quants(groups: list[tuple[HubFile, ...]]) -> list[str]:
    """The distinct quant tags of some groups, in preference order."""
    tags = {g[0].quant for g in groups if g[0].quant}
    order = {q: i for i, q in enumerate(QUANT_PREFERENCE)}
    return sorted(tags, key=lambda q: (order.get(q, len(order)), q))


def _pick(groups: list[tuple[HubFile, ...]]) -> tuple[HubFile, ...]:
    """Among equally good groups: top-level over folders, single files over splits, shortest name."""
    return min(groups, key=lambda g: pick_order(g[0].filename, split=len(g) > 1))


def pick_order(filename: str, *, split: bool) -> tuple[bool, bool, int, str]:
    """Where a model (by its first file's name; split: of several shards) comes among those equally good: top-level
    before folders, single files before splits, then the shortest name, then the first in order."""
    return "/" in filename, split, len(filename), filename


def _narrowed(groups: list[tuple[HubFile, ...]], quant: str | None) -> list[tuple[HubFile, ...]]:
    """Among the files a glob matches: models over projector and imatrix files, and those of the quant asked for
    (an entry's quant beside its file glob), where there are any."""
    models = [g for g in groups if not is_auxiliary(g[0])] or groups
    wanted = [g for g in models if quant and g[0].quant == normalize_quant(quant)]
    return wanted or models


def listed_filename(files: Sequence[HubFile], filename: str) -> str | None:
    """The path of the one listed file a file name given in a reference means (as -m takes it: another case, a bare
    name of a file in a folder, a pattern), or None where it means none or several."""
    try:
        matches = _match_filename([(f,) for f in files], filename, "")
    except NotInRepoError:
        return None
    return matches[0][0].filename if len(matches) == 1 else None


def _match_filename(groups: list[tuple[HubFile, ...]], filename: str, repo: str) -> list[tuple[HubFile, ...]]:
    """Groups containing a file named filename: exact path, then case-insensitive, then name, then glob."""
    tests = (
        lambda f: f.filename == filename,
        lambda f: f.filename.lower() == filename.lower(),
        lambda f: "/" not in filename and f.name.lower() == filename.lower(),
    )
    if any(ch in filename for ch in "*?["):
        tests = (*tests, lambda f: fnmatch.fnmatch(f.filename.lower(), filename.lower())
                 or fnmatch.fnmatch(f.name.lower(), filename.lower()))
    for test in tests:
        matches = [g for g in groups if any(test(f) for f in g)]
        if matches:
            return matches
    names = ", ".join(g[0].filename for g in groups[:8])
    raise NotInRepoError(f"{repo} has no file {filename!r}", hint=f"GGUF files in this repo: {names}", key="file",
                         choices=f"GGUF files in this repo: {names}")


def shard_of(filename: str) -> tuple[int | None, int | None]:
    """(index, count) for split-GGUF shard names like x-00001-of-00003.gguf."""
    parts = split_name_parts(filename.rsplit("/", 1)[-1], ignore_case=True)
    if parts is None:
        return None, None
    _, index, count = parts
    return (index, count) if 1 <= index <= count else (None, None)


def shard_group_key(filename: str) -> str:
    """A key shared by the shards of one split model; any other file is its own key."""
    name = filename.rsplit("/", 1)[-1]
    parts = split_name_parts(name, ignore_case=True)
    if parts is None or shard_of(filename)[0] is None:
        return filename
    prefix, _, count = parts
    return f"{filename[: -len(name)]}{prefix}-of-{count:05d}"


def quant_of(filename: str) -> str | None:
    """The quant tag from a file's name, else from its folder name (bartowski's Q8_0/x-0001-of-2)."""
    parts = filename.split("/")
    for part in reversed(parts):
        quant = quant_of_filename(part)
        if quant:
            return quant
    return None

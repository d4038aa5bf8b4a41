"""The parser for model references a user types: a registry name, a Hub repo, address or file, or a local path."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from localgen.errors import UsageError
from localgen.shorten import shown_name
from localgen.stopping import printable_escaped
from localgen.typed_paths import expand_user_path, is_existing_file, is_existing_folder, refuse_file_as_folder

# llama.cpp's quant names (ggml's types, llama_ftype): Q4_K_M, IQ4_XS, the ternary TQ1_0 and TQ2_0, the 4-bit floats
# MXFP4 (gpt-oss's, MXFP4_MOE as llama-quantize writes it) and NVFP4, and the unquantized ones
QUANT_PATTERN = re.compile(
    r"(?<![A-Za-z0-9])([IT]?Q\d(?:_[A-Z0-9]+)*|MXFP4(?:_MOE)?|NVFP4|BF16|F16|F32|FP16|FP32)(?![A-Za-z0-9])",
    re.IGNORECASE,
)
HUB_HOSTS = ("huggingface.co", "hf.co", "www.huggingface.co")  # www. and http:// lead to https://huggingface.co
HUB_PREFIXES = (*(f"{scheme}{host}/" for scheme in ("", "https://", "http://") for host in HUB_HOSTS), "hf://")
OLLAMA_HOSTS = ("ollama.com", "www.ollama.com", "registry.ollama.ai")  # addresses of Ollama's registry
OLLAMA_PAGES = frozenset({"blog", "docs", "download", "models", "pricing", "public", "search", "settings", "signin",
                          "signup"})  # ollama.com's pages, named where a user's models would be
OLLAMA_HUB_HINT = "find the model's GGUF repo on Hugging Face and give it as ORG/REPO[:QUANT]"
DEFAULT_TAG = "latest"  # Ollama's tag for a model's default version: here, the default quant
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # a registry name, and each half of a repo id
HUB_NAME_CHARS = 96  # the longest owner or repo name the Hub takes, and here the longest quant tag
# what no quant tag holds, as no file name on the Hub carries it in one: whitespace and control characters, a folder's
# '/' or '\', a wildcard (nor what shows as nothing, U+200B, or turns text around, U+202E: not printable); a tag may
# hold anything else, as a mixed quant's '+' (m.iq4_nl+q8_0.gguf: IQ4_NL+Q8_0)
NO_QUANT_CHARS = re.compile(r"[\s\x00-\x1f\x7f/\\*?]")
EMPTY_REFERENCE = "empty model reference"


class OllamaAddressError(UsageError):
    """An address of a model in Ollama's registry, which localgen does not read; model is its NAME[:TAG]."""

    def __init__(self, text: str, model: str) -> None:
        super().__init__(f"'{text}' is a model of Ollama's registry, which localgen does not read",
                         hint=OLLAMA_HUB_HINT)
        self.model = model


@dataclass(frozen=True)
class ModelRef:
    """A parsed model reference: a registry name, a Hub repo (and file), or a local path (with name: a models.toml
    entry's own file)."""

    text: str
    name: str | None = None
    repo: str | None = None
    filename: str | None = None
    quant: str | None = None
    path: Path | None = None

    @property
    def kind(self) -> str:
        """One of 'path', 'file', 'repo' or 'name'."""
        if self.path is not None:
            return "path"
        if self.filename is not None:
            return "file"
        return "repo" if self.repo is not None else "name"

    @property
    def canonical(self) -> str:
        """The reference as localgen writes it: a Hub model as ORG/REPO[:QUANT] or ORG/REPO/FILE however it was typed
        (hf://, hf.co/, an address, a quant in lower case, :latest); a name or a path as typed."""
        if self.repo is None or self.path is not None:
            return self.text
        if self.filename is not None:
            return f"{self.repo}/{self.filename}"
        return f"{self.repo}:{self.quant}" if self.quant else self.repo


def hub_model_named(repo: str, quant: str | None, filename: str) -> str:
    """A Hub file's model as localgen writes it (ModelRef.canonical): ORG/REPO:QUANT by the quant its name carries,
    ORG/REPO/FILE where it carries none."""
    return ModelRef(repo, repo=repo, quant=quant, filename=None if quant else filename).canonical


def normalize_quant(quant: str) -> str:
    """Quant tags compare case-insensitively: q4_k_m is Q4_K_M."""
    return quant.strip().upper()


def quant_of_filename(filename: str) -> str | None:
    """The quant tag a GGUF file name carries (the last one), if any."""
    found = QUANT_PATTERN.findall(Path(filename).name)
    return normalize_quant(found[-1]) if found else None


def _split_quant(text: str) -> tuple[str, str | None]:
    """Split 'thing:QUANT' into ('thing', 'QUANT'); Ollama's 'thing:latest' is the thing's default quant."""
    base, sep, quant = text.rpartition(":")
    if not sep:
        return text, None
    if not quant:
        raise UsageError(f"model reference '{shown_name(text)}' has an empty quant after ':'",
                         hint=_quant_written(base))
    if len(quant) > HUB_NAME_CHARS:  # no file's quant tag is as long: a name pasted after the ':'
        tag = "" if _names_file(base) else f"a quant is a tag of at most {HUB_NAME_CHARS} characters, e.g. Q8_0: "
        raise UsageError(f"model reference '{shown_name(text)}' has a quant of {len(quant):,} characters after ':'",
                         hint=tag + _quant_written(base))
    if NO_QUANT_CHARS.search(quant.strip()) or not quant.isprintable():  # no quant, tag or file the Hub lists is so
        tag = ("" if _names_file(base) else
               "a quant holds no space, '/', '\\', '*', '?' or a character that does not print: ")
        raise UsageError(f"model reference '{shown_name(printable_escaped(text))}' has "
                         f"'{shown_name(printable_escaped(quant))}' after ':', which is no "
                         "quant", hint=tag + _quant_written(base))
    return base, None if quant.strip().lower() == DEFAULT_TAG else normalize_quant(quant)


def _names_file(base: str) -> bool:
    """Whether what a reference names before its ':' is a model file (ORG/REPO/FILE.gguf, FILE.gguf)."""
    return base.lower().endswith(".gguf")


def _repo_alone_picks() -> bool:
    """Whether ORG/REPO alone picks the quant that fits best here for the command running, as a run's or a pull's
    does (a removal's, models rm, does not)."""
    from localgen.hub_errors import running_command

    return running_command() != "models rm"


def _quant_written(base: str) -> str:
    """How to write the reference typed with base before its ':': base:QUANT, a repo alone too where it picks the
    quant that fits (_repo_alone_picks); a file without it."""
    shown = shown_name(base)
    if _names_file(base):
        return f"a file takes no quant: drop the ':', writing {shown} alone"
    alone = f", or {shown} alone for the quant that fits best here" if "/" in base and _repo_alone_picks() else ""
    return f"write {shown}:QUANT, e.g. {shown}:Q4_K_M{alone}"


def looks_like_path(text: str, base: Path | None = None) -> bool:
    """True for references that mean a file on disk: an explicit path ($VAR/... too, . and .. as ./ and ../),
    NAME.gguf or DIR/NAME.gguf, an existing file with a directory part, or an existing folder with a / after it (DIR/,
    as Tab completes it), taken from base (else the current folder). A bare name is the registry's even where a file
    of that name is about."""
    if text.startswith(("/", "./", "../", "~", "$")) or text in (".", ".."):
        return True
    parts = text.split("/")
    if text.lower().endswith(".gguf") and len(parts) < 3:  # ORG/REPO/FILE.gguf is the shortest Hub file
        return True
    there = str(base / text) if base is not None else text
    return len(parts) >= 2 and (is_existing_file(there) or (text.endswith("/") and is_existing_folder(there)))


def parse_reference(text: str, base: Path | None = None) -> ModelRef:
    """Parse any accepted model reference, a relative path's file looked for in base (a models.toml's folder) where
    given, else in the current folder; raise UsageError for malformed ones."""
    raw = text.strip()
    if not raw:
        raise UsageError(EMPTY_REFERENCE, hint="name a model: NAME, ORG/REPO[:QUANT] or path/to/model.gguf; "
                                                       "`localgen models list --all` lists the names")
    if looks_like_path(raw, base):
        path = expand_user_path(raw)
        refuse_file_as_folder(raw, path)
        return ModelRef(text=raw, path=path)
    ollama = ollama_model(raw)
    if ollama is not None:
        raise OllamaAddressError(raw, ollama)
    for prefix in hub_prefixes():
        if raw.lower().startswith(prefix):
            return _parse_hub(_without_web_view(raw[len(prefix):], raw), raw)
    if raw.lower().startswith(("http://", "https://")):
        raise UsageError(f"'{raw}' is not an address on the Hugging Face Hub ({_hub_named()})",
                         hint="localgen downloads models from the Hub: give ORG/REPO or its huggingface.co address; "
                              "a .gguf from elsewhere, download it yourself and pass its path")
    if "/" in raw:
        return _parse_hub(raw.rstrip("/"), raw)  # ORG/REPO/ as an address's path may end
    name, quant = _split_quant(raw)
    if not NAME_PATTERN.fullmatch(name):
        raise UsageError(f"'{shown_name(raw)}' is not a model name, repo or path",
                         hint=_named_here_hint(raw, base))
    return ModelRef(text=raw, name=name.lower(), quant=quant)


def _named_here_hint(raw: str, base: Path | None) -> str:
    """The hint for text that is no model name: the path that means a file or folder of that name here (in base,
    where given), as a bare name always means the registry's, else where the names are listed."""
    from localgen.model_file_errors import named_here_hint

    names = "see `localgen models list --all` for names"
    here = named_here_hint(raw, base / raw if base is not None else Path(raw))
    return f"{here}; or {names}" if here else names


def ollama_model(text: str) -> str | None:
    """The model an address of Ollama's registry names, as `ollama run` takes it: NAME[:TAG] of
    ollama.com/library/NAME[:TAG] (registry.ollama.ai's too, a scheme before it or none), USER/NAME[:TAG] of a user's;
    None for anything else."""
    body = re.sub(r"^https?://", "", text.strip(), flags=re.IGNORECASE)
    host, _, path = body.partition("/")
    parts = [part for part in path.split("?", 1)[0].split("#", 1)[0].split("/") if part]
    if host.lower() not in OLLAMA_HOSTS or len(parts) != 2 or parts[0].lower() in OLLAMA_PAGES:
        return None  # the site's own pages: ollama.com/library, /download, /search...
    return parts[1] if parts[0] == "library" else "/".join(parts)


def _endpoint() -> str:
    """The Hub localgen downloads from (HF_ENDPOINT, a mirror, else huggingface.co), as huggingface_hub has it but for
    spaces around it (the Hub's refusal of those names them) and a slash at its end."""
    from localgen.hub_settings import hub_endpoint  # here: only huggingface_hub.constants (~1 ms), no Hub client

    return hub_endpoint().strip().rstrip("/")


def _hub_named() -> str:
    """The Hub as a refusal of another site's address names it: HF_ENDPOINT's, or huggingface.co's when that is empty
    (only huggingface.co's addresses are taken then)."""
    return _endpoint() or "https://huggingface.co; HF_ENDPOINT is set but empty"


def hub_prefixes() -> tuple[str, ...]:
    """The beginnings of a Hub address, in lower case: huggingface.co's and hf.co's, and those of the HF_ENDPOINT
    mirror that localgen downloads from (with its scheme or without)."""
    endpoint = _endpoint().lower()
    if "://" not in endpoint:
        return HUB_PREFIXES
    bare = endpoint.split("://", 1)[1]
    host = bare.split("/", 1)[0]  # without its scheme only a host no ORG can be: a dot or a port in it
    return (*HUB_PREFIXES, f"{endpoint}/", *([f"{bare}/"] if "." in host or ":" in host else []))


_NOT_MODELS = {"datasets": "a dataset", "spaces": "a Space (an app)"}  # Hub addresses of what is no model repo


def _without_web_view(body: str, raw: str) -> str:
    """A Hub page's address as a reference: ORG/REPO/blob/main/FILE (or resolve/, tree/; a query, a fragment and
    %-escapes as a browser gives them) is ORG/REPO/FILE, and so is the repo page's ORG/REPO?show_file_info=FILE (the
    address of a file's panel there); a folder's, ORG/REPO/tree/main/FOLDER, is the model in it, ORG/REPO/FOLDER/*.gguf
    (the shards of a split model, as big models keep a quant's). A dataset's or a Space's address is refused as what it
    is."""
    from urllib.parse import parse_qs, unquote

    address, _, query = body.split("#", 1)[0].partition("?")
    path = unquote(address).rstrip("/")
    parts = path.split("/")
    if parts[0].lower() in _NOT_MODELS and len(parts) >= 3:
        raise UsageError(f"'{raw}' is {_NOT_MODELS[parts[0].lower()]} on the Hugging Face Hub, not a model",
                         hint="localgen runs GGUF models: give a model repo as ORG/REPO or "
                              "https://huggingface.co/ORG/REPO")
    if len(parts) >= 4 and parts[2] in ("blob", "resolve", "tree"):
        folder = parts[2] == "tree" and len(parts) > 4 and not parts[-1].lower().endswith(".gguf")
        revision, parts = parts[3], parts[:2] + parts[4:] + (["*.gguf"] if folder else [])
        if revision != "main":
            raise UsageError(f"'{revision}' is a revision of {'/'.join(parts[:2])}: localgen downloads from main",
                             hint=f"use {'/'.join(parts)}, which is main's")
    shown = parse_qs(query).get("show_file_info")
    if len(parts) == 2 and shown and shown[0].strip("/"):
        parts.append(shown[0].strip("/"))  # the repo's page with a file's panel open
    return "/".join(parts)  # the repo's page (or a file named in it), as the address bar has it


def _parse_hub(body: str, raw: str) -> ModelRef:
    """Parse ORG/REPO[:QUANT] or ORG/REPO/FILE.gguf."""
    parts = body.split("/")
    if len(parts) >= 3 and parts[-1].lower().endswith(".gguf"):
        repo = "/".join(parts[:2])
        filename = "/".join(parts[2:])
        _check_repo(repo, raw)
        check_safe_filename(filename)
        return ModelRef(text=raw, repo=repo, filename=filename, quant=quant_of_filename(filename))
    repo, quant = _split_quant(body)
    _check_repo(repo, raw)
    return ModelRef(text=raw, repo=repo, quant=quant)


def is_repo_id(repo: str) -> bool:
    """Whether repo is a Hugging Face repo id, ORG/NAME, with safe characters, each part as long as the Hub takes."""
    parts = repo.split("/")
    return len(parts) == 2 and all(NAME_PATTERN.fullmatch(p) and ".." not in p and len(p) <= HUB_NAME_CHARS
                                   for p in parts)


def _check_repo(repo: str, raw: str) -> None:
    """Reject repo ids that are not ORG/NAME with safe characters, each part as long as the Hub takes."""
    if not is_repo_id(repo):
        parts = repo.split("/")
        long = len(parts) == 2 and any(len(part) > HUB_NAME_CHARS for part in parts)
        raise UsageError(f"'{shown_name(raw)}' is not a valid Hugging Face repo reference",
                         hint=f"the Hub's owner and repo names are at most {HUB_NAME_CHARS} characters each" if long
                         else "write ORG/REPO, ORG/REPO:QUANT or ORG/REPO/FILE.gguf")


def check_safe_filename(filename: str) -> None:
    """Reject file names that could escape a directory: '..', absolute paths, backslashes."""
    parts = filename.split("/")
    if (filename.startswith("/") or "\\" in filename or any(p in ("", ".", "..") for p in parts)
            or ":" in filename or "\x00" in filename):
        raise UsageError(f"unsafe file name '{shown_name(filename)}'",
                         hint="file names must be relative paths inside the repository")

"""Hub errors: turn huggingface_hub and HTTP exceptions into a HubError with a hint."""

from __future__ import annotations

import errno
import inspect
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from localgen.errors import DISK_FULL_ERRNOS, UNWRITABLE_ERRNOS, HubError, LocalgenError
from localgen.hub_settings import hub_cache_dir, hub_endpoint
from localgen.hub_slips import with_known_repo
from localgen.hub_types import NotInRepoError, RepoNotFoundError
from localgen.links import refusing_place
from localgen.offline_words import offline_hint
from localgen.storage import unwritable_hint

if TYPE_CHECKING:
    from localgen.references import ModelRef
    from localgen.registry import ModelSpec

# Exception class names (httpx2, as huggingface_hub 2.x raises them) for a connection lost mid-response.
_DROPPED = {"RemoteProtocolError", "ReadError", "ProtocolError"}
# True of every command: a downloaded model is found in the cache before the Hub is asked for anything.
_WITHOUT_NETWORK = "models already downloaded work without the network: `localgen models list` shows them"
# How to get at a gated or private repo; what to check when the Hub cannot be reached.
LOGIN = "log in with `hf auth login` or set HF_TOKEN"
_NET_HINT = f"check your network connection, HF_ENDPOINT and proxy settings; {_WITHOUT_NETWORK}"
# Errors of a program's own making: raised in localgen's code they are its bugs, for its internal-error path to report.
_PROGRAMMING_ERRORS = (TypeError, AttributeError, NameError, KeyError, IndexError, AssertionError)
# Another way to get a repo's model than the Hub (reinstalling a damaged package), by repo id in lower case.
_ALTERNATIVES: dict[str, str] = {}


def offer_alternative(repo: str, way: str | None) -> None:
    """Name another way to get a repo's model in the hints of its Hub errors (None: forget it)."""
    if way is None:
        _ALTERNATIVES.pop(repo.lower(), None)
    else:
        _ALTERNATIVES[repo.lower()] = way


def with_alternative(hint: str | None, repo: str) -> str | None:
    """A hint led by the other way to get the repo's model, when there is one."""
    way = _ALTERNATIVES.get(repo.lower())
    if way is None or (hint is not None and way in hint):
        return hint
    return f"{way}, or {hint}" if hint else way


@contextmanager
def blamed_on_entry(spec: ModelSpec | None, ref: ModelRef) -> Iterator[None]:
    """Within this block, a Hub error that comes of what a user's models.toml entry says (a misspelt repo, a quant or
    file the repo lacks) names that entry and says to fix it there."""
    try:
        yield
    except HubError as exc:
        raise entry_error(exc, spec, ref) from exc


def entry_error(exc: HubError, spec: ModelSpec | None, ref: ModelRef) -> HubError:
    """The Hub error exc, naming the user's models.toml entry whose repo, quant or file it comes of (exc itself when
    it comes of none: a built-in entry, the network, a quant typed after a repo; one typed after a registry name that
    its repo lacks gets a hint that offers quants after the name as typed)."""
    key = _blamed_key(exc, spec, ref)
    if isinstance(exc, NotInRepoError) and exc.key == "quant" and ref.kind == "name" and ref.quant is not None:
        return _with_name_typed(exc, ref)
    if isinstance(exc, OfflineError) and ref.kind in ("repo", "file"):  # said of the repo alone: of the model typed
        return offline_error(exc.repo, ref.quant, ref.filename, ref.text)
    if spec is None or key is None:
        return exc
    if isinstance(exc, RepoNotFoundError):
        hint = f"fix that entry's repo, checking its ORG/REPO spelling; for a private repo, {LOGIN}"
    elif isinstance(exc, NotInRepoError) and exc.choices:
        hint = f"fix that entry's {key}; {exc.choices}"
    else:
        hint = f"fix that entry's {key}" + (f"; {exc.hint}" if exc.hint else "")
    message = f"{exc.message}{_blame(key, spec)}"
    if isinstance(exc, NotInRepoError):
        return NotInRepoError(message, hint, key=exc.key, choices=exc.choices)
    return type(exc)(message, hint)


def _with_name_typed(exc: NotInRepoError, ref: ModelRef) -> NotInRepoError:
    """exc for a quant typed after a registry name (tiny:q8) that its repo lacks, its hint offering the name as typed
    with the quants meant (tiny:Q8_0), where it offered the repo's."""
    from localgen.hub_choice import lacking_quant_hint

    hint = lacking_quant_hint(ref.text.rpartition(":")[0], exc.meant, exc.choices)
    return NotInRepoError(exc.message, hint, key=exc.key, choices=exc.choices, meant=exc.meant)


def entry_blame(exc: HubError, spec: ModelSpec | None, ref: ModelRef) -> str:
    """What entry_error adds to exc's message: the user's models.toml entry it comes of, ` (the quant of [models.NAME]
    in FILE)`; empty when it comes of none."""
    key = _blamed_key(exc, spec, ref)
    return _blame(key, spec) if spec is not None and key is not None else ""


def _blame(key: str, spec: ModelSpec) -> str:
    """The words that name the key of an entry that a Hub error comes of."""
    return f" (the {key} of {spec.origin})"


def _blamed_key(exc: HubError, spec: ModelSpec | None, ref: ModelRef) -> str | None:
    """Which key of a user's entry a Hub error comes of: repo, quant or file; None when of none of them."""
    if spec is None or not spec.repo:
        return None
    if isinstance(exc, RepoNotFoundError) or (isinstance(exc, NotInRepoError) and exc.key == "repo"):
        key = "repo"
    elif isinstance(exc, NotInRepoError) and ref.quant is None and ref.filename is None:
        key = exc.key  # the quant or file the entry gives, not one typed on the command line
    else:
        return None
    return key if spec.user_gives(key) else None


class OfflineError(HubError):
    """The Hub was needed for repo, and offline mode (from the environment, or huggingface_hub's own) kept it away."""

    def __init__(self, message: str, hint: str | None, *, repo: str) -> None:
        super().__init__(message, hint)
        self.repo = repo


def offline_error(repo: str, quant: str | None, filename: str | None, reference: str | None) -> OfflineError:
    """The error for a model that is needed offline (offline mode from the environment): not in the local cache, or,
    where its files are, not to be asked about on the Hub."""
    from localgen.hub_cache import cached_model

    ref = reference or (f"{repo}/{filename}" if filename else f"{repo}:{quant}" if quant else repo)
    hint = with_known_repo(with_alternative(offline_hint(ref), repo), ref, repo)
    if cached_model(repo, quant=quant, filename=filename) is not None:
        return OfflineError(f"the Hub cannot be asked about {ref}, downloaded here, as the network is off (offline "
                            "mode)", hint, repo=repo)
    return OfflineError(f"{ref} is not in the local cache and the network is off (offline mode)", hint, repo=repo)


_running_command: str | None = None  # the localgen command running now (`pull`, `run`), set by the CLI


def set_running_command(name: str | None) -> None:
    """Record which localgen command is running, so that hints can name what to do next."""
    global _running_command
    _running_command = name


def running_command() -> str | None:
    """The localgen command running now (`pull`, `run`), None outside the CLI."""
    return _running_command


def error_chain(exc: BaseException) -> list[BaseException]:
    """The exception and its causes/contexts (an error re-raised from itself is its own cause: its context follows)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None:
        seen.append(current)
        current = next((e for e in (current.__cause__, current.__context__) if e is not None and e not in seen), None)
    return seen


def _in_hub_cache(filename: object, *, above: bool = False) -> bool:
    """True when an OSError's file name is the Hugging Face cache folder or in it (above: or a folder above it, which
    a download creates); an empty name is none."""
    if not isinstance(filename, (str, os.PathLike)) or not os.fspath(filename):
        return False
    path, cache = Path(os.path.abspath(filename)), Path(os.path.abspath(hub_cache_dir()))
    return path == cache or cache in path.parents or (above and path in cache.parents)


def _class_names(exc: BaseException) -> set[str]:
    """Class names along an exception's MRO (httpx and httpx2 differ by module only)."""
    return {cls.__name__ for cls in type(exc).__mro__}


def http_status(exc: BaseException) -> int | None:
    """The HTTP status of an HTTP error, if any."""
    status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def map_hub_error(exc: BaseException, *, repo: str, filename: str | None = None) -> LocalgenError:
    """Turn a huggingface_hub / HTTP exception into a HubError with a hint (led by another way to get the model);
    a mistake in localgen's own code (a TypeError, an AttributeError not raised by huggingface_hub) is raised as it
    is, for the internal-error path to report, not returned."""
    if isinstance(exc, LocalgenError):
        return exc
    error = _hub_error(exc, repo=repo, filename=filename)
    error.hint = with_alternative(error.hint, repo)
    return error


def _hub_error(exc: BaseException, *, repo: str, filename: str | None) -> LocalgenError:
    """The HubError for a huggingface_hub / HTTP exception; a mistake in localgen's own code is raised as it is."""
    if isinstance(exc, _PROGRAMMING_ERRORS) and not _raised_in_hub_client(exc):
        raise exc
    where = _where(repo, filename)
    for err in error_chain(exc):
        status = http_status(err)
        error = (_hf_error(err, status, repo=repo, filename=filename)
                 or _http_status_error(status, repo=repo, where=where)
                 or _network_error(err, _class_names(err), repo=repo, filename=filename)
                 or _filesystem_error(err, where=where))
        if error is not None:
            return error
    if isinstance(exc, _hf_kind("LocalEntryNotFoundError")):
        return _unreachable_error(f"and {where} is not cached")
    return HubError(f"download of {where} failed: {type(exc).__name__}: {exc}")


def _raised_in_hub_client(exc: BaseException) -> bool:
    """Whether exc was raised within a call into huggingface_hub, below localgen's last frame: a reply it could not
    read (JSON of another shape than the Hub's: KeyError 'id', an error body that is a list), not localgen's mistake;
    but not a call made with arguments the function does not take (a keyword renamed in a new huggingface_hub), a
    TypeError raised in the innermost frame as the decorators around the function pass them on to it."""
    frames = []
    at = exc.__traceback__
    while at is not None:
        frames.append(at.tb_frame)
        at = at.tb_next
    ours = [index for index, frame in enumerate(frames) if _in_package(_module(frame), "localgen")]
    below = frames[ours[-1] + 1 if ours else 0:]
    hub = [frame for frame in below if _in_package(_module(frame), "huggingface_hub")]
    called_wrongly = isinstance(exc, TypeError) and below[-1:] == hub[-1:] and all(map(_is_wrapper, hub))
    return bool(hub) and not called_wrongly


def _module(frame: FrameType) -> str:
    """The name of the module a frame runs in."""
    return str(frame.f_globals.get("__name__", ""))


def _is_wrapper(frame: FrameType) -> bool:
    """Whether a frame runs a decorator's wrapper, a closure that takes (*args, **kwargs) to pass on to the function
    it wraps (huggingface_hub's validate_hf_hub_args and flag_as_download_call), not a function's own body."""
    code = frame.f_code
    passes_on = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS
    return (code.co_flags & passes_on == passes_on and code.co_argcount == code.co_kwonlyargcount == 0
            and bool(code.co_freevars))


def _in_package(module: str, package: str) -> bool:
    """Whether a module's name is the package's or one of its modules'."""
    return module == package or module.startswith(f"{package}.")


def _hf_kind(name: str) -> tuple[type, ...]:
    """The huggingface_hub error class of that name, for isinstance (none in versions without it)."""
    from huggingface_hub import errors as hf_errors

    cls = getattr(hf_errors, name, None)
    return (cls,) if isinstance(cls, type) else ()


def _where(repo: str, filename: str | None) -> str:
    """What a Hub error names: the repo's file, or the repo."""
    return f"{repo}/{filename}" if filename else repo


def _hf_error(err: BaseException, status: int | None, *, repo: str, filename: str | None) -> HubError | None:
    """The error for one of huggingface_hub's typed errors (gated, not found, offline), else None."""
    if isinstance(err, _hf_kind("GatedRepoError")):
        return HubError(f"{repo} is a gated repository: you must accept its terms and be logged in",
                        hint=f"request access at {hub_endpoint().rstrip('/')}/{repo}, then {LOGIN}")
    if isinstance(err, _hf_kind("RepositoryNotFoundError")):
        private = " (or it is private)" if status in (401, 403) else ""
        return RepoNotFoundError(f"repository {repo} not found on the Hugging Face Hub{private}",
                                 hint=with_known_repo(f"check the ORG/REPO spelling; for a private repo, "
                                                      f"{LOGIN}", repo, repo))
    if isinstance(err, _hf_kind("RevisionNotFoundError")):
        return HubError(f"{repo}: the revision localgen asked for no longer exists",
                        hint="the repository changed; run the command again")
    if isinstance(err, (*_hf_kind("RemoteEntryNotFoundError"), *_hf_kind("EntryNotFoundError"))) and status:
        return HubError(f"{_where(repo, filename)} not found on the Hub",
                        hint="the repository changed; run the command again")
    if isinstance(err, _hf_kind("OfflineModeIsEnabled")):
        return offline_error(repo, None, filename, None)
    return None


def _http_status_error(status: int | None, *, repo: str, where: str) -> HubError | None:
    """The error for an HTTP error status (denied, rate-limited, server error, refused), else None."""
    if status in (401, 403):
        return HubError(f"access to {repo} was denied (HTTP {status})", hint=f"if it is gated or private, {LOGIN}")
    if status == 429:
        return HubError("the Hugging Face Hub is rate-limiting requests (HTTP 429)",
                        hint="wait a minute and try again, or log in to get a higher limit")
    if status == 404:  # no error code says what is missing: a mirror's or a proxy's answer
        return HubError(f"{where} not found on the Hugging Face Hub at {hub_endpoint().rstrip('/')} (HTTP 404)",
                        hint="check the ORG/REPO spelling, and HF_ENDPOINT if you use a mirror")
    if status is not None and status >= 500:
        return HubError(f"the Hugging Face Hub returned a server error (HTTP {status}) for {where}",
                        hint=f"the Hub may be down: try again later; {_WITHOUT_NETWORK}")
    if status is not None and status >= 400:
        return HubError(f"the Hugging Face Hub refused the request for {where} (HTTP {status})")
    return None


def _network_error(err: BaseException, names: set[str], *, repo: str, filename: str | None) -> HubError | None:
    """The error for a network failure (timeout, dropped connection, a reply not the Hub's, no route), else None."""
    where = _where(repo, filename)
    if _is_timeout(err, names):
        setting, seconds = _timeout_setting(err, filename)
        return HubError(f"timed out talking to the Hugging Face Hub ({hub_endpoint()}) for {where}: no answer in "
                        f"{seconds:g} s", hint=f"a slow network or server may need longer: raise {setting} (seconds); "
                                               f"{_NET_HINT}")
    if names & _DROPPED:
        doing = f"downloading {where}" if filename else f"reading the file list of {repo}"
        return HubError(f"the connection to the Hugging Face Hub dropped while {doing}",
                        hint="run the command again")
    if "JSONDecodeError" in names:
        return HubError(f"the reply from {hub_endpoint()} for {where} is not the Hugging Face Hub's",
                        hint="a proxy or a network login page may be answering instead; check the network and "
                             "HF_ENDPOINT")
    if isinstance(err, ConnectionError) or names & {"ConnectError", "ConnectionError", "NetworkError", "ProxyError"}:
        return _unreachable_error(f"for {where}")
    return None


def timed_out(exc: BaseException) -> bool:
    """Whether a request to the Hub failed for want of an answer in time (its timeout, or a connect timeout)."""
    return any(_is_timeout(err, _class_names(err)) for err in error_chain(exc))


def _is_timeout(err: BaseException, names: set[str]) -> bool:
    """Whether one exception of a chain is a timeout (names: its class names)."""
    return isinstance(err, TimeoutError) or any("Timeout" in n for n in names)


def _timeout_setting(err: BaseException, filename: str | None) -> tuple[str, float]:
    """The huggingface_hub setting that bounds the request that timed out, and its value: a file's bytes (a GET of
    it) wait HF_HUB_DOWNLOAD_TIMEOUT, a listing or a file's metadata (HEAD) HF_HUB_ETAG_TIMEOUT."""
    from huggingface_hub import constants

    try:
        method = getattr(getattr(err, "request", None), "method", None)
    except RuntimeError:  # httpx's error raised without its request
        method = None
    if filename and method == "GET":
        return "HF_HUB_DOWNLOAD_TIMEOUT", constants.HF_HUB_DOWNLOAD_TIMEOUT
    return "HF_HUB_ETAG_TIMEOUT", constants.HF_HUB_ETAG_TIMEOUT


def failed_on_disk(exc: BaseException) -> bool:
    """Whether an error came of the file system (a file of the cache that could not be written, a full disk), not of
    the Hub or the network."""
    return any(isinstance(err, OSError) and "Consistency check failed" not in str(err)  # that: a dropped connection
               and (err.filename is not None or _filesystem_error(err, where="") is not None)
               for err in error_chain(exc))


def _unreachable_error(detail: str) -> HubError:
    """The error for a Hub that cannot be reached, with what it was needed for (detail)."""
    return HubError(f"cannot reach the Hugging Face Hub ({hub_endpoint()}) {detail}", hint=_NET_HINT)


def _filesystem_error(err: BaseException, *, where: str) -> HubError | None:
    """The error for a download the disk could not take (full, unwritable, too large, incomplete), else None."""
    if not isinstance(err, OSError):
        return None
    if err.errno in DISK_FULL_ERRNOS:
        return HubError(f"no space left on the disk while downloading {where} ({os.strerror(err.errno)})",
                        hint=f"free some space in {hub_cache_dir()} (see `localgen models list`)")
    refused = hub_cache_refusal(err, doing="write to", above=True)
    if refused is not None:
        return refused
    if err.errno == errno.EFBIG:
        return HubError(f"{where} is too large for the file system of {hub_cache_dir()}",
                        hint="some file systems (FAT32) hold files of at most 4 GiB; set HF_HUB_CACHE to a "
                             "folder on another file system")
    if "Consistency check failed" in str(err):
        return HubError(f"the download of {where} was incomplete (the connection dropped)",
                        hint="run the command again")
    return None


def hub_cache_refusal(err: BaseException, *, doing: str = "use", above: bool = False) -> HubError | None:
    """The error for a file or folder of the Hugging Face cache (a rename's either name) that its permissions (or a
    read-only mount) keep from use, a download's or any other command's, naming the place that refuses (its links
    followed: a snapshot entry's blobs folder), else None (above: a folder above the cache too, a download's)."""
    if not isinstance(err, OSError) or err.errno not in {*UNWRITABLE_ERRNOS, errno.ENOTDIR}:
        return None
    name = next((n for n in (err.filename, err.filename2) if _in_hub_cache(n, above=above)), None)
    if name is None:
        return None
    place = refusing_place(name) if isinstance(err, PermissionError) else Path(name)
    return HubError(f"cannot {doing} the Hugging Face cache ({place}): {os.strerror(err.errno)}",
                    hint=unwritable_hint(err, place.parent, "set HF_HUB_CACHE (or HF_HOME) to a folder you can write "
                                         "to, or fix its permissions", setting="HF_HUB_CACHE (or HF_HOME)"))


def unread_cache_warnings(refused: Iterable[OSError]) -> list[str]:
    """A listing's warning for each place of the Hugging Face cache its permissions kept it from reading, once each:
    the models there are not listed."""
    said: list[str] = []
    for err in refused:
        error = hub_cache_refusal(err, doing="read")
        text = (f"{error.message}; the models there are not listed (hint: {error.hint})" if error is not None
                else f"cannot read {err.filename}: {err.strerror}; the models there are not listed")
        if text not in said:
            said.append(text)
    return said


def stalled_message(what: str) -> str:
    """The error for a download that huggingface_hub tried again after a timeout, until it gave up: the Hub went
    quiet, and stayed so (a wait of about six timeouts in all, not the one that "no answer in 10 s" would say)."""
    from huggingface_hub import constants

    return (f"the download of {what} stalled: the Hugging Face Hub ({hub_endpoint()}) sent nothing for "
            f"{constants.HF_HUB_DOWNLOAD_TIMEOUT:g} s, and nothing when asked again")

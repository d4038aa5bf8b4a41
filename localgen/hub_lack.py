"""What a Hub repo has, or lacks, of a model that is not downloaded: as localgen last listed it, or as the Hub lists
it now."""

from __future__ import annotations

from collections.abc import Sequence

from localgen import hub, hub_cache
from localgen.config import settings
from localgen.errors import HubError, ModelNotFoundError
from localgen.hub_slips import with_downloaded_repo
from localgen.hub_types import HubFile
from localgen.references import ModelRef, normalize_quant
from localgen.registry import ModelSpec, hub_target, load_registry


def refuse_lacking(text: str, *, failed: HubError | None = None) -> None:
    """For `models show` of a Hub model not downloaded, before `localgen pull` is suggested: online, refuse a quant or
    file its repo lacked when localgen last listed it and lacks still (the Hub asked again), and ask the Hub for a
    repo never listed, saying what it has (or lacks); offline, say a repo was never listed and how to list it.
    failed: the Hub's error to the listing just asked, which is not asked again."""
    from localgen.offline_words import after_leaving_offline, localgen_command, pull_command

    registry = load_registry(settings().user_registry)
    ref = registry.reference(text)
    spec = registry.spec_for(ref)
    if ref.path is not None:
        return
    repo, quant, filename = hub_target(ref, spec)
    never_listed = ref.kind != "name" and hub_cache.load_listing(repo) is None
    if never_listed and settings().offline:
        listing_hint = after_leaving_offline(f"`{localgen_command('models show', ref.text)}` lists what the repo has")
        raise ModelNotFoundError(f"model '{ref.text}' is not downloaded, and localgen has never listed {repo}",
                                 hint=with_downloaded_repo(listing_hint, ref.text, repo))
    if settings().offline:
        return
    if failed is not None:  # the Hub just asked
        lack = (failed, failed.message) if never_listed else listed_lack(repo, quant, filename)
    else:
        lack = _hub_lack(repo, quant, filename) if never_listed else known_lack(repo, quant, filename)
    if lack is not None:
        raise lacking_refusal(ref, spec, lack) from None
    listing = hub_cache.load_listing(repo)
    if ref.kind == "repo" and quant is None and listing is not None:
        from localgen.hub_choice import model_labels

        raise ModelNotFoundError(
            f"model '{ref.text}' is not downloaded; {repo} has {', '.join(model_labels(listing.files))}",
            hint=f"`{pull_command(ref.text)}` downloads the quant that fits best here; "
                 f"`{localgen_command('fit', ref.text)}` compares them")


def typed_quant_lack(ref: ModelRef, spec: ModelSpec, repo: str, quant: str) -> str | None:
    """For `models show` of a quant typed after a registry name (tiny:q8), other than its entry's, none of whose files
    is here: refuse it where its repo lacks it (as localgen last listed it; online, as the Hub lists it now, asked
    where localgen never listed the repo), with the quants meant after the name as typed; else None, or where that is
    not known (offline, the repo never listed; the Hub not reached), what `downloaded: no` then says."""
    from localgen.hub_types import NotInRepoError, RepoNotFoundError
    from localgen.offline_words import online_pull, pull_command

    if hub_cache.load_listing(repo) is not None:
        lack = known_lack(repo, quant, None)
    elif settings().offline:
        return (f"localgen has never listed {repo}, so whether it has a {quant} file is not known; "
                f"{online_pull(ref.text, 'downloads it if it has')}")
    else:
        lack = _hub_lack(repo, quant, None)
    if lack is None:
        return None
    exc = lack[0]
    if not isinstance(exc, (NotInRepoError, RepoNotFoundError)):
        return (f"whether {repo} has a {quant} file is not known ({exc.message}); `{pull_command(ref.text)}` "
                "downloads it if it has")
    raise lacking_refusal(ref, spec, lack) from None


def lacking_refusal(ref: ModelRef, spec: ModelSpec | None, lack: tuple[HubError, str], *,
                    then: str | None = None, subject: str | None = None) -> ModelNotFoundError:
    """The refusal of a model that is not downloaded and that its repo lacks (lack: the Hub's error and what it says
    is lacking), naming the user's models.toml entry it comes of; its hint the error's, then what then says. subject:
    the model as the message names it, where not `model 'REF'`."""
    from localgen.hub_errors import entry_blame, entry_error

    exc, what = lack
    hint = "; ".join(part for part in (entry_error(exc, spec, ref).hint, then) if part) or None
    named = subject or f"model '{ref.text}'"
    return ModelNotFoundError(f"{named} is not downloaded, and {what}{entry_blame(exc, spec, ref)}", hint=hint)


def _hub_lack(repo: str, quant: str | None, filename: str | None) -> tuple[HubError, str] | None:
    """What the Hub says a repo lacks of the quant or file asked for (one request; the listing is kept), or why it
    could not be asked; None when it has it."""
    try:
        model = hub.find_model(repo, quant=quant, filename=filename)
    except HubError as exc:
        return exc, exc.message
    return listed_empty(model.files, repo)


def known_lack(repo: str, quant: str | None, filename: str | None) -> tuple[HubError, str] | None:
    """What a repo lacks of the quant or file asked for (as listed_lack gives it): as localgen last listed the repo,
    and, online, where that listing lacked it, as the Hub lists it now (one request; the new listing is kept, so a
    quant added since is found); None when it has it, or localgen never listed the repo."""
    from localgen.hub_types import NotInRepoError, RepoNotFoundError

    lack = listed_lack(repo, quant, filename)
    if lack is None or settings().offline:
        return lack
    try:
        model = hub.find_model(repo, quant=quant, filename=filename)
    except (NotInRepoError, RepoNotFoundError) as exc:
        return exc, exc.message
    except HubError:
        return lack  # the Hub cannot be asked now: as localgen last listed it
    return listed_empty(model.files, repo)


def listed_lack(repo: str, quant: str | None, filename: str | None) -> tuple[HubError, str] | None:
    """The quant or file a repo lacked when localgen last listed it (the error choosing it raises, and that said
    of the listing), or None: it had it, or localgen never listed the repo."""
    from localgen.hub_choice import choose_model
    from localgen.hub_types import NotInRepoError

    listing = hub_cache.load_listing(repo)
    if listing is None:
        return None
    try:
        chosen = choose_model(list(listing.files), quant=quant, filename=filename, repo=repo)
    except NotInRepoError as exc:
        what = {"quant": f"no {normalize_quant(quant or '')} file", "file": f"no file {filename!r}"}.get(
            exc.key, "no GGUF model")
        return exc, f"{repo} had {what} when localgen last listed it"
    except HubError:  # the listing says something else (an incomplete split quant): not about what it lacks
        return None
    return listed_empty(chosen, repo)


def listed_empty(files: Sequence[HubFile], repo: str) -> tuple[HubError, str] | None:
    """A model whose (first) file the Hub lists with no bytes, as what the repo lacks (its pull is refused), or None."""
    from localgen.hub_choice import EMPTY_ON_THE_HUB

    if files[0].size:
        return None
    what = f"{repo}/{files[0].filename} is {EMPTY_ON_THE_HUB}"
    return HubError(what, hint=f"choose another quant or file of {repo}: `localgen fit {repo}` lists them"), what

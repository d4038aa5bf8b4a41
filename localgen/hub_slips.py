"""A Hub repo typed with a slip of the keyboard (org/tiny-GUF for org/tiny-GGUF): the downloaded repo it stands for,
or else the repo of a models.toml entry, which the hints of errors about the typed one offer, from the cache and the
registry alone (offline too)."""

from __future__ import annotations

import re

from localgen.errors import LocalgenError
from localgen.hub_cache import hub_cache_dir
from localgen.slips import edit_distance, misspells


def downloaded_repos() -> list[str]:
    """The repos of which the Hugging Face cache holds a GGUF file (ORG/NAME, as the cache spells them)."""
    try:
        folders = sorted(p for p in hub_cache_dir().iterdir() if p.name.startswith("models--") and p.is_dir())
    except OSError:
        return []
    repos = []
    for folder in folders:
        parts = folder.name.split("--")
        if len(parts) == 3 and next(iter((folder / "snapshots").glob("*/**/*.gguf")), None) is not None:
            repos.append(f"{parts[1]}/{parts[2]}")
    return repos


def downloaded_repo_like(repo: str) -> str | None:
    """The downloaded repo a repo that is neither downloaded nor on the Hub was likely meant as (a slip of case,
    separators or a letter or two with the same numbers: not org/Qwen2.5-3B-GGUF for org/Qwen2.5-7B-GGUF), or None."""
    repos = downloaded_repos()
    if repo.lower() in (name.lower() for name in repos):
        return None  # the repo itself is downloaded (another quant of it is what is missing)
    close = [name for name in repos if misspells(repo, name)]
    return min(close, key=lambda name: edit_distance(repo.lower(), name.lower())) if close else None


def registry_repo_like(repo: str) -> tuple[str, str] | None:
    """The repo of a models.toml entry (built in or the user's) that a repo was likely meant as, the same slips
    allowed as for a downloaded one, and that entry's name (the first by name of those at that repo); None where the
    repo is an entry's own, or no entry's is alike."""
    from localgen.config import settings
    from localgen.registry import load_registry

    try:
        specs = sorted(load_registry(settings().user_registry).models.values(), key=lambda spec: spec.name)
    except LocalgenError:
        return None  # a models.toml that cannot be read is said where it is read
    entries = [(spec.repo, spec.name) for spec in specs if spec.repo]
    if repo.lower() in (name.lower() for name, _ in entries):
        return None
    close = [entry for entry in entries if misspells(repo, entry[0])]
    return min(close, key=lambda entry: edit_distance(repo.lower(), entry[0].lower())) if close else None


def with_downloaded_repo(hint: str | None, typed: str, repo: str) -> str | None:
    """A hint led by the downloaded repo a misspelt one stands for ('did you mean org/tiny-GGUF, downloaded here?', or
    'did you mean org/tiny-GGUF:Q8_0, of the downloaded org/tiny-GGUF?', typed as given with the repo put right),
    else the hint as it was."""
    meant = downloaded_repo_like(repo)
    if meant is None:
        return hint
    offered = _put_right(typed, repo, meant)
    if offered.endswith(meant):  # the repo alone, as typed (hf.co/ORG/REPO)
        lead = f"did you mean {offered}, downloaded here?"
    else:  # a quant or file of it, which may not be downloaded itself
        lead = f"did you mean {offered}, of the downloaded {meant}?"
    return f"{lead} {hint}" if hint else lead


def with_known_repo(hint: str | None, typed: str, repo: str) -> str | None:
    """with_downloaded_repo's hint, or, where no downloaded repo is alike (and the repo is not downloaded itself), one
    led by the repo of the models.toml entry it misspells ('did you mean bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M,
    the repo of llama3.2-1b?')."""
    if repo.lower() in (name.lower() for name in downloaded_repos()) or downloaded_repo_like(repo) is not None:
        return with_downloaded_repo(hint, typed, repo)
    entry = registry_repo_like(repo)
    if entry is None:
        return hint
    meant, name = entry
    lead = f"did you mean {_put_right(typed, repo, meant)}, the repo of {name}?"
    return f"{lead} {hint}" if hint else lead


def _put_right(typed: str, repo: str, meant: str) -> str:
    """The reference as typed with its repo put right (the repo alone where it cannot be found in it)."""
    offered = re.sub(re.escape(repo), meant.replace("\\", r"\\"), typed, count=1, flags=re.IGNORECASE)
    return offered if meant in offered else meant

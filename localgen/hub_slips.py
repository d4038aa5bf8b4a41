"""A Hub repo typed with a slip of the keyboard (org/tiny-GUF for org/tiny-GGUF): the downloaded repo it stands for,
which the hints of errors about the typed one offer, from the cache alone (offline too)."""

from __future__ import annotations

import re

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


def with_downloaded_repo(hint: str | None, typed: str, repo: str) -> str | None:
    """A hint led by the downloaded repo a misspelt one stands for ('did you mean org/tiny-GGUF (downloaded)?', or
    'did you mean org/tiny-GGUF:Q8_0 (of the downloaded org/tiny-GGUF)?', typed as given with the repo put right),
    else the hint as it was."""
    meant = downloaded_repo_like(repo)
    if meant is None:
        return hint
    offered = re.sub(re.escape(repo), meant.replace("\\", r"\\"), typed, count=1, flags=re.IGNORECASE)
    if meant not in offered:
        offered = meant
    if offered.endswith(meant):  # the repo alone, as typed (hf.co/ORG/REPO)
        lead = f"did you mean {offered} (downloaded)?"
    else:  # a quant or file of it, which may not be downloaded itself
        lead = f"did you mean {offered} (of the downloaded {meant})?"
    return f"{lead} {hint}" if hint else lead

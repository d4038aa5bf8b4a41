"""What `pull` of a downloaded model found on asking the Hub about it, and whether the Hub refused to say."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto

from localgen.hub_errors import error_chain, http_status


class HubOutcome(Enum):
    """What asking the Hub about a downloaded copy came to, for `pull`."""

    UP_TO_DATE = auto()
    COMMIT_NOT_RECORDED = auto()  # the same file: the cache failed to take it up
    UPDATED = auto()  # a newer version was downloaded
    DROPPED = auto()  # the Hub no longer has the repo, quant or file: the copy here is kept
    OFFLINE = auto()
    NOT_CHECKED = auto()  # the Hub could not be asked (reason says why)
    PINNED = auto()  # a registry entry pins the file's sha256 (reason: which entry)


@dataclass(frozen=True)
class HubCheck:
    """What `pull` of a downloaded copy found on asking the Hub about it: the outcome, its reason and hint (why it
    was not checked, what the Hub lacks, the entry that pins it), and the copy a newer one replaced (its commit, the
    bytes freed by removing it, and the prompt cache entries of its data deleted with it: how many, their bytes)."""

    outcome: HubOutcome
    reason: str = ""
    hint: str | None = None
    replaced_commit: str = ""
    freed: int = 0
    prompt_states: int = 0
    prompt_states_bytes: int = 0


def denied(exc: BaseException) -> bool:
    """Whether a Hub error came of an answer of HTTP 401 or 403 (found along its causes), which the Hub gives a
    private or gated repo, or one that does not exist, alike."""
    return any(http_status(err) in (401, 403) for err in error_chain(exc))

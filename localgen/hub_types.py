"""What the Hub lists: a repo's GGUF files, a repo listing at one commit, and a model chosen from it."""

from __future__ import annotations

from dataclasses import dataclass

from localgen.errors import HubError


class RepoNotFoundError(HubError):
    """No repository of that name on the Hub (or a private one this user cannot see)."""


class NotInRepoError(HubError):
    """A repository that lacks what was asked of it: key is 'quant', 'file', or 'repo' (no GGUF model at all);
    choices: what it has instead ('quants in this repo: Q4_K_M, Q8_0'), for hints; meant: its quants that a quant it
    lacks may have meant (Q8_0 for Q8)."""

    def __init__(self, message: str, hint: str | None = None, *, key: str, choices: str = "",
                 meant: tuple[str, ...] = ()) -> None:
        super().__init__(message, hint)
        self.key = key
        self.choices = choices
        self.meant = meant


@dataclass(frozen=True)
class HubFile:
    """One GGUF file in a Hub repo, with its size and the sha256 from its LFS metadata."""

    repo: str
    filename: str
    size: int
    sha256: str | None
    quant: str | None
    shard_index: int | None
    shard_count: int | None
    blob_id: str | None = None

    @property
    def name(self) -> str:
        """The file name without its folder."""
        return self.filename.rsplit("/", 1)[-1]

    @property
    def blob(self) -> str | None:
        """Its blob's name in the Hugging Face cache (its etag): the sha256 of an LFS file, else its git blob id."""
        return self.sha256 or self.blob_id


@dataclass(frozen=True)
class HubListing:
    """A repo's GGUF files at one commit, as listed by the Hub."""

    repo: str
    revision: str
    files: tuple[HubFile, ...]


@dataclass(frozen=True)
class HubModel:
    """One model on the Hub: a single GGUF file, or all shards of a split GGUF, at one commit."""

    repo: str
    quant: str | None
    files: tuple[HubFile, ...]
    revision: str
    lookalikes: tuple[HubFile, ...] = ()  # the first files of the repo's other models of its quant, where it was chosen

    @property
    def size(self) -> int:
        """Total bytes of all files."""
        return sum(f.size for f in self.files)

    @property
    def label(self) -> str:
        """A short human name: ORG/REPO:QUANT, or ORG/REPO/FILE when the file has no quant tag."""
        return f"{self.repo}:{self.quant}" if self.quant else f"{self.repo}/{self.files[0].filename}"

    @property
    def lookalike_note(self) -> str:
        """What its download's start line adds where other models of the repo carry its quant tag (m-Q4_K_M.gguf
        beside m-instruct-Q4_K_M.gguf): how to name another than the one taken, a split model counted once and named
        by its first shard; "" where none does."""
        if not self.lookalikes or self.quant is None:
            return ""
        others = [f"{self.repo}/{f.filename}" + (f" (shard 1 of {f.shard_count})" if f.shard_count else "")
                  for f in self.lookalikes]
        split = len(self.files) > 1 or any(f.shard_count for f in self.lookalikes)
        return lookalike_note(self.repo, self.quant, others, split=split)


def lookalike_note(repo: str, quant: str, others: list[str], *, split: bool, where: str = "") -> str:
    """What follows the model taken where other models of its repo carry its quant tag: how many there are (split:
    some are split models, so they are counted as models, not files; where: where they are) and how to name each
    other one (others: as it is named); "" where there is none."""
    if not others:
        return ""
    named = f"{others[0]} names the other" if len(others) == 1 else f"name another as {', '.join(others)}"
    return f" ({repo} has {len(others) + 1} {quant} {'models' if split else 'files'}{where}; {named})"

"""What a Hub file's header read before a download that cannot be loaded is said to be: the repository's file only
where the Hub sent the same bytes on a second read; bytes that differed (where the second read's cannot be loaded
either), or fewer than asked for, are the transfer's, and a second read that failed tells neither."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from localgen.errors import GGUFError, HubError, LocalgenError
from localgen.gguf_cursor import HINT, HUB_COPY_HINT
from localgen.hub_choice import EMPTY_ON_THE_HUB

if TYPE_CHECKING:
    from localgen.gguf_info import GGUFInfo
    from localgen.hub_range import HeaderBytes

AS_SENT = "(as the Hub sent it)"  # ends the refusal of a header that could not be read a second time
RETRY_HINT = "try again; where it recurs, a proxy or the network between here and the Hub may be changing what it sends"


def empty_on_the_hub(repo: str, filename: str) -> GGUFError:
    """The refusal of a file the Hub lists with no bytes."""
    return GGUFError(f"{repo}/{filename} is {EMPTY_ON_THE_HUB}", hint=HUB_COPY_HINT)


def sent_short(repo: str, filename: str, sent: int, asked: int, size: int) -> HubError:
    """Fewer bytes of a file than a read asked for, where the Hub listed it as more: the transfer's, or a file changed
    on the Hub since its listing, not a header to refuse."""
    return HubError(f"{repo}/{filename}: the Hub sent {sent:,} bytes of the first {asked:,} asked for, where it lists "
                    f"the file as {size:,} bytes",
                    hint="try again: the transfer was cut short, or the file changed on the Hub as it was read")


def kept_refusal(repo: str, filename: str, sha256: str) -> GGUFError | None:
    """The refusal kept of the file with this sha256, whose header the Hub sent twice the same (None: none kept)."""
    from localgen import gguf_cache

    kept = gguf_cache.kept_hub_refusal(sha256, filename)
    return _hub_copy(repo, filename, *kept) if kept is not None else None


def _hub_copy(repo: str, filename: str, problem: str, hint: str | None) -> GGUFError:
    """The refusal of a header the Hub sent twice the same: the repository's own file."""
    return GGUFError(f"{repo}/{Path(filename).name}: {problem} (the Hub's copy)", hint=hint)


def read_again(exc: GGUFError, repo: str, filename: str, data: bytes, *, size: int, revision: str | None,
               sha256: str | None) -> tuple[HeaderBytes, GGUFInfo]:
    """The header of bytes read from the Hub that exc refused, read again: the second read and its header where it
    differs and loads; else the refusal, as the repository's file where the Hub sent the same bytes (kept by the
    listing's sha256 where the Hub named it for them), as damage on the way where it sent others, and as the bytes the
    Hub sent where it could not be asked again."""
    from localgen import gguf_cache, hub_range
    from localgen.gguf_reader import read_gguf_bytes

    try:
        again = hub_range.read_header_bytes(repo, filename, len(data), revision=revision)
    except LocalgenError:
        raise GGUFError(f"{repo}/{exc.message} {AS_SENT}",
                        hint="it could not be read again to tell damage on the way from damage in the repository's "
                             "file: try again, and where it recurs, choose another quant or repository") from None
    if again.data != data:
        try:
            return again, read_gguf_bytes(again.data, filename, file_size=size)
        except GGUFError:
            raise HubError(f"{repo}/{filename}: the header the Hub sent differed on a second read: it was damaged on "
                           "the way", hint=RETRY_HINT) from None
    hint = f"the Hub sent the same bytes on a second read: {HUB_COPY_HINT}" if exc.hint == HINT else exc.hint
    label = f"{Path(filename).name}: "  # read_gguf_bytes's, which begins its message
    if not exc.message.startswith(label):
        raise GGUFError(f"{repo}/{exc.message} (the Hub's copy)", hint=hint)
    problem = exc.message.removeprefix(label)
    if sha256 and again.sha256 == sha256:  # not a file the Hub changed since its listing
        gguf_cache.keep_hub_refusal(sha256, problem, hint)
    raise _hub_copy(repo, filename, problem, hint)

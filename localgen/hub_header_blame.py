"""What a Hub file's header read before a download that cannot be loaded is said to be: the repository's file only
where the Hub sent the same bytes on a second read; bytes that differed, or fewer than asked for, are the transfer's,
and a second read that failed tells neither."""

from __future__ import annotations

from localgen.errors import GGUFError, HubError, LocalgenError
from localgen.gguf_cursor import HINT, HUB_COPY_HINT
from localgen.hub_choice import EMPTY_ON_THE_HUB

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


def refused_as_sent(exc: GGUFError, repo: str, filename: str, data: bytes, *, revision: str | None) -> LocalgenError:
    """The header error of bytes read from the Hub, after reading them again: the repository's file where the Hub sent
    the same bytes, damage on the way where it sent others, and said as the bytes the Hub sent where it could not be
    asked again."""
    from localgen import hub_range

    try:
        again = hub_range.read_header_bytes(repo, filename, len(data), revision=revision).data
    except LocalgenError:
        return GGUFError(f"{repo}/{exc.message} (as the Hub sent it)",
                         hint="it could not be read again to tell damage on the way from damage in the repository's "
                              "file: try again, and where it recurs, choose another quant or repository")
    if again != data:
        return HubError(f"{repo}/{filename}: the header the Hub sent differed on a second read: it was damaged on the "
                        "way", hint=RETRY_HINT)
    hint = f"the Hub sent the same bytes on a second read, so {HUB_COPY_HINT}" if exc.hint == HINT else exc.hint
    return GGUFError(f"{repo}/{exc.message} (the Hub's copy)", hint=hint)

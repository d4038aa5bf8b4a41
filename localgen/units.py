"""Figures for people: every size localgen prints, files and memory alike, in binary units (MiB, GiB) as llama.cpp
prints them, through binary_size; times and speeds as run's stats and bench show them. Counts in prose are grouped
(2,411 tokens); a value written after its option (--ctx-size 2411, `-c 2411`) is as it is typed, which takes none."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from localgen.errors import ConfigError

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(?:([kmgtp])(i?)(b?)|b)?\s*", re.IGNORECASE | re.ASCII)
_UNIT_POWERS = {"k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


def parse_size(text: str, *, name: str, hint: str = "use bytes or a size such as 4GiB or 512MiB") -> int:
    """Bytes from a plain byte count or a size with a unit: binary '4GiB', '512MiB', '4Gi' and a letter alone ('4G',
    '1.5g'), decimal '4GB', '500MB', '1.5kB' (1 GB is 10**9 bytes), up to PiB and PB; name is the setting."""
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ConfigError(f"{name}={text!r} is not a size", hint=hint)
    if "." in match[1] and not match[2]:
        raise ConfigError(f"{name}={text!r} is not a whole number of bytes", hint=hint)
    if not match[2]:
        return int(match[1])
    decimal = match[4] and not match[3]  # GB, not GiB, Gi or G
    return int(float(match[1]) * (1000 if decimal else 1024) ** _UNIT_POWERS[match[2].lower()])


BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def binary_size(n: int) -> str:
    """A size in binary units, as llama.cpp prints them: 93.8 MiB, 1.5 GiB (the one form of sizes in output)."""
    value = float(n)
    for unit in BINARY_UNITS:
        if abs(round(value, 1)) < 1024 or unit == "EiB":  # 1,048,575 bytes is 1.0 MiB, not 1024.0 KiB
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def milliseconds(seconds: float, spread: float | None = None) -> str:
    """A time as the figures (run --stats, bench) show it: '8,881 ms'; with spread (seconds), '8,881 ± 12 ms'
    ('± 0.3 ms' where it is under half a millisecond)."""
    return f"{_figure(seconds * 1000, 0)}{'' if spread is None else f' ± {_figure(spread * 1000, 0)}'} ms"


def token_rate(per_s: float, spread: float | None = None) -> str:
    """A speed as the figures (run --stats, bench) show it: '1,234.5 tok/s'; with spread, '1,234.5 ± 6.7 tok/s'
    ('0.04 tok/s' under 0.05)."""
    return f"{_figure(per_s, 1)}{'' if spread is None else f' ± {_figure(spread, 1)}'} tok/s"


def _figure(value: float, decimals: int) -> str:
    """value with thousands separators and decimals places, or one significant digit where those would round it
    to 0 (0.3, 0.04): a figure that is not 0 never shows as one."""
    if 0 < abs(value) < 0.5 * 10 ** -decimals:
        decimals = -math.floor(math.log10(abs(value)))
    return f"{value:,.{decimals}f}"


def binary_size_up(n: int, above: int | None = None) -> str:
    """binary_size rounded up at its last digit, for an amount needed; with above, a size that falls short of it, a
    figure larger than binary_size shows for that one (which rounds to the nearest)."""
    text = binary_size(n)
    value, unit = text.split()
    if unit == "B":
        return text
    scale = 1024 ** BINARY_UNITS.index(unit)
    tenths = round(float(value) * 10)
    if tenths * scale < n * 10 or (above is not None and text == binary_size(above)):
        tenths += 1
    return binary_size(-(-tenths * scale // 10))  # 1024.0 KiB carries into 1.0 MiB


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """'1 layer', '2 layers', '1 entry', '2 entries': a count and its noun, plural (noun + s by default) unless one."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def times(count: int) -> str:
    """'once', 'twice', '3 times', '1,000 times': how often something happened."""
    return {1: "once", 2: "twice"}.get(count, f"{count:,} times")


def alternatives(names: Sequence[str], word: str = "or") -> str:
    """'a', 'a or b', 'a, b or c': names offered as alternatives (word 'and': 'a, b and c', names taken together)."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {word} {names[-1]}"


def iso_time(epoch: float | None) -> str | None:
    """A time as JSON listings give it: ISO 8601 in UTC, to the second (None stays None)."""
    from datetime import datetime, timezone

    return None if epoch is None else datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")


def local_minute(epoch: float) -> str:
    """A time as listings show it: local date, hours and minutes (2026-12-01 14:40)."""
    import time

    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch))


def local_minute_of(iso: str) -> str:
    """An ISO 8601 time as saved (UTC) shown as listings show times (local_minute); as it is if it is not one."""
    from datetime import datetime, timezone

    try:
        moment = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    return local_minute((moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp())

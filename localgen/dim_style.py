"""The dim style, and NO_COLOR (no-color.org: set, not empty), which rules it out on a terminal: the one place that
decides it, for the escapes written by hand and for rich's styles, whose dim text is in italics instead."""

from __future__ import annotations

from typing import TYPE_CHECKING

from localgen.config import settings

if TYPE_CHECKING:
    from rich.style import Style
    from rich.theme import Theme


def shows_dim() -> bool:
    """Whether text may be dim (on a terminal that obeys escapes): NO_COLOR unset or empty."""
    return not settings().no_color


def dim_escapes() -> tuple[str, str]:
    """The escapes that start and end dim text written by hand to a terminal: dim, or with NO_COLOR italic, as rich's
    dim styles are then."""
    return ("\x1b[2m", "\x1b[0m") if shows_dim() else ("\x1b[3m", "\x1b[0m")


def undimmed(style: Style) -> Style:
    """A rich style as it is where it may be dim or is not dim; with NO_COLOR, a dim one in italics instead."""
    from rich.style import Style

    return style + Style(dim=False, italic=True) if style.dim and not shows_dim() else style


def dim_style(style: str) -> Style:
    """The rich style given ("dim italic"), undimmed with NO_COLOR."""
    from rich.style import Style

    return undimmed(Style.parse(style))


def rich_theme() -> Theme | None:
    """With NO_COLOR, rich's default styles with its dim ones (a Markdown rule, a level-6 heading) undimmed."""
    if shows_dim():
        return None
    from rich.theme import Theme

    return Theme({name: undimmed(style) for name, style in Theme().styles.items() if style.dim})

"""Byte counts for people: decimal units for file sizes (as download bars show them), binary for memory."""

from __future__ import annotations


def human_size(size: int) -> str:
    """A file size in decimal units: 98.4 MB."""
    value = float(size)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{size} B"


def binary_size(n: int) -> str:
    """A memory size in binary units: 1.5 GiB."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"

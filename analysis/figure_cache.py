"""Figures drawn once per content: the bytes of a rendered figure, kept by a hash of what it shows.

A figure is a pure function of its data (tables, or per-pair scores), its name and the drawing
code (STYLE, to bump when a figure's drawing changes, and matplotlib's version): the same
inputs give the same bytes (svg.hashsalt and no dates make rendering deterministic). Recomputing a
study's results after a rating, or the same results for another filter, then draws only the figures
whose data changed. Kept in this process (every format of a figure together), at most MAX_BYTES,
the least recently used dropped first.
"""

import hashlib
from collections import OrderedDict
from collections.abc import Iterable
from functools import cache
from importlib import metadata

import pandas as pd

# Bump when any figure's drawing code changes: its cached bytes are not reused.
STYLE = 10
MAX_BYTES = 64 * 1024 * 1024

_cache: OrderedDict[str, dict[str, bytes]] = OrderedDict()
_size = 0


def digest(frames: Iterable[tuple[str, pd.DataFrame]]) -> str:
    """A hash of data a figure reads: each frame's name, columns, index and values."""
    hashed = hashlib.sha256()
    for label, frame in frames:
        hashed.update(f"|{label}|{list(frame.columns)}|{frame.dtypes.astype(str).tolist()}|".encode())
        hashed.update(pd.util.hash_pandas_object(frame, index=True).to_numpy().tobytes())
    return hashed.hexdigest()


def content_key(name: str, *digests: str) -> str:
    """A figure's key: its name and the digests of the data it reads (several figures drawn from the
    same tables share one digest, computed once), with the drawing code's version."""
    return hashlib.sha256("|".join([str(STYLE), _matplotlib_version(), name, *digests]).encode()).hexdigest()


@cache
def _matplotlib_version() -> str:
    """The installed matplotlib's version, read without importing it: a figure's key is made where
    nothing is drawn (analysis.figure_jobs)."""
    return metadata.version("matplotlib")


def cached(key: str) -> dict[str, bytes] | None:
    """The figure's bytes in every format for this content key, if it was drawn in this process."""
    found = _cache.get(key)
    if found is not None:
        _cache.move_to_end(key)
    return found


def keep(key: str, formats: dict[str, bytes]) -> None:
    """Keep a drawn figure's bytes (every format) under its content key."""
    global _size
    if key in _cache:
        return
    _cache[key] = formats
    _size += sum(len(data) for data in formats.values())
    while _size > MAX_BYTES and _cache:
        _, dropped = _cache.popitem(last=False)
        _size -= sum(len(data) for data in dropped.values())


def clear() -> None:
    global _size
    _cache.clear()
    _size = 0

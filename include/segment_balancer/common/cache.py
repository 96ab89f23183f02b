"""The local cache: what this machine computed once from a file's content and keeps for the next
run that reads the same bytes with the same code.

Every kind of entry has its directory under :func:`cache_root` (``kind``: ``used_segments``,
``explain``); an entry is a directory named by its key, written aside and renamed into place
(:func:`store`), so it is there whole or not at all; the newest :data:`KEPT` of a kind stay
(:func:`keep_newest`; using an entry makes it the newest). A key of content
(:func:`content_key`) holds the SHA-256 of the input's bytes and :func:`code_fingerprint`, so an
entry never outlives the code or the libraries that made it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy
import pandas
import pyarrow

CACHE_ENV = "SEGMENT_BALANCER_CACHE"
"""The environment variable naming the cache's directory (:func:`cache_root`)."""
KEPT = 8
"""Entries of one kind kept (the newest used): a 1M-segment snapshot's ``used_segments`` entry
is about 20 MB."""
HASH_BLOCK_BYTES = 4 << 20
"""Bytes read at a time by :func:`file_sha256`."""


CACHE_OFF = "off"
"""The value of :data:`CACHE_ENV` that turns the cache off: nothing is kept or taken from it
(a benchmark's first run on a snapshot)."""


def cache_root() -> Path:
    """``$SEGMENT_BALANCER_CACHE``, else ``$XDG_CACHE_HOME/segment_balancer``, else
    ``~/.cache/segment_balancer``."""
    given = os.environ.get(CACHE_ENV)
    if given and given != CACHE_OFF:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "segment_balancer"


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of the bytes of the file ``path`` (about 1 GB/s here). Raises ``OSError``."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(HASH_BLOCK_BYTES):
            digest.update(block)
    return digest.hexdigest()


@functools.cache
def code_fingerprint() -> str:
    """A hex digest of this package's source files (their paths and bytes) and the versions of the
    libraries that parse and compute (pyarrow, pandas, numpy): an entry made by other code is
    another entry. Computed once per process."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for name in (pyarrow.__version__, pandas.__version__, numpy.__version__):
        digest.update(name.encode() + b"\0")
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def content_key(path: Path) -> str:
    """The key of what is computed from the file ``path`` alone: 32 hex characters of the SHA-256
    of its name, its bytes' SHA-256 and :func:`code_fingerprint`. Raises ``OSError``."""
    text = "\0".join((Path(path).name, file_sha256(path), code_fingerprint()))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def enabled() -> bool:
    """Whether entries are kept and taken (:data:`CACHE_ENV` is not :data:`CACHE_OFF`)."""
    return os.environ.get(CACHE_ENV) != CACHE_OFF


def entry(kind: str, key: str) -> Path | None:
    """The entry ``key`` of ``kind`` when it is there, made the newest used; else None (and always
    None when the cache is off)."""
    if not enabled():
        return None
    path = cache_root() / kind / key
    try:
        os.utime(path)
    except OSError:
        return None
    return path if path.is_dir() else None


def store(kind: str, key: str, fill: Callable[[Path], object]) -> Path | None:
    """Make the entry ``key`` of ``kind``: ``fill(tmp)`` writes it into a hidden directory beside
    it, which is renamed into place (another process that made it first wins; its entry stays).
    Then the kind keeps its :data:`KEPT` newest (:func:`keep_newest`). Returns the entry, or None
    when the cache cannot be written (a read-only home, a full disk): a cache that cannot be
    written is no error, the run goes on without it; None too when the cache is off."""
    if not enabled():
        return None
    root = cache_root() / kind
    tmp = root / f".{key}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir(parents=True)
        fill(tmp)
        try:
            os.rename(tmp, root / key)
        except OSError:
            if not (root / key).is_dir():
                raise
        keep_newest(root, KEPT)
        return root / key
    except OSError:
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def keep_newest(root: Path, kept: int) -> None:
    """Remove every entry (non-hidden directory) of ``root`` but the ``kept`` most recently used
    (by modification time), and temporaries of writes that stopped more than a day ago."""
    try:
        children = list(Path(root).iterdir())
    except OSError:
        return
    entries, stale = [], time.time() - 86_400
    for path in children:
        try:
            when = path.stat().st_mtime
        except OSError:  # removed meanwhile
            continue
        if path.name.startswith("."):
            if when < stale:
                shutil.rmtree(path, ignore_errors=True)
        elif path.is_dir():
            entries.append((when, path))
    for _, path in sorted(entries, reverse=True)[kept:]:
        shutil.rmtree(path, ignore_errors=True)

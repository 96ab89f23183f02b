"""Atomic writes: every file and directory is written aside and renamed into place, so it appears
whole or not at all, and one already there is replaced without a moment in which it is missing.
The one place that does it for local files: :func:`atomic_file` (and the ``write_*_atomic``
built on it) for a file, :func:`replace_path` and :func:`replace_dir` for a directory,
:func:`rename_new` for a name that must not exist yet, :func:`remove_dir` to remove one whole.
``durable=True`` (and :func:`replace_dir`) also ``fsync``, for what is published. Spark tasks write
the run state through pyarrow's filesystems the same way
(:func:`segment_balancer.spark.state_store.write_tier_state`).

A directory cannot be renamed over a non-empty one, so replacing one swaps the two names in one
step with Linux's ``renameat2(RENAME_EXCHANGE)`` and then removes the old content; where the OS or
the file system lacks it, the old directory is renamed aside first (a moment without it)."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard-link ``src`` to ``dst`` (an unchanged file of a snapshot copied for a what-if or a
    simulated run), copying it when the file system cannot link."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def sibling_tmp(path: Path) -> Path:
    """A fresh hidden name beside ``path`` (``.<name>.tmp-<id>``) to write it aside under."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")


_RENAME_NOREPLACE, _RENAME_EXCHANGE, _AT_FDCWD = 1, 2, -100
_LIBC_RENAMEAT2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)


def _renameat2(src: Path, dst: Path, flags: int) -> bool:
    """``renameat2(src, dst, flags)``; False when the OS or the file system does not offer it.
    Raises ``OSError`` for any other failure (``FileExistsError`` with RENAME_NOREPLACE)."""
    if _LIBC_RENAMEAT2 is None:
        return False
    if _LIBC_RENAMEAT2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(src), None, str(dst))


def replace_path(tmp: Path, path: Path) -> None:
    """Move ``tmp`` (a file or directory) to ``path``, replacing a file or directory already there;
    an existing directory is swapped out in one step (module docstring) and then removed.
    Raises ``OSError`` when the move fails; ``path`` is then as it was."""
    tmp, path = Path(tmp), Path(path)
    if path.is_dir() and not path.is_symlink():
        if _renameat2(tmp, path, _RENAME_EXCHANGE):
            shutil.rmtree(tmp, ignore_errors=True)  # now the old content
            return
        old = sibling_tmp(path)
        os.replace(path, old)
        try:
            os.replace(tmp, path)
        except BaseException:
            os.replace(old, path)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)


def rename_new(tmp: Path, path: Path) -> None:
    """Move ``tmp`` to ``path``, which must not exist: raises ``FileExistsError`` (and moves
    nothing) when it does, even when it appears at the same moment (``RENAME_NOREPLACE``)."""
    tmp, path = Path(tmp), Path(path)
    if not _renameat2(tmp, path, _RENAME_NOREPLACE):
        if path.exists() or path.is_symlink():
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
        os.rename(tmp, path)


def remove_path(path: Path) -> None:
    """Remove the file or directory ``path`` if it is there (a table left by a failed check)."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


def tree_bytes(path: Path) -> int:
    """The apparent size in bytes of the file ``path`` or of every file under the directory ``path``
    (0 when it is not there; symbolic links are not followed)."""
    path = Path(path)
    if not path.is_dir() or path.is_symlink():
        return path.lstat().st_size if path.exists() or path.is_symlink() else 0
    total = 0
    for top, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(top, name)).st_size
            except OSError:  # removed meanwhile
                pass
    return total


def is_plain_child(path: Path, root: Path) -> bool:
    """Whether ``path`` is a non-hidden entry right under ``root``, as written and once resolved
    (no ``.``, ``..``, nesting or symbolic link out of ``root``): a plan's or a run's own directory."""
    path, root = Path(path), Path(root)
    return (
        path.name not in ("", ".", "..")
        and not path.name.startswith(".")
        and os.path.abspath(path.parent) == os.path.abspath(root)
        and path.resolve().parent == root.resolve()
    )


def remove_dir(path: Path) -> int:
    """Remove the directory ``path`` so that it disappears whole: renamed first to a hidden sibling
    (``.<name>.old-<id>``, what :func:`is_leftover` finds should the removal stop half-way), then
    deleted. Returns the bytes it held (:func:`tree_bytes`). Raises ``OSError`` when the rename fails."""
    path = Path(path)
    size = tree_bytes(path)
    aside = path.parent / f".{path.name}.old-{uuid.uuid4().hex[:12]}"
    os.rename(path, aside)
    shutil.rmtree(aside, ignore_errors=True)
    return size


_LEFTOVER = re.compile(r"\..+\.(tmp|old)-[0-9a-f]{8,12}")


def is_leftover(path: Path) -> bool:
    """Whether ``path`` is a temporary of this module left by an interrupted write or removal
    (``.<name>.tmp-<id>`` or ``.<name>.old-<id>``)."""
    return bool(_LEFTOVER.fullmatch(Path(path).name))


@contextmanager
def atomic_file(path: Path, mode: str = "w", *, durable: bool = False, encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a hidden sibling of ``path`` (``.<name>.tmp-<id>``, created with the usual permissions)
    for writing in ``mode`` (``"w"`` text, UTF-8 with ``\n`` line ends; ``"wb"`` bytes) and yield
    it; when the block ends, rename it onto ``path`` (after ``fsync``, and ``fsync`` of the parent
    directory, when ``durable``). When the block raises, the sibling is removed and ``path`` stays
    as it was. Creates ``path``'s parent directories."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_file writes with mode 'w' or 'wb', not {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = sibling_tmp(path)
    binary = mode == "wb"
    try:
        with open(
            tmp, "xb" if binary else "x", encoding=None if binary else encoding, newline=None if binary else "\n"
        ) as fh:
            yield fh
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        replace_path(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def write_text_atomic(text: str, path: Path, *, durable: bool = False) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_file`)."""
    with atomic_file(path, durable=durable) as fh:
        fh.write(text)


def write_json_atomic(obj, path: Path, *, durable: bool = False) -> None:
    """Write ``obj`` as indented JSON to ``path`` atomically (values JSON lacks as ``str``)."""
    write_text_atomic(json.dumps(obj, indent=2, sort_keys=False, default=str), path, durable=durable)


def write_parquet_atomic(frame, path: Path) -> None:
    """Write a Spark DataFrame (a directory of parts), a pandas DataFrame or a pyarrow Table (one
    file, with the table's own schema) to ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = sibling_tmp(path)
    if hasattr(frame, "sparkSession"):
        frame.write.mode("overwrite").parquet(str(tmp))
    elif hasattr(frame, "to_parquet"):
        frame.to_parquet(tmp, index=False)
    else:
        import pyarrow.parquet as pq

        pq.write_table(frame, tmp)
    replace_path(tmp, path)


@contextmanager
def staged_parquet(frame, path: Path) -> Iterator[Path]:
    """Write the Spark DataFrame ``frame`` aside, yield where it is (to read it back and check it),
    and move it to ``path`` when the block ends; when the block raises, the aside copy is removed
    and whatever was at ``path`` stays as it was. So one Spark job both writes a table and lets a
    check read it, and a table that fails its check never appears."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # not hidden (no leading dot): Spark warns that it ignores a hidden path it is asked to read
    tmp = path.with_name(f"{path.name}.staged-{uuid.uuid4().hex[:8]}")
    try:
        frame.write.mode("overwrite").parquet(str(tmp))
        yield tmp
    except BaseException:
        remove_path(tmp)
        raise
    replace_path(tmp, path)


def write_partitioned_atomic(frame, path: Path, column: str) -> None:
    """Write a Spark DataFrame to ``path`` as parquet partitioned by ``column``, atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = sibling_tmp(path)
    frame.write.mode("overwrite").partitionBy(column).parquet(str(tmp))
    replace_path(tmp, path)


def filesystem(uri) -> tuple:
    """``(pyarrow filesystem, path)`` of a work-directory URI or absolute path: what Spark tasks
    use to read and write the run state wherever the work directory lives (``file://``, an
    absolute local path, ``hdfs://``, ``s3://`` as pyarrow supports them)."""
    from pyarrow.fs import FileSystem

    return FileSystem.from_uri(str(uri))


class WriteError(RuntimeError):
    """A directory was not written (:func:`replace_dir`): what was there before is left as it was;
    the failure is the ``__cause__``."""


def fsync_tree(root: Path) -> None:
    """``fsync`` every file under ``root`` and ``root`` itself (before a rename publishes it)."""
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as fh:
                os.fsync(fh.fileno())
    fsync_dir(root)


def fsync_dir(path: Path) -> None:
    """``fsync`` the directory ``path`` (its entries: a rename into it), where the OS allows."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace_dir(dest_dir: str | Path, fill: Callable[[Path], object], *, durable: bool = True) -> Path:
    """Make ``dest_dir`` whole or not at all: ``fill(tmp)`` writes the new content into the hidden
    sibling ``tmp`` = ``dest_dir.parent/.<name>.tmp-<id>`` (created empty), which is synced and then
    renamed to ``dest_dir``; an existing ``dest_dir`` is swapped with it in one step (or, where the
    OS cannot, renamed aside first) and deleted once the new one is in. ``durable`` (what is
    published): every file and the directories are ``fsync``ed. Returns ``dest_dir``.
    Raises :class:`WriteError` when ``fill`` or the renames fail; then ``dest_dir`` is left as it
    was and the temporaries are removed. Used for published plans, simulations and what-if copies
    of a snapshot.
    """
    dest = Path(dest_dir).resolve()
    parent = dest.parent
    token = uuid.uuid4().hex[:12]
    tmp, old = parent / f".{dest.name}.tmp-{token}", parent / f".{dest.name}.old-{token}"
    moved_aside = False
    try:
        tmp.mkdir(parents=True)
        fill(tmp)
        if durable:
            fsync_tree(tmp)
        if dest.is_dir() and not dest.is_symlink() and _renameat2(tmp, dest, _RENAME_EXCHANGE):
            old, moved_aside = tmp, True  # swapped: the old content now has tmp's name
        else:
            if dest.exists():
                os.rename(dest, old)
                moved_aside = True
            os.rename(tmp, dest)
        if durable:
            fsync_dir(parent)
    except BaseException as exc:
        if moved_aside and not dest.exists():
            os.rename(old, dest)
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, Exception) and not isinstance(exc, WriteError):
            raise WriteError(f"writing {dest} failed: {exc}") from exc
        raise
    if moved_aside:
        shutil.rmtree(old, ignore_errors=True)
    return dest

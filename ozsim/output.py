"""Result files: destinations checked before any work, and atomic writes.

:func:`check_output_path` is called before a simulation starts, so a destination that cannot be
written fails in a moment instead of after the run. :func:`write_atomic` writes to a temporary file
in the destination's directory and renames it over the destination (``os.replace``): a crash, a
kill or a full disk leaves the old file or no file, never a truncated one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from .errors import OutputError

__all__ = ["SUFFIXES", "check_output_path", "write_atomic"]

#: The file kinds ozsim writes: a JSON summary (counts, probabilities) or NumPy amplitudes.
SUFFIXES = (".json", ".npy")


def check_output_path(path: str | os.PathLike, what: str = "--output") -> Path:
    """Check that ``path`` can receive a result, before any work is done.

    The suffix must be one of :data:`SUFFIXES`, the directory must exist and be writable (the
    file is created there, then renamed), and ``path`` must not be a directory.

    Args:
        path: the destination.
        what: how the messages name it (the CLI flag, or an argument name).

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OutputError: (also an ``OSError``) the destination cannot be written; one line naming
            it and why.
    """
    p = Path(os.fspath(path))
    if p.suffix not in SUFFIXES:
        raise OutputError(f"{what} must end in .json or .npy, got {os.fspath(path)!r}")
    directory = p.parent
    if not directory.exists():
        raise OutputError(f"{what} {os.fspath(path)!r}: the directory {str(directory)!r} does "
                          "not exist")
    if not directory.is_dir():
        raise OutputError(f"{what} {os.fspath(path)!r}: {str(directory)!r} is not a directory")
    if p.is_dir():
        raise OutputError(f"{what} {os.fspath(path)!r} is a directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputError(f"{what} {os.fspath(path)!r}: the directory {str(directory)!r} is not "
                          "writable")
    return p


def _file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> None:
    """Write a file atomically: ``write(f)`` fills a temporary file in the same directory, which
    is flushed to disk and renamed over ``path``.

    On any failure (an ``OSError`` such as a full disk, an exception in ``write``, a
    ``KeyboardInterrupt``) the temporary file is removed and ``path`` is left as it was.

    Raises:
        OutputError: (also an ``OSError``) the file could not be written; nothing was left.
    """
    p = Path(os.fspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".part", dir=p.parent)
    except OSError as exc:
        raise OutputError(f"cannot write {os.fspath(path)!r}: {exc.strerror or exc}",
                          exc.errno) from exc
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), _file_mode())
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, OutputError):
            raise OutputError(f"cannot write {os.fspath(path)!r}: {exc.strerror or exc}; nothing "
                              "was written", exc.errno) from exc
        raise

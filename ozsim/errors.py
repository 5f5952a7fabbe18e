"""Exceptions raised by ozsim.

Misuse of an API (wrong type, shape or dtype) raises the built-in ``TypeError`` or ``ValueError``.
Domain errors derive from :class:`OzsimError` and, where one fits, also from the matching built-in
exception, so ``except ValueError`` keeps working for callers that do not know ozsim.
"""

from __future__ import annotations

__all__ = [
    "DeviceUnavailableError",
    "InsufficientMemoryError",
    "MissingDependencyError",
    "NonFiniteError",
    "NonUnitaryError",
    "OutputError",
    "OzsimError",
    "QasmError",
    "RunInterrupted",
    "UnsupportedOperationError",
]


class OzsimError(Exception):
    """Base class of every error ozsim raises on purpose."""


class QasmError(OzsimError, ValueError):
    """An OpenQASM file that cannot be read; the message starts with ``file:line:``.

    Attributes:
        path: the file, or ``None`` for a string.
        line: 1-based line number, or ``None`` where the parser gave none.
    """

    def __init__(self, message: str, path: str | None = None, line: int | None = None):
        where = f"{path or '<string>'}" + (f":{line}" if line is not None else "")
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line


class UnsupportedOperationError(OzsimError, ValueError):
    """A circuit operation ozsim cannot simulate (the message names it and its position)."""


class NonUnitaryError(OzsimError, ValueError):
    """A gate matrix that is not unitary to within the documented tolerance."""


class NonFiniteError(OzsimError, FloatingPointError):
    """NaN or Inf in a GEMM operand, a gate matrix or the amplitudes of a state vector."""


class InsufficientMemoryError(OzsimError, MemoryError):
    """The state vector and its work buffers would not fit; raised before allocating.

    Attributes:
        needed_bytes: bytes the run would need.
        available_bytes: bytes available on the device (host RAM or GPU memory).
    """

    def __init__(self, message: str, needed_bytes: int, available_bytes: int):
        super().__init__(message)
        self.needed_bytes = needed_bytes
        self.available_bytes = available_bytes


class DeviceUnavailableError(OzsimError, RuntimeError):
    """The user asked for a GPU (``device="gpu"``) and none can be used."""


class GPUModuleError(OzsimError, RuntimeError):
    """One of ozsim's GPU modules failed to import or compile; the message names the module and
    the cause. Raised when the GPU path is asked for, never replaced by a slower path."""


class MissingDependencyError(OzsimError, ImportError):
    """An optional library is needed for this feature; the message says how to install it."""


class OutputError(OzsimError, OSError):
    """A result destination that cannot be written (checked before a run), or a write that failed
    (a full disk...): the message names the file and the cause; no partial file is left.

    Attributes:
        errno: the underlying ``OSError``'s errno, or ``None``.
    """

    def __init__(self, message: str, errno: int | None = None):
        super().__init__(message)
        self.errno = errno


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by ``KeyboardInterrupt`` (Ctrl-C; the CLI turns SIGTERM into one too).

    A ``KeyboardInterrupt``, so ``except Exception`` does not swallow it.

    Attributes:
        partial: for a trajectory run, a :class:`ozsim.Result` whose ``counts`` hold the shots
            completed so far (``metadata["partial"]`` is True, ``metadata["shots_completed"]``
            their number); ``None`` for a final-state run, which has no usable part.
    """

    def __init__(self, message: str, partial=None):
        super().__init__(message)
        self.partial = partial

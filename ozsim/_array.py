"""Array-namespace helpers: NumPy or CuPy, without importing CuPy until a CuPy array appears."""

from __future__ import annotations

import sys
from types import ModuleType

import numpy as np

__all__ = ["array_namespace", "is_cupy_array", "to_numpy"]


def is_cupy_array(x) -> bool:
    """True for a ``cupy.ndarray`` (checked without importing CuPy), or an operand that lives on
    the GPU (``ozsim.gemm.ozaki2.cuda.GatheredMatrix``)."""
    return type(x).__module__.startswith("cupy") or getattr(x, "_ozsim_gathered", False)


def array_namespace(*arrays) -> ModuleType:
    """The array module (``numpy`` or ``cupy``) shared by ``arrays``.

    Raises:
        TypeError: NumPy and CuPy arrays mixed (naming both types).
    """
    kinds = {is_cupy_array(a) for a in arrays if a is not None}
    if len(kinds) > 1:
        names = sorted({f"{type(a).__module__}.{type(a).__name__}" for a in arrays})
        raise TypeError(f"arrays from different libraries cannot be mixed: {', '.join(names)}")
    if kinds == {True}:
        return sys.modules["cupy"]
    return np


def to_numpy(x) -> np.ndarray:
    """A NumPy copy (host) of a NumPy or CuPy array."""
    return x.get() if is_cupy_array(x) else np.asarray(x)

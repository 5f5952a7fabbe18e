"""Shared fixtures: an ``xp`` fixture that runs one test body on NumPy and, where a GPU is there,
on CuPy (the CuPy case is marked ``gpu`` and skips cleanly without CuPy or a CUDA device)."""

from __future__ import annotations

import numpy as np
import pytest


def cupy_or_skip():
    """The ``cupy`` module, or skip the calling test: no CuPy, or CuPy sees no CUDA device."""
    cupy = pytest.importorskip("cupy")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA driver missing or broken
        pytest.skip(f"CuPy sees no CUDA device ({exc.__class__.__name__})")
    if count < 1:
        pytest.skip("CuPy sees no CUDA device")
    return cupy


@pytest.fixture(params=["numpy", pytest.param("cupy", marks=pytest.mark.gpu)])
def xp(request):
    """The array module under test: ``numpy``, then ``cupy`` (GPU only)."""
    if request.param == "numpy":
        return np
    return cupy_or_skip()

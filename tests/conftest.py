"""Shared fixtures: an ``xp`` fixture that runs one test body on NumPy and, where a GPU is there,
on CuPy (the CuPy case is marked ``gpu`` and skips cleanly without CuPy or a CUDA device)."""

from __future__ import annotations

import numpy as np
import pytest


def cupy_or_skip(module: bool = False):
    """The ``cupy`` module, or skip the calling test (``module``: the calling test module, from
    its top level): no CuPy, or CuPy sees no CUDA device."""
    cupy = pytest.importorskip("cupy")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA driver missing or broken
        pytest.skip(f"CuPy sees no CUDA device ({exc.__class__.__name__})",
                    allow_module_level=module)
    if count < 1:
        pytest.skip("CuPy sees no CUDA device", allow_module_level=module)
    return cupy


@pytest.fixture(params=["numpy", pytest.param("cupy", marks=pytest.mark.gpu)])
def xp(request):
    """The array module under test: ``numpy``, then ``cupy`` (GPU only)."""
    if request.param == "numpy":
        return np
    return cupy_or_skip()


@pytest.fixture
def gathered_calls(monkeypatch):
    """A list that gets, for every ``StateVector._gathered`` call from here on, whether the
    engine read the state through the permutation (a ``GatheredMatrix``) instead of copying it."""
    from ozsim.statevector import StateVector

    calls: list[bool] = []
    real = StateVector._gathered

    def spy(self, front, backend):
        out = real(self, front, backend)
        calls.append(out[0] is not None)
        return out

    monkeypatch.setattr(StateVector, "_gathered", spy)
    return calls

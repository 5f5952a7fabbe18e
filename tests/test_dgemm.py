"""ozsim.gemm.dgemm: the real double-precision GEMM, against double-double, never itself."""

from __future__ import annotations

import numpy as np
import pytest

from ozsim import NonFiniteError
from ozsim.gemm import dgemm, zgemm
from ozsim.reference import dd_zgemm
from ozsim.testing import ozaki_matrix

BACKENDS = ("zgemm", "int8-auto", "int8x9", "int8-crt-auto", "int8-crt14")


def _real_pair(seed: int, m: int, k: int, n: int, phi: float):
    rng = np.random.default_rng(seed)
    return (np.ascontiguousarray(ozaki_matrix(rng, m, k, phi).real),
            np.ascontiguousarray(ozaki_matrix(rng, k, n, phi).real))


def _ref(a, b):
    return dd_zgemm(a.astype(np.complex128), b.astype(np.complex128)).hi.real


def _normwise(c, ref) -> float:
    return float(np.linalg.norm(c - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("n", [1, 7, 8])
@pytest.mark.parametrize("backend", BACKENDS)
def test_dgemm_matches_double_double(backend, n):
    """Every backend on odd and even widths (the column halves packed as Re and Im), to FP64
    accuracy; a fixed count with few moduli is visibly worse (the test can fail)."""
    a, b = _real_pair(n, 9, 300, n, 1.0)
    ref = _ref(a, b)
    c, info = dgemm(a, b, backend=backend, T=0, return_info=True)
    assert c.dtype == np.float64 and c.shape == (9, n)
    assert np.isfinite(c).all()
    assert _normwise(c, ref) <= 2 * _normwise(a @ b, ref) + 2.0**-52
    assert info.backend == backend
    assert _normwise(dgemm(a, b, backend="int8-crt6"), ref) > 1e-6


@pytest.mark.parametrize("phi", [0.1, 1.0])
@pytest.mark.parametrize("k", [256, 4096])
def test_dgemm_crt_auto_T0_is_no_worse_than_native(phi, k):
    """T = 0 against FP64 DGEMM's bound: norm-wise no worse than NumPy's DGEMM; 15 moduli for
    dense inputs (a real product sums k terms where a complex one sums 2k)."""
    a, b = _real_pair(int(10 * phi) + k, 16, k, 16, phi)
    ref = _ref(a, b)
    c, info = dgemm(a, b, backend="int8-crt-auto", T=0, return_info=True)
    assert info.num_moduli == 15 and info.bound_bits <= 0
    assert _normwise(c, ref) <= _normwise(a @ b, ref)


def test_dgemm_equals_zgemm_of_the_packed_halves():
    """The INT8 backends compute A @ (B[:, :h] + i B[:, h:]): the same bits as zgemm on it."""
    a, b = _real_pair(3, 6, 50, 9, 2.0)
    h = 5
    bc = b[:, :h] + 0j
    bc.imag[:, :4] = b[:, h:]
    for backend in ("int8-auto", "int8-crt16"):
        cc = zgemm(a + 0j, bc, backend=backend, T=1)
        c = dgemm(a, b, backend=backend, T=1)
        assert np.array_equal(c[:, :h], cc.real) and np.array_equal(c[:, h:], cc.imag[:, :4])


def test_dgemm_out_and_errors():
    a, b = _real_pair(4, 5, 20, 6, 0.5)
    out = np.full((5, 6), 7.0)
    assert dgemm(a, b, backend="int8-crt-auto", out=out) is out
    assert np.array_equal(out, dgemm(a, b, backend="int8-crt-auto"))
    with pytest.raises(TypeError, match="float64"):
        dgemm(a + 0j, b)
    with pytest.raises(ValueError, match="inner dimensions differ"):
        dgemm(a, b[:-1])
    with pytest.raises(ValueError, match="T must be >= 0"):
        dgemm(a, b, T=-1)
    with pytest.raises(ValueError, match="out overlaps b"):
        dgemm(a, b, out=b[:5, :6])
    with pytest.raises(ValueError, match="unknown backend"):
        dgemm(a, b, backend="int9")
    bad = b.copy()
    bad[3, 2] = np.nan
    for backend in ("zgemm", "int8-auto", "int8-crt-auto"):
        with pytest.raises(NonFiniteError):
            dgemm(a, bad, backend=backend)


@pytest.mark.gpu
@pytest.mark.parametrize("fused", ["0", "auto", "3"])
@pytest.mark.parametrize("backend", ["int8-auto", "int8-crt-auto", "int8-crt14"])
def test_dgemm_gpu_equals_cpu(backend, fused, monkeypatch):
    """Bitwise CPU = GPU, on cuBLAS products (two a modulus for a real A: T2 skipped) and on the
    fused kernel; k = 9000 takes the cuBLAS path in any mode."""
    from conftest import cupy_or_skip

    cp = cupy_or_skip()
    monkeypatch.setenv("OZSIM_CRT_FUSED", fused)
    for k in (200, 9000):
        a, b = _real_pair(k, 33, k, 21, 1.0)
        cpu = dgemm(a, b, backend=backend, T=0)
        gpu = dgemm(cp.asarray(a), cp.asarray(b), backend=backend, T=0)
        np.testing.assert_array_equal(gpu.get(), cpu)
    assert np.allclose(dgemm(cp.asarray(a), cp.asarray(b), backend="zgemm").get(), a @ b,
                       rtol=1e-12, atol=1e-12 * np.abs(a) @ np.abs(b))
    # a prepared real A used twice (its cached residues and its is_real flag side by side)
    from ozsim.gemm import PreparedCRTOperand

    prep = PreparedCRTOperand(cp.asarray(a + 0j))
    bc = cp.asarray(b + 1j * b[:, ::-1])
    first = zgemm(prep, bc, backend="int8-crt14")
    assert prep.is_real
    assert cp.array_equal(zgemm(prep, bc, backend="int8-crt14"), first)
    np.testing.assert_array_equal(first.get(), zgemm(a + 0j, bc.get(), backend="int8-crt14"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_products(backend):
    """m = 0 or n = 0 (a GEMM library's edge cases) give empty results, zgemm and dgemm alike;
    n = 1 packs one column with a zero partner."""
    a = np.arange(12.0).reshape(3, 4)
    assert dgemm(a, np.ones((4, 0)), backend=backend).shape == (3, 0)
    assert dgemm(np.ones((0, 4)), np.ones((4, 3)), backend=backend).shape == (0, 3)
    assert zgemm(np.ones((0, 4)) + 0j, np.ones((4, 3)) + 0j, backend=backend).shape == (0, 3)
    assert zgemm(a + 0j, np.ones((4, 0)) + 0j, backend=backend).shape == (3, 0)
    np.testing.assert_array_equal(dgemm(a, np.ones((4, 1)), backend=backend).ravel(),
                                  a.sum(axis=1))

"""The FP16 Ozaki scheme (``fp16x{s}``, ``fp16-auto``) and the correctly rounded backends
(``int8-cr``, ``fp16-cr``): accuracy against exact products, bitwise reproducibility, FP32
exactness of the FP16 slice products, and CPU = GPU bitwise (``gpu``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import cupy_or_skip

from ozsim import Circuit, Simulator
from ozsim.errors import NonFiniteError
from ozsim.gemm import bounds, dgemm, fp16, zgemm
from ozsim.gemm.exact import ExactSum, cr_zgemm, exact_num_splits
from ozsim.gemm.ozaki1 import row_exponents, split_rows
from ozsim.testing import exact_zgemm, max_relative_error, ozaki_matrix

CR = ("int8-cr", "fp16-cr")


def _bits(x: np.ndarray) -> np.ndarray:
    """The bit patterns of a float or complex array (``-0.0`` and ``+0.0`` differ)."""
    return np.ascontiguousarray(x).view(np.int64)


def _exact_real(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return exact_zgemm(a.astype(complex), b.astype(complex)).real


# -- correctly rounded: 0 ulp against the exact product ----------------------------------------
@pytest.mark.parametrize("backend", CR)
@pytest.mark.parametrize("m,k,n,phi", [(64, 16, 64, 0.5), (16, 256, 16, 4.0), (4, 4096, 4, 2.0),
                                       (3, 1, 5, 1.0)])
def test_cr_zgemm_is_correctly_rounded(backend, m, k, n, phi):
    rng = np.random.default_rng(1000 * m + k)
    a, b = ozaki_matrix(rng, m, k, phi), ozaki_matrix(rng, k, n, phi)
    c, info = zgemm(a, b, backend=backend, return_info=True)
    np.testing.assert_array_equal(_bits(c), _bits(exact_zgemm(a, b)))
    assert info.correctly_rounded and info.num_splits >= 1 and not info.fallback


@pytest.mark.parametrize("backend", CR)
@pytest.mark.parametrize("m,k,n,phi", [(64, 32, 64, 4.0), (8, 4096, 8, 1.0)])
def test_cr_dgemm_is_correctly_rounded(backend, m, k, n, phi):
    rng = np.random.default_rng(7 * k + m)
    a = ozaki_matrix(rng, m, k, phi).real.copy()
    b = ozaki_matrix(rng, k, n, phi).real.copy()
    c = dgemm(a, b, backend=backend)
    np.testing.assert_array_equal(_bits(c), _bits(_exact_real(a, b)))


@pytest.mark.parametrize("backend", CR)
def test_cr_under_heavy_cancellation(backend):
    # A = [X, -X], B = [Y; Y + E]: the terms are ~|X||Y|, the exact product is -X E ~ 2**-45 of it
    rng = np.random.default_rng(11)
    x, y = ozaki_matrix(rng, 24, 48, 1.0), ozaki_matrix(rng, 48, 20, 1.0)
    e = ozaki_matrix(rng, 48, 20, 1.0) * 2.0**-45
    a, b = np.hstack([x, -x]), np.vstack([y, y + e])
    c = zgemm(a, b, backend=backend)
    exact = exact_zgemm(a, b)
    np.testing.assert_array_equal(_bits(c), _bits(exact))
    native = max_relative_error(a @ b, exact)
    assert native > 1e-6  # the cancellation is real: native ZGEMM loses most digits


@pytest.mark.parametrize("backend", CR)
def test_cr_ties_subnormals_and_zero(backend):
    t = 2.0**-53
    # exact sums 1 + 2**-53 (a tie: to even, 1), just above a tie (up), a negative tie, a tie
    # with an odd last bit (up, to even), an exact zero from cancellation
    a = np.array([[1, t, 0], [1, t, 2.0**-100], [-1, -t, 0], [1 + 2 * t, t, 0], [1, -1, 0]],
                 dtype=complex)
    b = np.ones((3, 1), dtype=complex)
    c = zgemm(a, b, backend=backend)
    np.testing.assert_array_equal(c.real[:, 0], [1.0, 1 + 2 * t, -1.0, 1 + 4 * t, 0.0])
    assert not np.signbit(c[4, 0].real)
    np.testing.assert_array_equal(_bits(c), _bits(exact_zgemm(a, b)))
    rng = np.random.default_rng(12)  # results in and below the subnormal range
    a = ozaki_matrix(rng, 8, 64, 2.0) * 2.0**-1000
    b = ozaki_matrix(rng, 64, 8, 2.0) * 2.0**-62
    b[:, 4:] *= 2.0**-18  # some parts round to 0, some to the smallest subnormal
    c = zgemm(a, b, backend=backend)
    exact = exact_zgemm(a, b)
    assert np.any(np.abs(exact.real) < 2.0**-1022) and np.any(exact.real == 0)
    np.testing.assert_array_equal(_bits(c), _bits(exact))


def test_cr_split_counts_cover_every_bit():
    x = np.array([[1.0, 2.0**-60, 0.0], [0.75, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=complex)
    exps = row_exponents(x)
    assert exps.tolist() == [1, 0, 0]
    # row 0: lowest set bit 2**-60, scaling point 2**1: 61 bits, 9 slices of 7 bits
    assert exact_num_splits(x, exps, 7) == 9
    assert exact_num_splits(x[1:], exps[1:], 7) == 1  # 0.75: bits 2**-1, 2**-2
    assert exact_num_splits(np.zeros((2, 2), complex), np.zeros(2, np.int32), 7) == 1
    tiny = np.array([[1.0, 5e-324]], dtype=complex)  # the smallest subnormal: 1075 bits
    assert exact_num_splits(tiny, row_exponents(tiny), 7) == -(-1075 // 7)
    sl = split_rows(tiny, row_exponents(tiny), -(-1075 // 7), 7)
    value = sum(np.ldexp(sl[0, i, 1], 1 - 7 * (i + 1)) for i in range(sl.shape[1]))
    assert value == 5e-324


def test_cr_rejects_unknown_family_and_nonfinite():
    a = np.ones((2, 2), complex)
    with pytest.raises(ValueError, match="family must be one of int8, fp16, got 'bf16'"):
        cr_zgemm(a, a, "bf16")
    bad = a.copy()
    bad[0, 1] = np.nan
    for backend in CR + ("fp16x5", "fp16-auto"):
        with pytest.raises(NonFiniteError, match="NaN or Inf"):
            zgemm(bad, a, backend=backend)
        with pytest.raises(NonFiniteError, match="NaN or Inf"):
            zgemm(a, bad, backend=backend)


# -- reproducibility --------------------------------------------------------------------------
@pytest.mark.parametrize("backend", CR + ("fp16x9", "fp16-auto"))
def test_bitwise_equal_for_any_column_blocking(backend):
    rng = np.random.default_rng(21)
    a, b = ozaki_matrix(rng, 16, 64, 2.0), ozaki_matrix(rng, 64, 40, 2.0)
    ref = zgemm(a, b, backend=backend, T=0)
    for ws in (1, 20_000, 300_000):  # one column a block, a few, all at once
        np.testing.assert_array_equal(_bits(zgemm(a, b, backend=backend, T=0,
                                                  workspace_bytes=ws)), _bits(ref))
    prepared = zgemm(fp16.backend.prepare(a), b, backend=backend, T=0)
    np.testing.assert_array_equal(_bits(prepared), _bits(ref))


def test_exact_sum_does_not_depend_on_the_order_of_levels():
    # the GPU adds K chunks and levels in other orders than the CPU: the slots must not care
    rng = np.random.default_rng(22)
    levels = [(rng.integers(-2**45, 2**45, (6, 5)), rng.integers(-2**45, 2**45, (6, 5)))
              for _ in range(12)]
    eA, eB = rng.integers(-30, 30, 6).astype(np.int32), rng.integers(-30, 30, 5).astype(np.int32)
    results = []
    for order in (range(12), reversed(range(12)), rng.permutation(12)):
        acc = ExactSum(6, 5, 12, 7)
        for t in order:
            half = levels[t][0] // 2  # a level split in two adds, as chunked K products are
            acc.add(int(t), half, levels[t][1])
            acc.add(int(t), levels[t][0] - half, np.zeros((6, 5), np.int64))
        results.append(_bits(acc.result(eA, eB)))
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])


# -- FP16 scheme ------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2, 4, 5, 64, 1000, 4096, 2**20, 2**22])
def test_fp16_slice_width_keeps_fp32_sums_exact(k):
    b = fp16.bits_per_slice(k)
    assert 1 <= b <= 11 and (2**b - 1) <= fp16.FP16_MAX_SLICE
    assert k * (2**b - 1) ** 2 < 2**24  # every partial sum of a slice dot product
    assert b == 11 or k * (2 ** (b + 1) - 1) ** 2 >= 2**24 or (2 ** (b + 1) - 1) > 2047


@pytest.mark.parametrize("k,msg", [(0, "k must be >= 1, got 0"),
                                   (2**22 + 1, "too large for exact FP32 slice products")])
def test_fp16_slice_width_rejects_bad_k(k, msg):
    with pytest.raises(ValueError, match=msg):
        fp16.bits_per_slice(k)


@pytest.mark.parametrize("k", [8, 512, 4096])
def test_fp16_slice_products_are_exact_in_fp32(k):
    rng = np.random.default_rng(k)
    a, b = ozaki_matrix(rng, 32, k, 4.0), ozaki_matrix(rng, k, 24, 4.0)
    bits = fp16.bits_per_slice(k)
    sa = split_rows(a, row_exponents(a), 4, bits)
    sb = split_rows(b.T, row_exponents(b.T), 4, bits)
    assert np.array_equal(sa.astype(np.float16).astype(np.float64), sa)  # FP16 values
    assert np.abs(sa).max() <= 2**bits - 1
    for i, j in ((0, 0), (1, 2), (3, 3)):
        f64 = sa[:, i, :] @ sb[:, j, :].T
        f32 = sa[:, i, :].astype(np.float32) @ sb[:, j, :].T.astype(np.float32)
        np.testing.assert_array_equal(f32.astype(np.float64), f64)
        assert np.abs(f64).max() < 2**24


def test_fp16_error_decreases_with_the_slices():
    rng = np.random.default_rng(31)
    a, b = ozaki_matrix(rng, 16, 128, 1.0), ozaki_matrix(rng, 128, 16, 1.0)
    exact = exact_zgemm(a, b)
    errs = [max_relative_error(zgemm(a, b, backend=f"fp16x{s}"), exact) for s in range(3, 9)]
    assert all(e2 < e1 / 8 for e1, e2 in zip(errs, errs[1:])), errs
    assert errs[0] > 1e-8 and errs[-1] < 1e-15
    for s in range(3, 9):  # the a-priori bound holds (scheme I's with b = 8)
        c, info = zgemm(a, b, backend=f"fp16x{s}", return_info=True)
        assert info.num_splits == s and info.bits_per_slice == 8
        assert np.linalg.norm(c - exact) <= info.error_bound * np.linalg.norm(b)


@pytest.mark.parametrize("m,k,n,phi", [(32, 16, 32, 0.1), (16, 256, 16, 1.0),
                                       (8, 1024, 8, 1.0), (64, 64, 64, 0.5)])
def test_fp16_auto_at_T0_is_no_worse_than_native_zgemm(m, k, n, phi):
    rng = np.random.default_rng(m + k + n)
    a, b = ozaki_matrix(rng, m, k, phi), ozaki_matrix(rng, k, n, phi)
    exact = exact_zgemm(a, b)
    c, info = zgemm(a, b, backend="fp16-auto", T=0, return_info=True)
    assert not info.fallback and info.num_splits is not None
    assert fp16.max_loss(fp16.backend.prepare(a).histogram, info.num_splits,
                         info.bits_per_slice) == 0
    assert max_relative_error(c, exact) <= max_relative_error(a @ b, exact)
    c1, info1 = zgemm(a, b, backend="fp16-auto", T=8, return_info=True)
    assert info1.num_splits <= info.num_splits


def test_fp16_auto_falls_back_when_no_split_count_is_enough():
    a = np.array([[1.0, 1e-300]], dtype=complex)  # 1000 bits of spread: more than 24 slices
    b = np.ones((2, 1), dtype=complex)
    c, info = zgemm(a, b, backend="fp16-auto", T=0, return_info=True)
    assert info.fallback and info.num_splits is None
    np.testing.assert_array_equal(c, a @ b)
    assert fp16.choose_num_splits(np.zeros(5, np.int64), np.zeros(5, np.int64), 11, 0) == 3


def test_bounds_for_the_new_backends():
    rng = np.random.default_rng(41)
    a, b = ozaki_matrix(rng, 12, 32, 2.0), ozaki_matrix(rng, 32, 9, 2.0)
    c, info = zgemm(a, b, backend="int8-cr", return_info=True)
    assert info.error_bound == pytest.approx(2.0**-53 * np.linalg.norm(a))
    assert bounds.scheme1(64, 5, 5, 1.0) > bounds.scheme1(64, 5, 7, 1.0)
    exact = exact_zgemm(a, b)
    c, info = zgemm(a, b, backend="fp16x4", return_info=True)
    assert 0 < np.linalg.norm(c - exact) <= info.error_bound * np.linalg.norm(b)


# -- through the simulator --------------------------------------------------------------------
def _brickwork(backend: str, device: str = "cpu", T: float = 0.0) -> np.ndarray:
    data = np.load(Path(__file__).parent / "data" / "brickwork_n10_d3_L4.npz")
    circuit = Circuit(10)
    for matrix, qubits in zip(data["matrices"], data["qubits"]):
        circuit.unitary(matrix, tuple(int(q) for q in qubits))
    result = Simulator(backend=backend, T=T, device=device, max_fused_qubits=0).run(circuit)
    sv = np.ascontiguousarray(result.statevector, dtype="<c16")
    assert np.isfinite(sv).all()
    return sv


def test_simulator_runs_the_new_backends():
    ref = _brickwork("zgemm")
    states = {name: _brickwork(name) for name in ("fp16x12", "fp16-auto", "int8-cr", "fp16-cr")}
    for name, sv in states.items():
        assert np.linalg.norm(sv - ref) < 1e-13, name
    # every gate correctly rounded from the same state: the two CR backends agree bit for bit
    np.testing.assert_array_equal(_bits(states["int8-cr"]), _bits(states["fp16-cr"]))


# -- GPU: the CPU's bits ----------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("backend", ("fp16x7", "fp16x12", "fp16-auto") + CR)
@pytest.mark.parametrize("m,k,n,phi", [(16, 64, 48, 1.0), (7, 1000, 5, 4.0), (64, 8, 300, 2.0)])
def test_gpu_equals_cpu_bitwise(backend, m, k, n, phi):
    cp = cupy_or_skip()
    rng = np.random.default_rng(51 + m)
    a, b = ozaki_matrix(rng, m, k, phi), ozaki_matrix(rng, k, n, phi)
    cpu, info_cpu = zgemm(a, b, backend=backend, T=0, return_info=True)
    gpu, info_gpu = zgemm(cp.asarray(a), cp.asarray(b), backend=backend, T=0, return_info=True)
    # + 0.0: the CPU's BLAS may give -0.0 where the GPU's integer sums give +0.0
    np.testing.assert_array_equal(_bits(cp.asnumpy(gpu) + 0.0), _bits(cpu + 0.0))
    assert info_gpu == info_cpu
    if backend in CR:
        np.testing.assert_array_equal(_bits(cpu), _bits(exact_zgemm(a, b)))
    small = zgemm(cp.asarray(a), cp.asarray(b), backend=backend, T=0, workspace_bytes=1)
    np.testing.assert_array_equal(_bits(cp.asnumpy(small) + 0.0), _bits(cpu + 0.0))


@pytest.mark.gpu
@pytest.mark.parametrize("backend", CR)
def test_gpu_cr_dgemm_and_subnormals(backend):
    cp = cupy_or_skip()
    rng = np.random.default_rng(52)
    a = ozaki_matrix(rng, 8, 64, 2.0).real * 2.0**-1000
    b = ozaki_matrix(rng, 64, 6, 2.0).real * 2.0**-62
    gpu = cp.asnumpy(dgemm(cp.asarray(a), cp.asarray(b), backend=backend))
    np.testing.assert_array_equal(_bits(gpu + 0.0), _bits(_exact_real(a, b) + 0.0))


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ("fp16x12", "fp16-auto") + CR)
def test_gpu_simulator_equals_cpu_bitwise(backend):
    cupy_or_skip()
    np.testing.assert_array_equal(_bits(_brickwork(backend, "gpu") + 0.0),
                                  _bits(_brickwork(backend, "cpu") + 0.0))

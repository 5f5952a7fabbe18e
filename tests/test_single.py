"""Single-precision GEMMs (:mod:`ozsim.gemm.single`): the TF32/FP16 roundings, accuracy of every
backend against an FP64 product of the same complex64 inputs, the real path, errors, GPU = CPU.

Error metrics (against ``ref = A64 @ B64``, the complex64 inputs converted exactly; its own
error, about ``2**-53 sqrt(k)``, is 10**-8 of the errors measured here):

* norm-wise ``||C - ref||_F / ||ref||_F`` and the mean of ``|c - ref| / |ref|`` over the entries:
  averages over thousands of entries, stable from seed to seed (tf32x3 / native: 1.2-1.5x,
  measured over 5 seeds at phi = 0.1 and 1, k = 512 and 4096);
* the maximum of ``|c - ref| / |ref|``: set by the most cancelling entry, where each method's
  error is one random draw of FP32 size, so its ratio between two methods swings between about
  0.4 and 3.5 from seed to seed; compared as the median over seeds.

On the GPU the emulated products run on tensor cores through cuBLAS, whose FP32 sums inside an
MMA truncate (round toward zero) rather than round to nearest: over a whole K that made tf32x3
and fp16-le 2.6x native CGEMM's norm-wise error at k = 512 and 4-8x at k = 4096..8192 (H200).
``hi*hi`` now runs in chunks of about ``sqrt(k)`` MMA steps whose FP32 results meet in sums
rounded to nearest (:mod:`ozsim.gemm.single.cuda`), and a state vector's gates of up to 4 qubits
apply the words on CUDA cores (:mod:`ozsim.gemm.single.onepass`), so the issue's 2x is the bar
on both devices.
"""

from __future__ import annotations

import numpy as np
import pytest

from ozsim.errors import NonFiniteError
from ozsim.gemm import GemmInfo
from ozsim.gemm import cgemm as cgemm_reexport
from ozsim.gemm.ozaki1 import PreparedOperand, bits_per_slice, mean_loss
from ozsim.gemm.single import BACKENDS, cgemm, parse, run, sgemm
from ozsim.gemm.single.legemm import SCALE_EXP, scale_shifts, split_fp16
from ozsim.gemm.single.rounding import round_fp16, round_tf32, split_tf32
from ozsim.testing import ozaki_matrix

EMULATED = ("tf32x3", "tf32x4", "fp16-le")


def _inputs(seed, m, k, n, phi, xp=np):
    rng = np.random.default_rng(seed)
    a = ozaki_matrix(rng, m, k, phi).astype(np.complex64)
    b = ozaki_matrix(rng, k, n, phi).astype(np.complex64)
    return (xp.asarray(a), xp.asarray(b)), a.astype(np.complex128) @ b.astype(np.complex128)


def _host(x):
    return x.get() if hasattr(x, "get") else x


def _errors(c, ref):
    """(max relative, norm-wise, mean relative) error; NaN/Inf anywhere gives inf for all."""
    c = _host(c).astype(np.complex128)
    if not np.isfinite(c).all():
        return np.inf, np.inf, np.inf
    rel = np.abs(c - ref) / np.abs(ref)
    return float(rel.max()), float(np.linalg.norm(c - ref) / np.linalg.norm(ref)), float(rel.mean())


# -- rounding -----------------------------------------------------------------------------------
def _random_float32(rng, size, lo_exp, hi_exp):
    x = rng.standard_normal(size) * np.exp2(rng.uniform(lo_exp, hi_exp, size))
    return x.astype(np.float32)


def test_round_tf32_is_round_to_nearest_even_with_13_zero_bits():
    rng = np.random.default_rng(0)
    x = _random_float32(rng, 200_000, -100, 100)
    hi = round_tf32(x)
    assert hi.dtype == np.float32
    assert not np.any(hi.view(np.uint32) & 0x1FFF)  # 13 low significand bits zero
    # nearest: |x - hi| <= half a TF32 unit, 2**(e - 11) for x in [2**e, 2**(e+1))
    e = np.floor(np.log2(np.abs(x.astype(np.float64))))
    assert np.all(np.abs(x.astype(np.float64) - hi) <= np.exp2(e - 11))
    # ties go to the even neighbour: 1 + 2**-11 lies halfway between 1 and 1 + 2**-10
    ties = np.array([1 + 2.0**-11, 1 + 3 * 2.0**-11, -(1 + 2.0**-11)], dtype=np.float32)
    np.testing.assert_array_equal(round_tf32(ties), [1.0, 1 + 2.0**-9, -1.0])


def test_round_tf32_edges_largest_finite_truncates_and_inf_nan_pass():
    big = np.finfo(np.float32).max
    hi = round_tf32(np.array([big, -big, np.inf, -np.inf, np.nan, 0.0, -0.0], dtype=np.float32))
    assert np.all(np.isfinite(hi[:2])) and hi[0] <= big and hi[1] == -hi[0]
    assert hi[0] == np.float32(2.0**127 * (2 - 2.0**-10))  # the largest TF32 number
    assert hi[2] == np.inf and hi[3] == -np.inf and np.isnan(hi[4])
    assert hi[5] == 0 and np.signbit(hi[6])


def test_round_tf32_rejects_other_dtypes():
    with pytest.raises(TypeError, match="round_tf32 needs float32, got float64"):
        round_tf32(np.ones(3))


def test_round_fp16_equals_numpy_float16_conversion():
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2**32, size=1_000_000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = np.concatenate([x[np.isfinite(x) & (np.abs(x) < 65520)],
                        _random_float32(rng, 300_000, -30, 15),  # FP16 normal and subnormal
                        np.array([65504, 65519, -2.0**-25, 2.0**-25, 3 * 2.0**-25], np.float32)])
    x = x[np.abs(x) < 65520]
    ref = x.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(round_fp16(x).view(np.uint32), ref.view(np.uint32))


def test_split_tf32_two_words_hold_fp32_to_one_unit_in_the_last_place():
    """``|x - hi - lo| <= 2**(e-23)`` for ``x`` in ``[2**e, 2**(e+1))``, ``e >= -114``; both
    words TF32. The bound is reached (it is not loose)."""
    rng = np.random.default_rng(2)
    x = _random_float32(rng, 500_000, -110, 120)
    x = x[np.abs(x) >= 2.0**-114]
    hi, lo = split_tf32(x)
    assert not np.any(hi.view(np.uint32) & 0x1FFF) and not np.any(lo.view(np.uint32) & 0x1FFF)
    e = np.floor(np.log2(np.abs(x.astype(np.float64))))
    ulps = np.abs(x.astype(np.float64) - hi - lo) / np.exp2(e - 23)
    assert ulps.max() == 1.0


def test_le_gemm_scaling_puts_each_row_max_in_2_14_to_2_15_and_words_are_fp16():
    rng = np.random.default_rng(3)
    x = _random_float32(rng, (6, 50), -3, 3)
    x[1] *= np.float32(1e-30)
    x[2] *= np.float32(1e30)
    x[3] = 0
    s = scale_shifts(x, 1)
    mx = np.abs(np.ldexp(x, s[:, None])).max(axis=1)
    nz = np.arange(6) != 3
    assert np.all((mx[nz] >= 2.0**SCALE_EXP) & (mx[nz] < 2.0**(SCALE_EXP + 1))) and s[3] == 0
    hi, lo = split_fp16(x, s[:, None])
    for w in (hi, lo):
        np.testing.assert_array_equal(w, w.astype(np.float16).astype(np.float32))
    # the residual word keeps FP32's precision: |xs - hi - 2**-10 lo| <= 2**(e-23)
    xs = np.ldexp(x.astype(np.float64), s[:, None])
    e = np.floor(np.log2(np.where(xs == 0, 1, np.abs(xs))))
    assert np.all(np.abs(xs - hi - lo / 1024.0) <= np.exp2(e - 23))


#: The bar for tf32x{3,4} and fp16-le against native CGEMM on both devices (module docstring).
BAR = 2


# -- accuracy against FP64 ----------------------------------------------------------------------
@pytest.mark.parametrize("phi", [0.1, 0.5, 1.0])
@pytest.mark.parametrize("backend", ["tf32x3", "fp16-le"])
def test_emulated_within_2x_of_native_cgemm(xp, backend, phi):
    """The issue's bar: within 2x of native CGEMM's error for phi <= 1 (module docstring for
    the metrics; each seed for the averages, the median over seeds for the maximum), on both
    devices, in each device's default complex form."""
    bar = BAR
    max_ratios = []
    for seed in range(5):
        (a, b), ref = _inputs(seed, 48, 512, 40, phi, xp)
        nat = _errors(cgemm(a, b), ref)
        emu = _errors(cgemm(a, b, backend=backend), ref)
        assert emu[1] <= bar * nat[1] and emu[2] <= bar * nat[2], (seed, emu, nat)
        max_ratios.append(emu[0] / nat[0])
    assert np.median(max_ratios) <= bar, max_ratios


def test_tf32x4_at_least_as_good_as_tf32x3_on_average(xp):
    e3, e4 = [], []
    for seed in range(4):
        (a, b), ref = _inputs(10 + seed, 32, 1024, 32, 1.0, xp)
        e3.append(_errors(cgemm(a, b, backend="tf32x3"), ref)[1])
        e4.append(_errors(cgemm(a, b, backend="tf32x4"), ref)[1])
    assert np.mean(e4) <= np.mean(e3), (e3, e4)


@pytest.mark.parametrize("backend", EMULATED)
def test_karatsuba_three_products_within_3x_of_native(backend):
    """Karatsuba's imaginary parts come out of a cancellation (:mod:`ozsim.gemm.single.backend`):
    measured 1.7-2.1x native's norm-wise error; bounded at 3x. Its real parts are the stacked
    form's."""
    (a, b), ref = _inputs(20, 48, 512, 40, 1.0)
    nat = _errors(cgemm(a, b), ref)
    c = cgemm(a, b, backend=backend, karatsuba=True)
    assert _errors(c, ref)[1] <= 3 * nat[1]
    assert _errors(c.real, ref.real)[1] <= 2 * _errors(cgemm(a, b).real, ref.real)[1]


def test_fp16_le_inputs_far_outside_fp16_range(xp):
    """Rows of A at 1e-30 and 1e30 (FP16 holds 6e-8..65504) and columns of B at 1e-5 and 1e5:
    the scaling makes every block FP32-accurate (norm-wise error below u sqrt(k) = 9.5e-7 with
    u = 2**-24, k = 256; native CGEMM: about 2e-7, LE-GEMM about 3.3e-7)."""
    rng = np.random.default_rng(4)
    a = ozaki_matrix(rng, 16, 256, 1.0)
    b = ozaki_matrix(rng, 256, 16, 1.0)
    a[:4] *= 1e-30
    a[4:8] *= 1e30
    b[:, :4] *= 1e-5
    b[:, 4:8] *= 1e5
    a, b = a.astype(np.complex64), b.astype(np.complex64)
    fp16 = np.finfo(np.float16)  # without scaling: 1e30 overflows FP16, 1e-30 flushes to 0
    assert float(fp16.max) < 1e30 and float(fp16.smallest_subnormal) > 1e-30
    ref = a.astype(np.complex128) @ b.astype(np.complex128)
    c = _host(cgemm(xp.asarray(a), xp.asarray(b), backend="fp16-le"))
    assert np.isfinite(c).all()
    for rows in (slice(0, 4), slice(4, 8), slice(8, 16)):
        for cols in (slice(0, 4), slice(4, 8), slice(8, 16)):
            blk = _errors(c[rows, cols], ref[rows, cols])
            assert blk[1] < 2.0**-24 * 16, (rows, cols, blk)


@pytest.mark.parametrize("T", [0.0, 1.0])
def test_int8_auto_single_counts_loss_against_24_bits(xp, T):
    """T = 0 keeps every bit below each row's scaling point; T = 1 lets the scalars lose one bit
    of 24 on average. Both sum in FP64 and round once to FP32, so they are far inside native
    CGEMM's error (measured 0.1x norm-wise); asserted <= 1x. Fewer slices than the FP64 rule
    (53 bits) picks for the same data."""
    (a, b), ref = _inputs(5, 48, 512, 40, 1.0, xp)
    c, info = cgemm(a, b, backend="int8-auto", T=T, return_info=True)
    assert c.dtype == np.complex64 and not info.fallback
    assert info.mean_loss_a <= T and info.mean_loss_b <= T
    hist = PreparedOperand(_host(a).astype(np.complex128)).histogram
    bits = bits_per_slice(512)
    assert info.mean_loss_a == mean_loss(hist, info.num_splits, bits, 24)
    assert mean_loss(hist, info.num_splits - 1, bits, 24) > T or info.num_splits == 3
    from ozsim.gemm import zgemm

    _, info64 = zgemm(xp.asarray(_host(a).astype(np.complex128)),
                      xp.asarray(_host(b).astype(np.complex128)), backend="int8-auto", T=T,
                      return_info=True)
    assert info.num_splits < info64.num_splits
    assert _errors(c, ref)[1] <= _errors(cgemm(a, b), ref)[1]


def test_mean_loss_significand_bits():
    """``loss = max(0, d + 1 + p - s b)``: 5 scalars at d = 0 and 3 at d = 10, s = 3, b = 7.
    The default stays FP64's rule, p = 53."""
    hist = np.zeros(2201, dtype=np.int64)
    hist[0], hist[10] = 5, 3
    assert mean_loss(hist, 3, 7, 24) == (5 * 4 + 3 * 14) / 8
    assert mean_loss(hist, 3, 7) == mean_loss(hist, 3, 7, 53) == (5 * 33 + 3 * 43) / 8
    assert mean_loss(hist, 4, 7, 24) == 3 * 7 / 8


def test_int8_auto_single_falls_back_to_native_beyond_18_slices():
    """Entries 2**-120 below their row's largest need more than 18 slices at T = 0."""
    (a, b), _ = _inputs(7, 8, 64, 8, 0.1)
    a[:, 1] *= np.float32(2.0**-120)
    c, info = cgemm(a, b, backend="int8-auto", T=0.0, return_info=True)
    assert info.fallback and info.num_splits is None
    np.testing.assert_array_equal(c, a @ b)


# -- real path ----------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_sgemm_real_product(xp, backend):
    """float32 products; n odd so that int8-auto's packing of column halves has a lone column.
    tf32x*/fp16-le within 2x of native SGEMM norm-wise, int8-auto within it."""
    rng = np.random.default_rng(8)
    a = ((rng.random((40, 300)) - 0.5) * np.exp(rng.standard_normal((40, 300)))).astype(np.float32)
    b = ((rng.random((300, 37)) - 0.5) * np.exp(rng.standard_normal((300, 37)))).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    c, info = sgemm(xp.asarray(a), xp.asarray(b), backend=backend, return_info=True)
    assert c.dtype == np.float32 and c.shape == (40, 37) and isinstance(info, GemmInfo)
    err = _errors(_host(c), ref)[1]
    nat = _errors(a @ b, ref)[1]
    bar = 1 if backend == "int8-auto" else BAR
    assert err <= bar * nat, (err, nat)


# -- the API ------------------------------------------------------------------------------------
def test_backends_parse_and_reexport():
    assert BACKENDS == ("cgemm", "tf32x3", "tf32x4", "fp16-le", "int8-auto")
    assert parse(" TF32x3 ").name == "tf32x3" and parse("int8-auto").auto
    assert cgemm_reexport is cgemm


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_strided_b_and_info(backend):
    """``out`` is written and returned; a strided view of B (a state's view) gives the same bits
    as a contiguous copy."""
    (a, b), _ = _inputs(9, 16, 64, 24, 0.5)
    wide = np.zeros((64, 48), dtype=np.complex64)
    wide[:, ::2] = b
    out = np.empty((16, 24), dtype=np.complex64)
    c, info = cgemm(a, wide[:, ::2], backend=backend, out=out, return_info=True)
    assert c is out and info.backend == backend
    np.testing.assert_array_equal(c, cgemm(a, np.ascontiguousarray(b), backend=backend))
    if backend in EMULATED:
        assert (info.num_splits, info.bits_per_slice) == (2, 11)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(0, 4, 3), (3, 0, 4), (3, 4, 0)])
def test_empty_products(backend, shape):
    m, k, n = shape
    c = cgemm(np.ones((m, k), np.complex64), np.ones((k, n), np.complex64), backend=backend)
    assert c.shape == (m, n) and not np.any(c)


def test_run_is_the_engine_entry():
    (a, b), _ = _inputs(11, 8, 8, 32, 1.0)
    c, info = run(a, b, "tf32x3", T=1.0, out=None, xp=np, check_finite=True)
    np.testing.assert_array_equal(c, cgemm(a, b, backend="tf32x3"))
    assert info == GemmInfo("tf32x3", 2, 11)


def test_type_errors():
    a = np.ones((2, 3), np.complex64)
    b = np.ones((3, 4), np.complex64)
    with pytest.raises(TypeError, match="a must be complex64, got complex128"):
        cgemm(a.astype(np.complex128), b)
    with pytest.raises(TypeError, match="b must be complex64, got float32"):
        cgemm(a, b.real.copy())
    with pytest.raises(TypeError, match="a must be float32, got complex64"):
        sgemm(a, b)
    with pytest.raises(TypeError, match="out must be complex64, got complex128"):
        cgemm(a, b, out=np.empty((2, 4), np.complex128))
    fake_gpu_array = type("ndarray", (), {"__module__": "cupy"})()
    with pytest.raises(TypeError, match="arrays from different libraries cannot be mixed"):
        cgemm(a, fake_gpu_array)
    with pytest.raises(TypeError, match="backend must be a string, got int"):
        cgemm(a, b, backend=3)


def test_value_errors():
    a = np.ones((2, 3), np.complex64)
    b = np.ones((3, 4), np.complex64)
    with pytest.raises(ValueError, match="unknown single-precision backend 'zgemm'; expected "
                                         "one of cgemm, tf32x3, tf32x4, fp16-le, int8-auto"):
        cgemm(a, b, backend="zgemm")
    with pytest.raises(ValueError, match=r"inner dimensions differ: a is \(2, 3\), b is \(4, 3\)"):
        cgemm(a, np.ones((4, 3), np.complex64))
    with pytest.raises(ValueError, match=r"a must be a 2-D matrix, got shape \(3,\)"):
        cgemm(np.ones(3, np.complex64), b)
    with pytest.raises(ValueError, match="T must be >= 0 bits, got -1"):
        cgemm(a, b, backend="int8-auto", T=-1)
    with pytest.raises(ValueError, match=r"out must have shape \(2, 4\), got \(4, 2\)"):
        cgemm(a, b, out=np.empty((4, 2), np.complex64))
    sq = np.ones((3, 3), np.complex64)
    with pytest.raises(ValueError, match="out overlaps b; pass a separate output array"):
        cgemm(np.ones((3, 3), np.complex64), sq, out=sq)
    with pytest.raises(ValueError, match="out overlaps a; pass a separate output array"):
        cgemm(sq, np.ones((3, 3), np.complex64), out=sq)
    with pytest.raises(ValueError, match="karatsuba=True needs a real scheme .*not 'cgemm'"):
        cgemm(a, b, karatsuba=True)
    with pytest.raises(ValueError, match="karatsuba=True needs a real scheme .*not 'int8-auto'"):
        run(a, b, "int8-auto", karatsuba=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_inputs_raise(xp, backend, bad):
    (a, b), _ = _inputs(12, 8, 16, 8, 0.5)
    for target in ("a", "b"):
        x, y = a.copy(), b.copy()
        (x if target == "a" else y)[1, 2] = bad
        with pytest.raises(NonFiniteError, match="GEMM operand has NaN or Inf entries"):
            cgemm(xp.asarray(x), xp.asarray(y), backend=backend)
        with pytest.raises(NonFiniteError, match="GEMM operand has NaN or Inf entries"):
            sgemm(xp.asarray(x.real.copy()), xp.asarray(y.real.copy()), backend=backend)


def test_unchecked_nan_propagates_and_fp16_le_always_checks():
    (a, b), _ = _inputs(13, 8, 16, 8, 0.5)
    a[3, 4] = np.nan
    for backend in ("cgemm", "tf32x3", "tf32x4"):
        c = cgemm(a, b, backend=backend, check_finite=False)
        assert np.isnan(c[3]).all() and np.isfinite(np.delete(c, 3, axis=0)).all()
    with pytest.raises(NonFiniteError, match="GEMM operand has NaN or Inf entries"):
        cgemm(a, b, backend="fp16-le", check_finite=False)


# -- GPU ----------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("karatsuba", [False, True])
def test_gpu_matches_cpu(backend, karatsuba):
    """The same algorithm on both devices; not bitwise: cuBLAS and BLAS add the FP32 products in
    other orders (and tensor cores may truncate inside their sums), so the two differ by FP32
    rounding: within native CGEMM's error (against FP64) times 3 (CPU, Karatsuba's included)
    plus 2 (GPU) of each other, norm-wise."""
    from conftest import cupy_or_skip

    cp = cupy_or_skip()
    if karatsuba and backend not in EMULATED:
        pytest.skip("Karatsuba is for the real schemes")
    (a, b), ref = _inputs(14, 96, 1024, 80, 1.0)
    c_cpu = cgemm(a, b, backend=backend, karatsuba=karatsuba)
    c_gpu = cgemm(cp.asarray(a), cp.asarray(b), backend=backend, karatsuba=karatsuba).get()
    nat = _errors(cgemm(a, b), ref)[1]
    bar = 2 if backend in ("cgemm", "int8-auto") else 3 + BAR  # (Karatsuba: 2.1x CPU)
    assert _errors(c_gpu, c_cpu.astype(np.complex128))[1] <= bar * nat


@pytest.mark.gpu
def test_gpu_words_are_the_cpu_words():
    """The split kernels and the NumPy roundings compute the same bits (strided inputs)."""
    from conftest import cupy_or_skip

    cp = cupy_or_skip()
    from ozsim.gemm.single import cuda

    rng = np.random.default_rng(15)
    x = _random_float32(rng, (64, 96), -40, 40)
    xg = cp.asarray(x)[:, ::2]
    hi, lo = cp.empty((64, 48), cp.float32), cp.empty((64, 48), cp.float32)
    cuda._TF32_SPLIT(xg, hi, lo)
    h, l = split_tf32(np.ascontiguousarray(x[:, ::2]))
    np.testing.assert_array_equal(hi.get().view(np.uint32), h.view(np.uint32))
    np.testing.assert_array_equal(lo.get().view(np.uint32), l.view(np.uint32))
    s = scale_shifts(x[:, ::2], 1)
    hi16, lo16 = cp.empty((64, 48), cp.float16), cp.empty((64, 48), cp.float16)
    cuda._FP16_SPLIT(xg, cp.asarray(s)[:, None], hi16, lo16)
    h, l = split_fp16(x[:, ::2], s[:, None])
    np.testing.assert_array_equal(hi16.get().astype(np.float32), h)
    np.testing.assert_array_equal(lo16.get().astype(np.float32), l)


@pytest.mark.gpu
@pytest.mark.parametrize("phi", [0.1, 1.0])
@pytest.mark.parametrize("backend", ["tf32x3", "fp16-le"])
@pytest.mark.parametrize("karatsuba", [None, False])
def test_gpu_long_k_within_2x_of_native(backend, phi, karatsuba):
    """At k = 8192 a whole-K tensor-core sum made tf32x3 8x and fp16-le 4x native CGEMM's error
    (and cuBLAS's CGEMM of this small C splits K: 4.9e-7, 5x below its square products'); in
    chunks of 16 MMA steps both are within 2x, in both complex forms."""
    from conftest import cupy_or_skip

    cp = cupy_or_skip()
    (a, b), ref = _inputs(30, 128, 8192, 96, phi)
    a, b = cp.asarray(a), cp.asarray(b)
    nat = _errors(cgemm(a, b), ref)[1]
    assert _errors(cgemm(a, b, backend=backend, karatsuba=karatsuba), ref)[1] <= BAR * nat


@pytest.mark.gpu
def test_gpu_hi_hi_chunks_are_about_sqrt_k_mma_steps():
    from conftest import cupy_or_skip

    cupy_or_skip()
    from ozsim.gemm.single.cuda import chunk

    big = 1 << 24
    assert [chunk(k, "tf32", big) for k in (1, 4, 512, 1000, 4096, 8192)] == [8, 16, 128, 128,
                                                                              512, 512]
    assert [chunk(k, "fp16", big) for k in (1, 16, 512, 8192, 16384)] == [16, 64, 256, 1024, 2048]
    assert [chunk(k, w, 1 << 22) for k in (64, 8192) for w in ("tf32", "fp16")] == [64, 128, 128,
                                                                                    256]

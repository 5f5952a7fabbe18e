"""ozsim.gemm against an exact integer reference (ozsim.testing.exact_zgemm), never against itself."""

from __future__ import annotations

import numpy as np
import pytest

from ozsim import NonFiniteError
from ozsim.gemm import GemmInfo, PreparedOperand, bits_per_slice, parse_backend, zgemm
from ozsim.gemm.ozaki1.scheme import (
    _float32_exact,
    _products_numpy,
    choose_num_splits,
    loss_histogram,
    mean_loss,
    row_exponents,
    split_columns,
    split_rows,
)
from ozsim.testing import exact_zgemm, max_relative_error, ozaki_matrix

PHIS = (0.1, 1.0, 2.0, 4.0)


@pytest.fixture(scope="module")
def ozaki_cases():
    """Fresh Ozaki inputs per phi with their exact products (computed once per module)."""
    rng = np.random.default_rng(20261122)
    cases = {}
    for phi in PHIS:
        a = ozaki_matrix(rng, 24, 96, phi)
        b = ozaki_matrix(rng, 96, 20, phi)
        cases[phi] = (a, b, exact_zgemm(a, b))
    return cases


def test_exact_reference_is_exact():
    # Entries chosen so that FP64 loses everything: (2**60 + 1) - 2**60 cancels.
    a = np.array([[2.0**60, 1.0, -(2.0**60)]], dtype=np.complex128)
    b = np.array([[1.0], [1.0], [1.0]], dtype=np.complex128)
    assert exact_zgemm(a, b)[0, 0] == 1.0


@pytest.mark.parametrize("phi", PHIS)
def test_int8_error_falls_with_splits(ozaki_cases, phi):
    a, b, ref = ozaki_cases[phi]
    errs = [max_relative_error(zgemm(a, b, backend=f"int8x{s}"), ref) for s in range(3, 19)]
    native = max_relative_error(a @ b, ref)
    # Until the error reaches the FP64 floor, every extra slice (7 more bits) must cut it.
    for s, (e0, e1) in enumerate(zip(errs, errs[1:]), start=3):
        if e0 > 1e-14:
            assert e1 < e0 / 4, f"phi={phi}: int8x{s + 1} error {e1:.2e} vs int8x{s} {e0:.2e}"
    assert errs[0] > 1e-6  # 3 slices keep ~21 bits: the test can tell slices apart
    assert errs[-1] <= max(native, 2.3e-16)  # 18 slices: at least as good as native, all phi


@pytest.mark.parametrize("phi", PHIS)
def test_int8_auto_T0_within_2x_of_native(ozaki_cases, phi):
    a, b, ref = ozaki_cases[phi]
    native = max_relative_error(a @ b, ref)
    c, info = zgemm(a, b, backend="int8-auto", T=0, return_info=True)
    assert isinstance(info, GemmInfo) and not info.fallback
    assert info.mean_loss_a == 0.0 and info.mean_loss_b == 0.0
    assert max_relative_error(c, ref) <= 2 * max(native, 1.1e-16)


@pytest.mark.parametrize("phi", PHIS)
def test_int8_auto_T1_picks_fewer_splits_and_stays_accurate(ozaki_cases, phi):
    a, b, ref = ozaki_cases[phi]
    _, info0 = zgemm(a, b, backend="int8-auto", T=0, return_info=True)
    c, info1 = zgemm(a, b, backend="int8-auto", T=1, return_info=True)
    assert info1.num_splits <= info0.num_splits
    assert info1.mean_loss_a <= 1 and info1.mean_loss_b <= 1
    # s-1 splits would exceed T for some operand: s is the fewest that qualifies
    prep = PreparedOperand(a)
    hist_b = loss_histogram(b.T, row_exponents(b.T))
    s, bits = info1.num_splits, info1.bits_per_slice
    assert max(mean_loss(prep.histogram, s - 1, bits), mean_loss(hist_b, s - 1, bits)) > 1
    assert max_relative_error(c, ref) < 1e-12


def test_native_zgemm_matches_reference(ozaki_cases):
    a, b, ref = ozaki_cases[1.0]
    assert max_relative_error(zgemm(a, b, backend="zgemm"), ref) < 1e-13


def test_slice_products_are_exact_at_the_bound():
    """The FP64-BLAS integer GEMM is exact for slices of magnitude 127 (module docstring)."""
    rng = np.random.default_rng(1)
    k, s = 2048, 18
    bits = bits_per_slice(k)
    assert 2 * (s - 1) * k * (2**bits - 1) ** 2 < 2**53
    a = rng.choice([-127.0, 127.0], size=(4, s, k))  # (2m, s, k): A_1..A_s
    b = rng.choice([-127.0, 127.0], size=(s, k, 6))  # (s, k, 2n): B_s..B_1 (reversed)
    a_int = a.astype(np.int64).astype(object)
    b_int = b.astype(np.int64).astype(object)
    seen = 0
    for t, p in _products_numpy(a.reshape(4, s * k), b.reshape(s * k, 6), s, k):
        # P_t = sum_{i=1}^{t-1} A_i B_{t-i}; B_j sits at position s - j
        exact = sum(a_int[:, i - 1, :].dot(b_int[s - (t - i)]) for i in range(1, t))
        assert np.array_equal(p.astype(np.int64).astype(object), exact), f"t={t}"
        seen += 1
    assert seen == s


@pytest.mark.parametrize("k, expected", [(1, 7), (16, 7), (2**17, 7), (2**18, 6), (2**20, 5)])
def test_bits_per_slice(k, expected):
    assert bits_per_slice(k) == expected
    assert k * (2**expected - 1) ** 2 < 2**31


def test_bits_per_slice_rejects_bad_k():
    with pytest.raises(ValueError, match="must be >= 1"):
        bits_per_slice(0)
    with pytest.raises(ValueError, match="too large"):
        bits_per_slice(2**30)


def test_float32_products_exact_where_claimed():
    """Where the CPU path uses FP32 BLAS, P_t at the magnitude bound still comes out exact."""
    rng = np.random.default_rng(8)
    for k, s in [(4, 18), (16, 18), (32, 16), (128, 8)]:
        assert _float32_exact(k, s, 7)
        a = rng.choice([-127.0, 127.0], size=(2, s * k)).astype(np.float32)
        b = rng.choice([-127.0, 127.0], size=(s * k, 3)).astype(np.float32)
        for t, p in _products_numpy(a, b, s, k):
            ref = a[:, : (t - 1) * k].astype(np.int64) @ b[(s - t + 1) * k :].astype(np.int64)
            assert np.array_equal(p.astype(np.int64), ref)
    assert not _float32_exact(64, 18, 7) and not _float32_exact(256, 8, 7)


def test_split_columns_matches_split_rows():
    rng = np.random.default_rng(9)
    b = ozaki_matrix(rng, 8, 5, 2.0)
    e = row_exponents(b.T)
    rows = split_rows(b.T, e, 6, 7, reverse=True)  # (2n, s, k)
    cols = split_columns(b, e, 6, 7).reshape(6, 8, 10)  # (s, k, 2n)
    assert np.array_equal(cols, rows.transpose(1, 2, 0))


def test_split_reconstructs_within_truncation_bound():
    rng = np.random.default_rng(2)
    x = ozaki_matrix(rng, 8, 32, 2.0)
    e = row_exponents(x)
    for s in (3, 6, 9):
        sl = split_rows(x, e, s, 7)
        assert np.all(np.abs(sl) <= 127) and np.array_equal(sl, np.trunc(sl))
        w = 2.0 ** (-7 * np.arange(1, s + 1))
        rec = np.einsum("rsk,s->rk", sl, w)
        scaled = np.concatenate([np.ldexp(x.real, -e[:, None]), np.ldexp(x.imag, -e[:, None])])
        assert np.all(np.abs(scaled - rec) < 2.0 ** (-7 * s))
        assert np.all(np.abs(scaled) < 1)


def test_split_is_unbiased():
    """Rounded slices: the products the scheme drops do not shrink the result systematically.

    With truncated slices every dropped term has the sign of the value, so for positive inputs
    every computed entry falls below the exact one; this test fails for that split."""
    rng = np.random.default_rng(12)
    a = rng.random((48, 64)) + 0j
    b = rng.random((64, 48)) + 0j
    ref = exact_zgemm(a, b)
    rel = ((zgemm(a, b, backend="int8x5") - ref) / ref).real.ravel()
    assert rel.std() > 0
    assert abs(rel.mean()) < 0.2 * rel.std(), (rel.mean(), rel.std())
    assert 0.3 < np.mean(rel > 0) < 0.7


def test_mean_loss_by_hand():
    # one scalar at the row maximum (d = 0) and one 10 bits below it (d = 10), b = 7
    hist = np.zeros(2201, dtype=np.int64)
    hist[0], hist[10] = 1, 1
    # s = 8: 56 bits kept; losses max(0, 0+54-56)=0 and max(0, 10+54-56)=8 -> mean 4
    assert mean_loss(hist, 8, 7) == 4.0
    assert mean_loss(hist, 10, 7) == 0.0
    assert mean_loss(np.zeros(5, dtype=np.int64), 3, 7) == 0.0
    assert choose_num_splits(hist, hist, 7, 0.0) == 10  # 10*7 = 70 >= 10 + 54
    assert choose_num_splits(hist, hist, 7, 4.0) == 8


def test_choose_num_splits_is_the_first_s_both_mean_losses_allow():
    """The vectorised rule against its definition (ozIMMU Sec. 4.4): the first s in 3..18 whose
    mean_loss is <= T for both operands, on random histograms (empty, narrow, wide, both
    significands), thresholds at and between the losses."""
    from ozsim.gemm.ozaki1.scheme import MAX_SPLITS, MIN_SPLITS, fewest_splits

    rng = np.random.default_rng(12)
    picked = set()
    for _ in range(600):
        hists = []
        for _ in range(2):
            h = np.zeros(2201, dtype=np.int64)
            k = int(rng.integers(0, 40))
            np.add.at(h, rng.integers(0, int(rng.choice([12, 80, 2201])), k),
                      rng.integers(1, 2**int(rng.integers(1, 31)), k))
            hists.append(h)
        bits, p = int(rng.choice([6, 7])), int(rng.choice([53, 24]))
        T = float(rng.choice([0.0, 0.5, 1.0, 3.0, 17.0]))
        want = next((s for s in range(MIN_SPLITS, MAX_SPLITS + 1)
                     if mean_loss(hists[0], s, bits, p) <= T
                     and mean_loss(hists[1], s, bits, p) <= T), None)
        assert choose_num_splits(*hists, bits, T, p) == want
        one = fewest_splits(hists[0], bits, T, p)
        assert one == next((s for s in range(MIN_SPLITS, MAX_SPLITS + 1)
                            if mean_loss(hists[0], s, bits, p) <= T), None)
        picked.add(want)
    assert None in picked and len(picked) > 5  # (the cases reach both ends of the range)


def test_auto_counts_nonzeros_only_on_the_first_gate():
    """|0...0> has one nonzero: the literal ozIMMU mean (zeros included) would pick s = 3."""
    rng = np.random.default_rng(3)
    from scipy.stats import unitary_group

    gate = unitary_group.rvs(16, random_state=rng)
    state = np.zeros((16, 2**12), dtype=np.complex128)
    state[0, 0] = 1.0
    c, info = zgemm(gate, state, backend="int8-auto", T=1, return_info=True)
    assert info.num_splits >= 8
    assert np.max(np.abs(c - gate @ state)) < 1e-15


@pytest.mark.parametrize("backend, field", [("int8-auto", "num_splits"),
                                            ("int8-crt-auto", "num_moduli")])
def test_auto_falls_back_when_no_split_count_suffices(backend, field):
    a = np.full((2, 64), 1e-300, dtype=np.complex128)
    a[:, 0] = 1.0  # every row spans ~1000 binades: no s <= 18 (no N <= 20) keeps it within T
    b = ozaki_matrix(np.random.default_rng(4), 64, 3, 1.0)
    c, info = zgemm(a, b, backend=backend, T=1, return_info=True)
    assert info.fallback and getattr(info, field) is None
    np.testing.assert_array_equal(c, a @ b)


#: Relative tolerance per backend off the default 1e-15 (few bits kept).
_EXTREME_TOL = {"int8x7": 1e-9, "int8-crt8": 1e-4}


@pytest.mark.parametrize("backend", ["int8x7", "int8x13", "int8-auto", "int8-crt8", "int8-crt16",
                                     "int8-crt-auto"])
def test_zero_rows_columns_subnormal_and_extreme_exponents(backend):
    rng = np.random.default_rng(5)
    a = ozaki_matrix(rng, 6, 16, 1.0)
    b = ozaki_matrix(rng, 16, 5, 1.0)
    a[2] = 0  # zero row
    b[:, 3] = 0  # zero column
    a[4] *= 2.0**-1060  # subnormal row
    a[5] *= 2.0**1000  # huge row
    b[:, 1] *= 2.0**-900  # tiny column: a[5] @ b[:, 1] is normal again
    ref = exact_zgemm(a, b)
    c = zgemm(a, b, backend=backend, T=0)
    assert np.all(c[2] == 0) and np.all(c[:, 3] == 0)
    assert np.isfinite(c).all()
    ok = np.abs(ref) > 2.0**-1000  # outside the subnormal range, relative error is meaningful
    tol = _EXTREME_TOL.get(backend, 1e-15)
    rel = np.abs(c[ok] - ref[ok]) / np.abs(ref[ok])
    assert rel.max() < tol
    # the subnormal row: absolute error within a few subnormal ulps of the exact result
    if backend != "int8-crt8":
        assert np.max(np.abs(c[4] - ref[4])) <= 64 * 2.0**-1074


def test_blocking_does_not_change_bits():
    rng = np.random.default_rng(6)
    a = ozaki_matrix(rng, 8, 8, 2.0)
    b = ozaki_matrix(rng, 8, 1000, 2.0)
    c1 = zgemm(a, b, backend="int8x9")
    c2 = zgemm(a, b, backend="int8x9", workspace_bytes=1)  # one column at a time
    c3 = zgemm(PreparedOperand(a), b[:, ::1], backend="int8x9", workspace_bytes=40_000)
    assert np.array_equal(c1, c2) and np.array_equal(c1, c3)


def test_strided_b_and_out_buffer():
    rng = np.random.default_rng(7)
    a = ozaki_matrix(rng, 4, 4, 1.0)
    big = ozaki_matrix(rng, 8, 12, 1.0)
    b = big[::2, ::3]  # non-contiguous
    out = np.full((4, 4), np.nan, dtype=np.complex128)
    res = zgemm(a, b, backend="int8x12", out=out)
    assert res is out
    assert max_relative_error(out, exact_zgemm(a, np.ascontiguousarray(b))) < 1e-15


@pytest.mark.parametrize(
    "backend", ["zgemm", "int8x8", "int8-auto", "int8-crt9", "int8-crt-auto"]
)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, complex(0, np.nan)])
def test_nonfinite_inputs_raise(backend, bad):
    a = np.eye(4, dtype=np.complex128)
    b = np.ones((4, 3), dtype=np.complex128)
    a2 = a.copy()
    a2[1, 2] = bad
    with pytest.raises(NonFiniteError, match="NaN or Inf"):
        zgemm(a2, b, backend=backend)
    b2 = b.copy()
    b2[3, 0] = bad
    with pytest.raises(NonFiniteError, match="NaN or Inf"):
        zgemm(a, b2, backend=backend)


def test_bad_shapes_dtypes_and_backends():
    a = np.eye(4, dtype=np.complex128)
    with pytest.raises(TypeError, match="must be complex128, got float64"):
        zgemm(a.real, a)
    with pytest.raises(ValueError, match="2-D matrix"):
        zgemm(a[0], a)
    with pytest.raises(ValueError, match="inner dimensions differ"):
        zgemm(a, a[:3])
    with pytest.raises(ValueError, match="out must have shape"):
        zgemm(a, a, out=np.empty((3, 3), np.complex128))
    with pytest.raises(ValueError, match="T must be >= 0"):
        zgemm(a, a, T=-1)
    with pytest.raises(ValueError, match="unknown backend 'int4x3'"):
        parse_backend("int4x3")
    with pytest.raises(ValueError, match="must be in 3..18"):
        parse_backend("int8x19")
    with pytest.raises(TypeError, match="backend must be a string"):
        parse_backend(8)
    assert parse_backend("INT8X5") == ("int8", 5)


@pytest.mark.parametrize("backend", ["zgemm", "int8x5", "int8-crt8"])
def test_out_overlapping_an_operand_is_rejected(backend):
    rng = np.random.default_rng(0)
    a = ozaki_matrix(rng, 4, 4, 1.0)
    buf = ozaki_matrix(rng, 4, 8, 1.0)
    with pytest.raises(ValueError, match="out overlaps b"):
        zgemm(a, buf[:, :4], backend=backend, out=buf[:, 2:6])
    with pytest.raises(ValueError, match="out overlaps a"):
        zgemm(a, buf[:, :4], backend=backend, out=a)
    out = np.empty((4, 4), dtype=complex)
    np.testing.assert_array_equal(zgemm(a, buf[:, :4], backend=backend, out=out), out)

"""Ozaki scheme II (int8-crt{N}, int8-crt-auto) against exact integer references, never itself."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from qiskit import QuantumCircuit
from qiskit.circuit.library import UnitaryGate
from qiskit.quantum_info import Statevector

from ozsim import Circuit
from ozsim.gates.haar import haar_unitary
from ozsim.errors import NonFiniteError
from ozsim.gemm import GemmInfo, PreparedCRTOperand, ozaki1, parse_backend, zgemm
from ozsim.gemm.ozaki2.scheme import (
    MAX_K,
    MODULI,
    NORM_OVERSHOOT,
    BoundStats,
    _float32_exact,
    analyse_rows,
    bound_stats,
    choose_plan,
    crt_constants,
    crt_reconstruct,
    fixed_plan,
    kept_bits,
    norm_exponents,
    residues,
    rounds_to_nearest,
    scaled_pieces,
    sym_mod,
)
from ozsim.reference import dd_zgemm
from ozsim.simulator import Simulator
from ozsim.statevector import gemm_prepare
from ozsim.testing import exact_zgemm, max_relative_error, ozaki_matrix, phase_aligned

PHIS = (0.1, 1.0, 2.0, 4.0)
EPS = 2.0**-53


@pytest.fixture(scope="module")
def ozaki_cases():
    """Ozaki inputs per phi (the shapes of tests/test_gemm.py) with their exact products."""
    rng = np.random.default_rng(20261122)
    cases = {}
    for phi in PHIS:
        a = ozaki_matrix(rng, 24, 96, phi)
        b = ozaki_matrix(rng, 96, 20, phi)
        cases[phi] = (a, b, exact_zgemm(a, b))
    return cases


def _sym(v: int, p: int) -> int:
    """Python-int symmetric residue in [-(p // 2), (p - 1) // 2]."""
    r = v % p
    return r - p if r > (p - 1) // 2 else r


def _int(x: float) -> int:
    return int(Fraction(float(x)))


# -- constants and exact building blocks ----------------------------------------------------------
def test_moduli_and_constants():
    for i, p in enumerate(MODULI):
        assert 2 <= p <= 256 and all(math.gcd(p, q) == 1 for q in MODULI[:i])
    assert MODULI[:4] == (256, 255, 253, 251) and len(MODULI) == 20
    for n in range(2, 21):
        c = crt_constants(n)
        assert c.P == math.prod(MODULI[:n])
        assert 2 ** (c.gamma + 1) < c.P < 2 ** (c.gamma + 2)
        assert c.P * (1 - 2.0**-40) > 2 ** (c.gamma + 1)  # truncation always has the margin
        for p, q, digits in zip(c.moduli, c.weights, c.limbs_M):
            assert (c.P // p) * q % p == 1
            assert sum(int(d) << (40 * j) for j, d in enumerate(digits)) == c.P // p
            assert all(0 <= d < 2**40 for d in digits)
        assert sum(int(d) << (40 * j) for j, d in enumerate(c.limbs_P)) == c.P
    assert [kept_bits(n) for n in (2, 14, 16, 20)] == [14, 109, 124, 154]
    with pytest.raises(ValueError, match="must be in 2..20"):
        crt_constants(21)


def test_sym_mod_is_exact_up_to_2_52():
    rng = np.random.default_rng(10)
    vals = [0, 1, -1, 2**52, -(2**52), 2**52 - 1, 127, 128, -128, -129, 255, 256, 12345678901234]
    vals += [int(v) for v in rng.integers(-(2**52), 2**52, size=2000, dtype=np.int64)]
    x = np.array(vals, dtype=np.float64)
    assert all(_int(v) == w for v, w in zip(x, vals))
    for p in MODULI:
        r = sym_mod(x, p)
        assert [_int(v) for v in r] == [_sym(v, p) for v in vals], p


def test_rounding_rule_keeps_the_crt_margin():
    """Rounding to nearest only where (2**gA + 2**8)(2**gB + 2**8) < (P/2)(1 - 2**-40) (exact
    integers): every fixed plan from N = 3 on, every plan with min(gA, gB) >= 15; not N = 2."""
    for n in range(2, 21):
        plan, c = fixed_plan(n), crt_constants(n)
        want = 2 * (2**plan.bits_a + 2**8) * (2**plan.bits_b + 2**8) * 2**40 < c.P * (2**40 - 1)
        assert plan.rounding == want == (n >= 3)
        for ga in range(15, c.gamma - 14):
            assert rounds_to_nearest(n, ga, c.gamma - ga)
    assert not rounds_to_nearest(14, 2, 107)


@pytest.mark.parametrize("rounding", [True, False])
def test_scaled_pieces_and_residues_match_python_ints(rounding):
    """Rows scaled to 60, 100 and 150 bits: exact pieces; residues (with the CRT weight folded
    in, and Karatsuba's Re + Im) equal Python-integer arithmetic on rint(x 2**(g - f)) (ties to
    even) or trunc(x 2**(g - f))."""
    rng = np.random.default_rng(11)
    x = ozaki_matrix(rng, 5, 7, 4.0)
    x[1] *= 2.0**-1060  # subnormal row
    x[2] *= 2.0**1000
    x[3, 1:] = 0
    f = norm_exponents(x, ozaki1.row_exponents(x))
    for g in (60, 100, 150):
        shift = (g - f)[:, None]
        pr = scaled_pieces(x.real, shift, g, rounding=rounding)
        pi = scaled_pieces(x.imag, shift, g, rounding=rounding)
        assert pr.shape[0] == -(-g // 52) and np.all(np.abs(pr) <= 2**52)
        rnd = round if rounding else int  # Python's round: to nearest, ties to even
        exact = [[
            [rnd(Fraction(float(v)) * Fraction(2) ** int(s)) for v, s in zip(row, srow)]
            for row, srow in zip(part, np.broadcast_to(shift, x.shape))
        ] for part in (x.real, x.imag)]
        for t, pieces in enumerate((pr, pi)):
            got = sum(pieces[j].astype(object) * (1 << (52 * j)) for j in range(pieces.shape[0]))
            got = [[_int(v) if not isinstance(v, int) else v for v in row] for row in got]
            assert got == exact[t]
            assert all(abs(v) <= 2**g for row in exact[t] for v in row)
        for p, w in ((256, 1), (255, 7), (173, 101)):
            r = residues(pr, pi, p, w)
            for t, ex in enumerate((exact[0], exact[1],
                                    [[u + v for u, v in zip(r0, r1)]
                                     for r0, r1 in zip(exact[0], exact[1])])):
                want = [[_sym(w * v, p) for v in row] for row in ex]
                assert r[t].astype(np.int64).tolist() == want, (g, p, t)
            assert r.min() >= -(p // 2) and r.max() <= (p - 1) // 2


def test_norm_exponents_bound_the_row_norm_tightly():
    rng = np.random.default_rng(12)
    x = ozaki_matrix(rng, 8, 33, 3.0)
    x[1] = 0  # zero row
    x[2, :] = 0
    x[2, 5] = 0.5  # single nonzero, a power of two: ||row|| = 2**-1 < 2**0
    x[3] *= 2.0**-1070
    x[4] *= 2.0**1015
    x[5, 0] = 1e-300  # a scalar whose rounded-up magnitude underflows next to the row max
    x[6] = np.exp(1j * rng.random(33))  # |x| = 1 everywhere: norm sqrt(33)
    f = norm_exponents(x, ozaki1.row_exponents(x))
    for i in range(x.shape[0]):
        sq = sum(Fraction(float(v)) ** 2 for v in np.concatenate([x[i].real, x[i].imag]))
        if sq == 0:
            assert f[i] == 0
            continue
        assert sq < Fraction(4) ** int(f[i])  # ||row|| < 2**f
        assert Fraction(4) ** (int(f[i]) - 2) <= sq  # and within 2 bits of the norm
    assert f[2] == 0 and f[6] == 3


def test_residue_products_are_exact_at_the_bounds():
    """The INT8 GEMMs as the CPU runs them (FP32 BLAS for k <= 1024, FP64 above) against Python
    integers, at the largest magnitudes: -128 * -128 summed k times (p = 256)."""
    assert _float32_exact(1024) and not _float32_exact(1025)
    assert MAX_K * 128 * 128 < 2**31 <= (MAX_K + 1) * 128 * 128
    rng = np.random.default_rng(13)
    for k, dtype in ((1024, np.float32), (4096, np.float64), (MAX_K, np.float64)):
        a = np.full((3, 2, k), -128.0)
        a[:, 1] = rng.choice([-128.0, 127.0], size=(3, k))
        b = np.full((3, k, 3), -128.0)
        b[:, :, 1:] = rng.choice([-128.0, 127.0], size=(3, k, 2))
        t = np.matmul(a.astype(dtype), b.astype(dtype)).astype(np.float64)
        exact = [a[i].astype(np.int64).astype(object).dot(b[i].astype(np.int64).astype(object))
                 for i in range(3)]
        assert t[0, 0, 0] == k * 2**14 < 2**31
        assert [[[_int(v) for v in row] for row in ti] for ti in t] == [e.tolist() for e in exact]


@pytest.mark.parametrize("n", [2, 5, 9, 14, 16, 20])
def test_crt_reconstruction_against_python_ints(n):
    """Random C' with |C'| < (P/2)(1 - 2**-40), extremes included: C' from its weighted residues
    within 2 ulps, exact where |C'| < 2**53."""
    c = crt_constants(n)
    rng = np.random.default_rng(100 + n)
    bound = (c.P // 2) - (c.P >> 41) - 1
    vals = [0, 1, -1, bound, -bound, 2**53 - 1, -(2**53) + 1, 2**52 + 1]
    vals += [int(rng.integers(0, 2**62)) * (bound >> 62) // 1 for _ in range(50)]
    vals += [(-1) ** i * (int.from_bytes(rng.bytes(24), "little") % (bound >> int(rng.integers(
        0, c.gamma)))) for i in range(300)]
    vals = [max(-bound, min(bound, v)) for v in vals]
    u = np.array([[(q * v) % p for v in vals] for p, q in zip(c.moduli, c.weights)],
                 dtype=np.float64)
    got = crt_reconstruct(u, n)
    for g, v in zip(got, vals):
        ref = float(v)  # Python rounds an int correctly
        if abs(v) < 2**53:
            assert g == ref, (v, g)
        else:
            assert abs(Fraction(float(g)) - v) <= 2 * math.ulp(ref), (v, g)
    exact = sum(float(g) == float(v) for g, v in zip(got, vals))
    assert exact >= 0.9 * len(vals)  # typically correctly rounded


@pytest.mark.parametrize("n", [2, 9, 15, 16, 20])
def test_offset_residue_sums_keep_the_quotient_and_the_exact_digits(n):
    """The GPU one-pass kernel's CRT sums where each residue enters as 256 + u (no conversion
    unit) and the sums start at offset_sum_start: every partial digit sum is the exact integer,
    and rint of either quotient estimate (a sum of its own, or from the digit sums with
    quotient_weights) is the exact quotient, at the extremes |C'| ~ (P/2)(1 - 2**-40) too. The
    estimates are emulated with two roundings a term (the kernel's fma has one)."""
    from ozsim.gemm.ozaki2.moduli import RESIDUE_OFFSET, offset_sum_start, quotient_weights

    c = crt_constants(n)
    start = offset_sum_start(n)
    rng = np.random.default_rng(200 + n)
    bound = (c.P // 2) - (c.P >> 41) - 1
    vals = [0, 1, -1, bound, -bound, bound - 1, -bound + 1]
    vals += [(-1) ** i * (int.from_bytes(rng.bytes(24), "little") % (bound >> int(rng.integers(
        0, 8)))) for i in range(200)]
    u = np.array([[(q * v) % p for v in vals] for p, q in zip(c.moduli, c.weights)],
                 dtype=np.float64)
    ud = u + RESIDUE_OFFSET  # exact
    qsum = np.full(len(vals), start[0])
    limbs = np.tile(start[1:, None], (1, len(vals)))
    exact = [[-RESIDUE_OFFSET * sum(int(m) for m in c.limbs_M[:, j])] * len(vals)
             for j in range(c.num_limbs)]
    for i in range(n):
        qsum = qsum + ud[i] * c.inv_p[i]
        for j in range(c.num_limbs):
            limbs[j] = limbs[j] + ud[i] * c.limbs_M[i, j]
            exact[j] = [e + (int(x) + RESIDUE_OFFSET) * int(c.limbs_M[i, j])
                        for e, x in zip(exact[j], u[i])]
            assert all(abs(e) < 2**53 for e in exact[j])
            assert [int(x) for x in limbs[j]] == exact[j]
    for j in range(c.num_limbs):  # the offsets are gone: the plain sums of u digit_j
        assert exact[j] == [sum(int(u[i, k]) * int(c.limbs_M[i, j]) for i in range(n))
                            for k in range(len(vals))]
    quotient = [(sum(int(u[i, k]) * (c.P // p) for i, p in enumerate(c.moduli)) - v) // c.P
                for k, v in enumerate(vals)]
    assert [int(q) for q in np.rint(qsum)] == quotient
    # the kernel's other estimate, from the digit sums (crt_finish, Q_FROM_LIMBS)
    w = quotient_weights(n)
    q = limbs[-1] * w[-1]
    for j in range(c.num_limbs - 2, -1, -1):
        q = limbs[j] * w[j] + q
    assert [int(x) for x in np.rint(q)] == quotient


@pytest.mark.parametrize("n", [2, 5, 11, 15, 16])
def test_tensor_core_digit_sums_are_the_exact_digit_sums(n):
    """crt_finish_tc (kernels/finish_tc.cu) emulated lane by lane: each lane's words of 4 moduli
    at 4 columns, the 4 x 4 byte transpose, mma.m16n8k16 tiles (PTX fragment layouts) against
    digit_unit_fragments, units S_a + 256 S_(a+1) exchanged in lane quads and shifted into
    64-bit digit sums give sum_p u_p digit_c(P/p) exactly, below 2**52 (so exact in FP64), for
    residues at 0, p - 1 and random."""
    from ozsim.gemm.ozaki2.moduli import digit_unit_fragments, digit_units

    c = crt_constants(n)
    units, _ = digit_units(n)
    words = digit_unit_fragments(n)
    nt = words.shape[0]
    assert len(units) <= 4 * nt < len(units) + 4
    p = np.array(c.moduli)
    rng = np.random.default_rng(300 + n)
    u = np.zeros((16, 32), dtype=np.int64)  # [modulus (zero past n)][column of one group]
    u[:n] = rng.integers(0, p[:, None], size=(n, 32))
    u[:n, 0], u[:n, 1] = p - 1, 0
    b = np.zeros((nt, 16, 8), dtype=np.int64)  # B from the lanes' fragment words
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for q in range(4):
            b[:, 4 * t + q, g] = (words[:, lane] >> np.uint32(8 * q)) & 0xFF
    units_of = {}  # (lane, entry e, n-tile) -> the unit a lane stores
    for tile in range(2):
        a = np.zeros((16, 16), dtype=np.int64)
        for lane in range(32):  # a0: row g, a1: row g + 8; k = 4 t .. 4 t + 3
            g, t = lane >> 2, lane & 3
            a[g, 4 * t:4 * t + 4] = u[4 * t:4 * t + 4, 4 * g + 2 * tile]
            a[g + 8, 4 * t:4 * t + 4] = u[4 * t:4 * t + 4, 4 * g + 2 * tile + 1]
        for k in range(nt):
            prod = a @ b[k]
            assert prod.max() < 2**20
            for lane in range(32):  # c0, c1: row g, columns 2 t, 2 t + 1; c2, c3: row g + 8
                g, t = lane >> 2, lane & 3
                for h in range(2):
                    units_of[lane, 2 * tile + h, k] = (int(prod[g + 8 * h, 2 * t])
                                                       + 256 * int(prod[g + 8 * h, 2 * t + 1]))
    for lane in range(32):  # lane (g, t) finishes column 4 g + t from its quad's units
        g, t = lane >> 2, lane & 3
        acc = [0] * c.num_limbs
        for k, (digit, shift) in enumerate(units):
            unit = units_of[(g << 2) | (k % 4), t, k // 4]
            assert unit < 2**29
            acc[digit] += unit << shift
        col = 4 * g + t
        want = [sum(int(u[i, col]) * int(c.limbs_M[i, j]) for i in range(n))
                for j in range(c.num_limbs)]
        assert acc == want
        assert max(acc) < 2**52


# -- the auto rule and plans ----------------------------------------------------------------------
def _normwise(c, ref) -> float:
    return float(np.linalg.norm(c - ref) / np.linalg.norm(ref))


def _excess_bits(k: int, n: int, stats: BoundStats) -> float:
    """log2(scheme II's bound / FP64's) for N = n moduli, from the module docstring's formulas
    written out here (the even split, rounding where the margin allows it)."""
    g = kept_bits(n)
    ga, gb = g - g // 2, g // 2
    r = 0.5 if rounds_to_nearest(n, ga, gb) else 1.0
    ours = math.sqrt(2) * (r * math.sqrt(2 * k) * (2.0**-ga + 2.0**-gb)
                           + 2 * k * r * r * 2.0 ** -(ga + gb)) * 2.0**stats.log2_scale
    gamma = 2 * k * EPS / (1 - 2 * k * EPS)
    fp64 = gamma * 2.0**stats.log2_min_column / NORM_OVERSHOOT
    return math.log2(ours / fp64)


def test_bound_stats_by_hand():
    """Identity: rows of norm 1 get f = 1 (||a|| < 2**f strictly), F = (4 * 4)**(1/2) = 4;
    columns of norm 1. A zero column, a zero matrix, a zero row (left out of F)."""
    eye = np.eye(4, dtype=np.complex128)
    assert bound_stats(eye) == BoundStats(2.0, 0.0)
    z = eye.copy()
    z[:, 2] = 0  # row 2 is zero too: F over three rows
    st = bound_stats(z)
    assert st.log2_min_column == -math.inf and st.log2_scale == pytest.approx(0.5 * math.log2(12))
    assert choose_plan(st, 4, 0.0) is None  # runs native
    zero = bound_stats(np.zeros((3, 5), np.complex128))
    assert zero.log2_scale == -math.inf
    assert choose_plan(zero, 5, 0.0).num_moduli == 2
    with pytest.raises(NonFiniteError):
        bound_stats(np.array([[1.0, np.nan]], dtype=np.complex128))


def test_bound_stats_bound_the_column_norms_tightly():
    """The column bound is a lower bound, within 2**-10 of the smallest column norm on dense
    inputs, and F_A is the exponents' exact root sum of squares (Python fractions)."""
    rng = np.random.default_rng(8)
    for phi in (0.1, 2.0, 4.0):
        a = ozaki_matrix(rng, 30, 50, phi)
        a[:, 7] *= 2.0**-40  # a small column
        st = bound_stats(a)
        true = float(np.sqrt((np.abs(a) ** 2).sum(axis=0)).min())
        assert 2.0**st.log2_min_column <= true
        assert 2.0**st.log2_min_column >= true * (1 - 2.0**-10)
        f = norm_exponents(a, ozaki1.row_exponents(a))
        exact = sum(Fraction(4) ** int(v) for v in f)
        assert st.log2_scale == pytest.approx(0.5 * math.log2(exact), abs=1e-12)


def test_auto_rule_by_hand():
    """The plan is the fewest N whose bound is <= 2**T FP64's: N - 1 is above it."""
    k = 64
    st = BoundStats(math.log2(2 * math.sqrt(k)), 0.0)  # a unitary gate's statistics
    for T in (0.0, 1.0, 3.0, 10.0):
        plan = choose_plan(st, k, T)
        n = plan.num_moduli
        assert _excess_bits(k, n, st) <= T < _excess_bits(k, n - 1, st)
        assert plan.bound_bits == pytest.approx(_excess_bits(k, n, st), abs=1e-12)
        assert (plan.bits_a, plan.bits_b) == (fixed_plan(n).bits_a, fixed_plan(n).bits_b)
    assert choose_plan(st, k, 0.0).num_moduli == 15
    assert choose_plan(st, k, 1.0).num_moduli == 14
    assert choose_plan(BoundStats(200.0, 0.0), k, 0.0) is None  # beyond 20 moduli
    assert fixed_plan(16).bits_a + fixed_plan(16).bits_b == kept_bits(16)


def test_parse_backend_names():
    assert parse_backend("int8-crt7") == ("int8-crt", 7)
    assert parse_backend(" INT8-CRT-AUTO ") == ("int8-crt-auto", None)
    assert parse_backend("int8-crt20") == ("int8-crt", 20)
    for bad in ("int8-crt1", "int8-crt21"):
        with pytest.raises(ValueError, match="number of moduli must be in 2..20"):
            parse_backend(bad)
    with pytest.raises(ValueError, match="unknown backend 'int8-crt'"):
        parse_backend("int8-crt")


# -- accuracy against exact products --------------------------------------------------------------
@pytest.mark.parametrize("phi", PHIS)
def test_error_falls_with_moduli(ozaki_cases, phi):
    a, b, ref = ozaki_cases[phi]
    native = max_relative_error(a @ b, ref)
    errs = [max_relative_error(zgemm(a, b, backend=f"int8-crt{n}"), ref) for n in range(2, 21)]
    # Each modulus adds ~8 bits (~4 per operand) until the FP64 floor (below 1e-2: with only a
    # few bits kept, errors of order 1 are not ordered).
    for n, (e0, e1) in enumerate(itertools.pairwise(errs), start=2):
        if 1e-14 < e0 < 1e-2:
            assert e1 < e0 / 4, f"phi={phi}: int8-crt{n + 1} {e1:.2e} vs int8-crt{n} {e0:.2e}"
    assert errs[0] > 1e-3
    assert errs[-1] <= max(native, 2.3e-16)


@pytest.mark.parametrize("phi", PHIS)
def test_auto_T0_is_no_worse_than_native(ozaki_cases, phi):
    """T = 0: scheme II's error bound is at most FP64's, and the measured norm-wise error is no
    worse than native ZGEMM's (the element-wise one within a small factor of it)."""
    a, b, ref = ozaki_cases[phi]
    native = a @ b
    c, info = zgemm(a, b, backend="int8-crt-auto", T=0, return_info=True)
    assert isinstance(info, GemmInfo) and info.num_splits is None
    assert not info.fallback and info.num_moduli <= 20
    assert info.bound_bits <= 0.0 and info.mean_loss_a is None
    assert sum(info.kept_bits) <= kept_bits(info.num_moduli)
    st = bound_stats(a)
    assert _excess_bits(96, info.num_moduli - 1, st) > 0  # one fewer breaks the rule
    assert _normwise(c, ref) <= _normwise(native, ref)
    assert max_relative_error(c, ref) <= 4 * max_relative_error(native, ref)


@pytest.mark.parametrize("phi", [0.1, 0.5, 1.0])
@pytest.mark.parametrize("k", [1024, 4096, 8192])
def test_auto_T0_is_no_worse_than_native_on_long_products(phi, k):
    """The same on longer inner dimensions (fresh inputs, double-double reference): 15 moduli
    for dense inputs whatever k, norm-wise no worse than native."""
    rng = np.random.default_rng(int(1000 * phi) + k)
    a, b = ozaki_matrix(rng, 24, k, phi), ozaki_matrix(rng, k, 24, phi)
    ref = dd_zgemm(a, b).hi
    c, info = zgemm(a, b, backend="int8-crt-auto", T=0, return_info=True)
    assert not info.fallback and info.num_moduli == 15
    assert _normwise(c, ref) <= _normwise(a @ b, ref)


def test_rounding_to_nearest_is_unbiased():
    """Scaled integers: truncation moves every positive value down by 1/2 on average (so every
    product of positive operands comes out too small); rounding to nearest has mean error 0
    (ozaki1's slice-bias test for scheme II)."""
    rng = np.random.default_rng(12)
    x = rng.random(200_000)
    shift = np.full(x.shape, 12, dtype=np.int32)
    y = np.ldexp(x, shift)
    err = {rd: scaled_pieces(x, shift, 12, rounding=rd)[0] - y for rd in (True, False)}
    assert err[False].mean() < -0.49 and np.all(err[False] <= 0)
    assert abs(err[True].mean()) < 0.005 and np.abs(err[True]).max() <= 0.5


@pytest.mark.parametrize("phi", PHIS)
def test_auto_T1_is_minimal_and_accurate(ozaki_cases, phi):
    a, b, ref = ozaki_cases[phi]
    _, info0 = zgemm(a, b, backend="int8-crt-auto", T=0, return_info=True)
    c, info1 = zgemm(a, b, backend="int8-crt-auto", T=1, return_info=True)
    assert not info1.fallback
    assert info0.fallback or info1.num_moduli <= info0.num_moduli
    assert info1.bound_bits <= 1.0 < _excess_bits(96, info1.num_moduli - 1, bound_stats(a))
    assert _normwise(c, ref) <= 2 * _normwise(a @ b, ref)
    assert max_relative_error(c, ref) <= 8 * max_relative_error(a @ b, ref)


def test_auto_choice_depends_on_the_gate_alone():
    """|0...0> and a dense state get the same plan (B cancels from the rule), accurate on both."""
    gate = haar_unitary(16, np.random.default_rng(3))
    state = np.zeros((16, 2**12), dtype=np.complex128)
    state[0, 0] = 1.0
    c, info = zgemm(gate, state, backend="int8-crt-auto", T=1, return_info=True)
    dense = ozaki_matrix(np.random.default_rng(4), 16, 64, 1.0)
    _, info_dense = zgemm(gate, dense, backend="int8-crt-auto", T=1, return_info=True)
    assert info.num_moduli == info_dense.num_moduli == 14
    ref = exact_zgemm(gate, state[:, :4])
    assert max_relative_error(c[:, :4], ref) <= 4 * EPS
    assert np.all(c[:, 1:] == 0)


def test_inner_dimension_limits():
    with pytest.raises(ValueError, match="exceeds 131071"):
        zgemm(np.zeros((1, MAX_K + 1), np.complex128), np.zeros((MAX_K + 1, 1), np.complex128),
              backend="int8-crt4")
    with pytest.raises(ValueError, match="must be >= 1"):
        zgemm(np.zeros((2, 0), np.complex128), np.zeros((0, 2), np.complex128),
              backend="int8-crt-auto")


def test_blocking_and_cached_residues_do_not_change_bits():
    rng = np.random.default_rng(6)
    a = ozaki_matrix(rng, 8, 8, 2.0)
    b = ozaki_matrix(rng, 8, 1000, 2.0)
    c1 = zgemm(a, b, backend="int8-crt15")
    c2 = zgemm(a, b, backend="int8-crt15", workspace_bytes=1)  # one column at a time
    prep = gemm_prepare(a, "int8-crt15")
    assert isinstance(prep, PreparedCRTOperand)
    c3 = zgemm(prep, b, backend="int8-crt15", workspace_bytes=50_000)
    c4 = zgemm(prep, b[:, ::-1], backend="int8-crt15")[:, ::-1]
    assert len(prep._residues) == 1  # the gate's residues were computed once
    assert np.array_equal(c1, c2) and np.array_equal(c1, c3) and np.array_equal(c1, c4)
    c5 = zgemm(prep, b, backend="int8-crt-auto", T=1)  # other budgets: new cache entries
    assert max_relative_error(c5, a @ b) < 1e-12


def test_strided_b_and_out_buffer():
    rng = np.random.default_rng(7)
    a = ozaki_matrix(rng, 4, 4, 1.0)
    big = ozaki_matrix(rng, 8, 12, 1.0)
    b = big[::2, ::3]
    out = np.full((4, 4), np.nan, dtype=np.complex128)
    res = zgemm(a, b, backend="int8-crt16", out=out)
    assert res is out
    assert max_relative_error(out, exact_zgemm(a, np.ascontiguousarray(b))) < 1e-15


# -- the simulator ---------------------------------------------------------------------------------
@pytest.mark.parametrize("backend, T", [("int8-crt-auto", 1.0), ("int8-crt-auto", 0.0),
                                        ("int8-crt16", 1.0)])
@pytest.mark.parametrize("fusion", [0, None])
def test_simulator_matches_qiskit(backend, T, fusion):
    rng = np.random.default_rng(21)
    n = 6
    circ, qc = Circuit(n), QuantumCircuit(n)
    for _ in range(14):
        d = int(rng.integers(1, 5))
        qs = tuple(int(q) for q in rng.permutation(n)[:d])
        u = haar_unitary(2**d, rng)
        circ.unitary(u, qs)
        qc.append(UnitaryGate(u), list(qs))
    res = Simulator(backend=backend, T=T, device="cpu", max_fused_qubits=fusion).run(circ)
    ref = Statevector(qc).data
    psi = phase_aligned(res.statevector, ref)
    assert np.max(np.abs(psi - ref)) < 1e-12
    assert res.metadata["backend"] == backend and res.metadata["fallbacks"] == 0


def test_a_broken_gpu_module_is_an_error_that_names_it(monkeypatch):
    import sys

    from ozsim import GPUModuleError
    from ozsim.gemm.ozaki2 import scheme

    monkeypatch.setitem(sys.modules, "ozsim.gemm.ozaki2.cuda", None)  # import fails
    with pytest.raises(GPUModuleError, match=r"ozsim\.gemm\.ozaki2\.cuda failed to import"):
        scheme._gpu_module()


@pytest.mark.parametrize("n", [2, 8, 15, 16])
def test_byte_weights_give_each_modulus_the_pieces_residue(n):
    """The GPU one-pass kernel's residue products (crt_gate_mma.cu, TC_SPLIT): a scalar's
    integer v as 8 balanced bytes b_i (balanced_bytes: byte i of v + 0x80..80, less 128), times
    the INT8 weights of byte_weight_words, gives R = sum_i b_i w_i = v mod p for every modulus
    with |R| <= 2**17 (exact in INT32 and inside the FP32 reduction's range), so its symmetric
    residue is the one the 12-bit pieces give (residue_magic with symmetric_powers(.., 12, ..))
    and the B planes are the same bytes. Extremes |v| = 2**62 included."""
    from ozsim.gemm.ozaki2.moduli import byte_weight_words, symmetric_powers

    mods = crt_constants(n).moduli
    words = byte_weight_words(mods)
    assert words.dtype == np.uint32 and words.shape == (32,)
    w = words.view(np.int8).reshape(16, 8).astype(np.int64)
    assert (w[len(mods):] == 0).all()
    rng = np.random.default_rng(300 + n)
    values = [0, 1, -1, 127, -128, 2**62, -(2**62), 2**58 - 1, -(2**58)]
    values += [int(x) for x in rng.integers(-(2**62), 2**62, 200, dtype=np.int64)]
    pieces_w = symmetric_powers(mods, 12, 6)
    for v in values:
        u = (v + 0x8080808080808080) % 2**64
        b = np.array([((u >> (8 * i)) & 0xFF) - 128 for i in range(8)], dtype=np.int64)
        assert sum(int(x) << (8 * i) for i, x in enumerate(b)) == v
        r = w[: len(mods)] @ b
        assert np.abs(r).max() <= 8 * 128 * 128
        a = abs(v)
        h = [(a >> (12 * i)) & 0xFFF for i in range(6)]  # pieces of |v|, signed as v
        s = [(1 if v >= 0 else -1) * int(pieces_w[j] @ np.array(h, dtype=np.int64))
             for j in range(len(mods))]
        for j, p in enumerate(mods):
            assert (int(r[j]) - v) % p == 0 and (s[j] - v) % p == 0
            assert _symmetric(int(r[j]), p) == _symmetric(s[j], p) == _symmetric(v, p)


@pytest.mark.parametrize("n", [2, 8, 15, 16])
def test_split_offsets_give_the_symmetric_residue_byte(n):
    """crt_gate.cuh's residue_byte, modelled in float32 and integer arithmetic for every R in
    [-2**17, 2**17] and every modulus: x = (1.5 * 2**23 + R) - soff exact, the round-down fma
    (exact in FP64, then floored to float32's integer grid) floor(x / p), and the low byte of
    0x4B400000 + R - (0x4B000000 + floor(x / p)) p is the symmetric residue of R (the byte
    reduce_magic gives: for p = 256 the residue 128 as -128)."""
    from fractions import Fraction

    from ozsim.gemm.ozaki2.moduli import split_offsets

    mods = crt_constants(n).moduli
    soff = split_offsets(mods)
    assert soff.dtype == np.float32
    r = np.arange(-(2**17), 2**17 + 1, dtype=np.int64)
    w = 0x4B400000 + r
    for p, so in zip(mods, soff):
        assert float(so) == int(so) and (3 << 22) - int(so) - (p - 1) // 2 >= 2**17
        assert ((3 << 22) - int(so) - (p - 1) // 2) % (256 * p) == 0
        ipu = np.float32(1) / np.float32(p)
        if Fraction(float(ipu)) < Fraction(1, p):
            ipu = np.nextafter(ipu, np.float32(1))
        x = w.astype(np.uint32).view(np.float32) - so  # exact: integers below 2**24
        assert (x == r + (3 << 22) - int(so)).all() and (x >= 0).all() and (x < 2**19).all()
        q = np.floor(x.astype(np.float64) * float(ipu))  # the fma's exact value, floored
        assert (q == (x.astype(np.int64) // p)).all()
        t = (w - (0x4B000000 + q.astype(np.int64)) * p) % 2**32
        got = (t & 0xFF).astype(np.uint8).view(np.int8).astype(np.int64)
        want = (r + p // 2) % p - p // 2  # (_symmetric)
        np.testing.assert_array_equal(got % 256, want % 256)


def _symmetric(x: int, p: int) -> int:
    """x mod p in [-(p // 2), (p - 1) // 2]."""
    return (x + p // 2) % p - p // 2


@pytest.mark.parametrize("d", [1, 2, 3])
def test_exact_gate_limb_sums_stay_within_their_bounds(d):
    """crt_gate_exact.cu's limb sums (Gauss's S1 = Re a . Re b, S2 = Im a . Im b, S3 = (Re a +
    Im a) . (Re b + Im b), each as hh, hl, ll over 29-bit limbs; Re = S1 - S2, Im = S3 - S1 - S2)
    on the largest rows and columns the scaling allows (every scalar equal in magnitude, signs
    aligned; norms 2**g + 2**8) stay within exact_limb_bounds, which stay within INT64 (high limbs
    INT32) up to 15 moduli, and make the exact product; 16 moduli are refused."""
    from ozsim.gemm.ozaki2.exact_gate import (EXACT_LIMB_BITS, exact_applies,
                                              exact_limb_bounds)

    t, k = EXACT_LIMB_BITS, 1 << d
    assert exact_applies(d, fixed_plan(15)) and not exact_applies(d, fixed_plan(16))
    assert not exact_applies(4, fixed_plan(2))
    rng = np.random.default_rng(d)
    for n in (14, 15):
        plan = fixed_plan(n)
        bound = exact_limb_bounds(d, plan.bits_a, plan.bits_b)
        assert bound["mid"] < 2**31 and max(bound["hh"], bound["hl"], bound["ll"]) < 2**63
        for trial in range(20):
            def vector(bits):  # 2k scalars of norm <= 2**bits + 2**8: equal or random
                # magnitudes, signs alike or random, low limbs all ones or as they come
                w = np.ones(2 * k) if trial < 8 else rng.random(2 * k) + 0.1
                w = w / np.linalg.norm(w) * ((1 << bits) + 256) * (1 - 2.0**-20)
                sign = 1 if trial % 2 else -1
                v = [int(x) * (sign if trial % 4 < 2 else int(rng.choice([1, -1]))) for x in w]
                if trial % 8 >= 4:
                    v = [((x >> t) << t) | ((1 << t) - 1) for x in v]
                return v[:k], v[k:]

            (ar, ai), (br, bi) = vector(plan.bits_a), vector(plan.bits_b)

            def sums(x, y):
                h = [(a >> t, a & ((1 << t) - 1)) for a in x]
                g = [(b >> t, b & ((1 << t) - 1)) for b in y]
                assert max(abs(p[0]) for p in h + g) <= bound["limb"]
                assert max(abs(p[0] + p[1]) for p in h + g) <= bound["mid"] < 2**31
                return (sum(p[0] * q[0] for p, q in zip(h, g)),
                        sum(p[0] * q[1] + p[1] * q[0] for p, q in zip(h, g)),
                        sum(p[1] * q[1] for p, q in zip(h, g)))

            s1, s2 = sums(ar, br), sums(ai, bi)
            s3 = sums([a + b for a, b in zip(ar, ai)], [a + b for a, b in zip(br, bi)])
            re = [u - v for u, v in zip(s1, s2)]
            im = [w - u - v for u, v, w in zip(s1, s2, s3)]
            for part in (s1, s2, s3, re, im):  # (every partial sum: a sum over fewer terms)
                for name, x in zip(("hh", "hl", "ll"), part):
                    assert abs(x) <= bound[name], (n, trial, name)
            exact_re = sum(a * b for a, b in zip(ar, br)) - sum(a * b for a, b in zip(ai, bi))
            exact_im = sum(a * b for a, b in zip(ar, bi)) + sum(a * b for a, b in zip(ai, br))
            assert (re[0] << 2 * t) + (re[1] << t) + re[2] == exact_re
            assert (im[0] << 2 * t) + (im[1] << t) + im[2] == exact_im

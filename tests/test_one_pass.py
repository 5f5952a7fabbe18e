"""One-pass gate kernels: the zgemm one against a Kronecker-product oracle and the GEMM path,
the INT8 ones bitwise against the CPU path (GPU only)."""

from __future__ import annotations

import importlib.util
import math
import random

import numpy as np
import pytest

from conftest import cupy_or_skip
from ozsim.gates.haar import haar_unitary
from ozsim.gemm import registry
from ozsim.gemm.cost import CostModel
from ozsim.gemm.ozaki2 import crt_constants
from ozsim.gemm.ozaki2.moduli import LIMB_BITS
from ozsim.statevector import StateVector


def _reference(psi, u, qubits):
    """Qiskit's ``_evolve_operator``: targets to the front, one product, back."""
    n = int(psi.size).bit_length() - 1
    d = len(qubits)
    t = psi.reshape((2,) * n)
    axes = [n - 1 - q for q in reversed(qubits)]  # most significant target first
    rest = [a for a in range(n) if a not in axes]
    m = np.transpose(t, axes + rest).reshape(1 << d, -1)
    out = (u @ m).reshape((2,) * n)
    return np.transpose(out, np.argsort(axes + rest)).reshape(-1)


def test_cost_model_counts_one_pass_gates_once():
    m = CostModel(1e12, 1e13, 4, 0.0, 10, one_pass_qubits=3, one_pass_rate=1e16)
    assert m.gate_time(20, 3) == pytest.approx(32 * 2**20 / 1e12)
    assert m.gate_time(20, 4) == pytest.approx(4 * 32 * 2**20 / 1e12)


def test_line_first_order_puts_in_line_targets_first_ascending_then_the_rest_as_given():
    from ozsim.gemm._permutation import line_first_order

    pos = [17, 24, 27, 8, 2, 0]
    perm = line_first_order(pos)
    assert [pos[j] for j in perm] == [0, 2, 17, 24, 27, 8]
    assert line_first_order([1, 5, 0, 9]) == (2, 0, 1, 3)
    assert line_first_order([9, 5, 4]) == (0, 1, 2)
    assert line_first_order([2, 1, 0]) == (2, 1, 0)


@pytest.mark.parametrize("positions", [(13, 10, 7, 4, 2, 0), (3, 0, 5, 1), (1, 0)])
def test_reordered_gate_is_the_same_gate_on_the_reordered_targets(positions):
    """The gate permuted by permute_gate_qubits, on the targets in line_first_order, is the
    same operator as the original on the original targets (against the oracle)."""
    from ozsim.gemm._permutation import line_first_order, permute_gate_qubits

    rng = np.random.default_rng(len(positions))
    d, n = len(positions), max(positions) + 1
    u = haar_unitary(1 << d, rng)
    psi = rng.standard_normal(1 << n) + 1j * rng.standard_normal(1 << n)
    perm = line_first_order(positions)
    got = _reference(psi, permute_gate_qubits(u, perm), [positions[j] for j in perm])
    np.testing.assert_allclose(got, _reference(psi, u, positions), rtol=0, atol=1e-13)
    if perm != tuple(range(d)):  # a wrong map is a different operator
        wrong = _reference(psi, u, [positions[j] for j in perm])
        assert np.abs(wrong - _reference(psi, u, positions)).max() > 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 6, 7])
def test_one_pass_zgemm_gate_matches_the_oracle_on_every_kind_of_target(d):
    cp = cupy_or_skip()
    rng = np.random.default_rng(d)
    n = 11
    psi0 = rng.standard_normal(1 << n) + 1j * rng.standard_normal(1 << n)
    psi0 /= np.linalg.norm(psi0)
    sets = [tuple(range(d)), tuple(range(n - d, n))[::-1], tuple(rng.choice(n, d, replace=False))]
    for qubits in sets:
        u = haar_unitary(1 << d, rng)
        sv = StateVector(n, cp)
        sv._buf[...] = cp.asarray(psi0)
        sv.apply(cp.asarray(u), tuple(int(q) for q in qubits), backend="zgemm")
        got = sv.to_numpy()
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, _reference(psi0, u, qubits), rtol=0, atol=1e-14)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [3, 4, 5, 6, 7])
@pytest.mark.parametrize("options", [None, {"ASYNC": 0}, {"ASYNC": 0, "A_SMEM": 1},
                                     {"STAGES": 2}, {"STAGES": 3, "A_SMEM": 1}, {"NC": 32},
                                     {"ASYNC": 0, "A_SMEM": 2}, {"STAGES": 2, "A_SMEM": 2},
                                     {"MMA_K8": 0}, {"MMA_K8": 0, "ASYNC": 0, "A_SMEM": 2},
                                     {"ASYNC": 0, "A_SMEM": 2, "NC": 128},
                                     {"GAUSS": 1}, {"GAUSS": 1, "ASYNC": 0, "A_SMEM": 1},
                                     {"GAUSS": 1, "ASYNC": 0, "NC": 32},
                                     {"GAUSS": 1, "ASYNC": 0, "A_SMEM": 2, "WGM": 1}])
def test_tensor_core_zgemm_gate_matches_the_oracle(d, options, monkeypatch):
    """dense_gate_mma.cu with each of its loaders, stage counts, homes of A and tile widths, in
    both MMA shapes (m16n8k8 f64 where the device has it, m8n8k4): a partial tile, one tile per
    block, and (n = 19 at d = 3) blocks that loop over several tiles."""
    cp = cupy_or_skip()
    from ozsim.gemm import native_gate

    if options is not None:
        if d == 7 and options.get("A_SMEM"):
            pytest.skip("A of a 7-qubit gate (256-512 KiB) does not fit in shared memory")
        if d in ((3, 4) if options.get("GAUSS") else (3,)) and options.get("NC") == 32:
            pytest.skip(f"at d = {d} the 8 warps span 64 columns")
        if options.get("GAUSS") and (d == 3 or not native_gate._has_k8(cp.cuda.Device().id)):
            pytest.skip("Gauss's form takes d >= 4 and m16n8k8 f64 (compute capability 9.0)")
        monkeypatch.setitem(native_gate.MMA_OPTIONS, d, options)
        if native_gate.mma_smem_bytes(d) > cp.cuda.Device().attributes[
                "MaxSharedMemoryPerBlockOptin"]:
            pytest.skip(f"{options} needs more shared memory than a block has at d = {d}")
    rng = np.random.default_rng(10 * d + (0 if options is None else len(options)))
    for n in (d + 1, 14, 19 if d == 3 else 15):
        psi0 = rng.standard_normal(1 << n) + 1j * rng.standard_normal(1 << n)
        psi0 /= np.linalg.norm(psi0)
        for qubits in (tuple(range(d)), tuple(int(q) for q in rng.choice(n, d, replace=False))):
            u = haar_unitary(1 << d, rng)
            psi = cp.asarray(psi0)
            native_gate.apply_dense_mma(psi, cp.asarray(u), qubits)
            got = psi.get()
            assert np.isfinite(got).all()
            np.testing.assert_allclose(got, _reference(psi0, u, qubits), rtol=0, atol=1e-14)


@pytest.mark.gpu
def test_one_pass_follows_the_engines_layout_and_agrees_with_the_gemm_path():
    cp = cupy_or_skip()
    rng = np.random.default_rng(3)
    n = 12
    gates = [(haar_unitary(1 << len(q), rng), q)
             for q in [(7, 8, 9, 10, 11, 0, 1), (2, 5), (11, 3, 6), (0,), (4, 9, 1, 7, 2, 10)]]
    states = []
    for one_pass in (True, False):
        sv = StateVector(n, cp)
        sv.one_pass = one_pass
        for u, q in gates:  # (the GEMM path: the 7-qubit gate permutes the buffer; later
            # ones read through it; one pass: 7 qubits in place where the device has m16n8k8)
            sv.apply(cp.asarray(u), q, backend="zgemm")
        states.append(sv.to_numpy())
    ref = np.zeros(1 << n, dtype=complex)
    ref[0] = 1
    for u, q in gates:
        ref = _reference(ref, u, q)
    for got in states:
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-14)


@pytest.mark.gpu
def test_one_pass_kernel_rejects_bad_targets():
    cp = cupy_or_skip()
    from ozsim.gemm.native_gate import apply_dense

    psi = cp.zeros(1 << 9, dtype=cp.complex128)
    u = cp.eye(4, dtype=cp.complex128)
    for bad, msg in [((1, 1), "distinct"), ((0, 9), "distinct and in 0..8"),
                     (tuple(range(8)), "1..7 targets")]:
        with pytest.raises(ValueError, match=msg):
            apply_dense(psi, u if len(bad) == 2 else cp.eye(256, dtype=cp.complex128), bad)


_SCHEME1 = [("int8x3", 1), ("int8x9", 1), ("int8x10", 1), ("int8x11", 1), ("int8x18", 1),
            ("int8-auto", 0), ("int8-auto", 1), ("int8-auto", 4)]  # (10 / 11: the last
# unrolled and the first rolled products loop at d <= 4)
_SCHEME2 = [("int8-crt2", 1), ("int8-crt3", 1), ("int8-crt8", 1), ("int8-crt14", 1),
            ("int8-crt20", 1), ("int8-crt-auto", 0), ("int8-crt-auto", 3)]


@pytest.mark.gpu
@pytest.mark.parametrize("backend,T,d", [(b, T, d) for b, T in _SCHEME1 for d in range(1, 7)]
                         + [(b, T, d) for b, T in _SCHEME2 for d in (1, 2, 3, 4, 5, 6)])
def test_one_pass_emulated_gate_is_bitwise_the_cpu_product(backend, T, d):
    """d = 1, 2: the CUDA-core kernels; d = 3..6: the tensor-core kernels (scheme II's at d = 6
    with paired A fragments, and with 20 moduli some of them read from global memory), on a
    state of fewer groups than one tile (n = 10) and of many tiles (n = 15, targets high and
    low)."""
    cp = cupy_or_skip()
    from ozsim.gemm import registry, zgemm
    from ozsim.testing import ozaki_matrix

    rng = np.random.default_rng(10 * d + len(backend))
    n = 10 if d <= 2 or backend in ("int8x18", "int8-crt20") else 15
    cases = [(0.5, tuple(range(d))), (4.0, tuple(rng.choice(n, d, replace=False)))]
    if d >= 3:
        cases += [(2.0, tuple(range(n - 1, n - 1 - d, -1))), (1.0, tuple(range(d, 0, -1)))]
    for phi, qubits in cases:
        psi0 = ozaki_matrix(rng, 1 << n, 1, phi)[:, 0]
        psi0[rng.random(1 << n) < 0.2] = 0  # zero amplitudes and zero groups too
        u = haar_unitary(1 << d, rng)
        sv = StateVector(n, cp)
        sv._buf[...] = cp.asarray(psi0)
        info = sv.apply(registry.parse(backend).scheme.prepare(cp.asarray(u)),
                        tuple(int(q) for q in qubits), backend=backend, T=T)
        got = sv.to_numpy()
        # the CPU path on the same product: targets to the front, one emulated ZGEMM
        axes = [n - 1 - q for q in reversed(qubits)]
        rest = [a for a in range(n) if a not in axes]
        b = np.ascontiguousarray(np.transpose(psi0.reshape((2,) * n), axes + rest)
                                 .reshape(1 << d, -1))
        c, cinfo = zgemm(u, b, backend=backend, T=T, return_info=True)
        want = np.transpose(c.reshape((2,) * n), np.argsort(axes + rest)).reshape(-1)
        assert (info.num_splits, info.num_moduli, info.kept_bits, info.fallback) == \
            (cinfo.num_splits, cinfo.num_moduli, cinfo.kept_bits, cinfo.fallback)
        assert np.isfinite(got).all()
        np.testing.assert_array_equal(got, want)


@pytest.mark.gpu
@pytest.mark.parametrize("d,s", [(5, 3), (5, 8), (5, 9), (5, 12), (5, 18), (6, 3), (6, 8),
                                 (6, 9), (6, 10)])
def test_scheme1_wgmma_form_is_the_mma_sync_form_bitwise(d, s, monkeypatch):
    """int8_gate_mma.cu's wgmma form (d = 5, 6 on compute capability 9.0) against its mma.sync
    form and the CPU product, bitwise, on Ozaki's inputs with zero amplitudes, targets low, high
    and scattered, a state of fewer groups than a tile (n = 9) and of many (n = 16); at d = 6,
    s = 10 the wgmma form's shared memory does not fit and mma.sync runs."""
    cp = cupy_or_skip()
    from ozsim.gemm import registry, zgemm
    from ozsim.gemm.ozaki1 import onepass
    from ozsim.testing import ozaki_matrix

    hopper = cp.cuda.Device().compute_capability == "90"
    monkeypatch.setenv("OZSIM_INT8_WGMMA", "1")
    uses_wgmma = onepass._wgmma_kernel(d, s) is not None
    assert uses_wgmma == (hopper and (d == 5 or s <= 9)), onepass._wgmma_state.get("error")
    rng = np.random.default_rng(100 * d + s)
    backend = f"int8x{s}"
    for n, phi, qubits in [(9, 1.0, tuple(range(d))), (16, 4.0, tuple(range(16 - d, 16))),
                           (16, 0.5, tuple(int(q) for q in rng.choice(16, d, replace=False)))]:
        psi0 = ozaki_matrix(rng, 1 << n, 1, phi)[:, 0]
        psi0[rng.random(1 << n) < 0.2] = 0
        u = haar_unitary(1 << d, rng)
        got = {}
        for form in ("1", "0"):
            monkeypatch.setenv("OZSIM_INT8_WGMMA", form)
            sv = StateVector(n, cp)
            sv._buf[...] = cp.asarray(psi0)
            sv.apply(registry.parse(backend).scheme.prepare(cp.asarray(u)), qubits,
                     backend=backend)
            got[form] = sv.to_numpy()
        axes = [n - 1 - q for q in reversed(qubits)]
        rest = [a for a in range(n) if a not in axes]
        b = np.ascontiguousarray(np.transpose(psi0.reshape((2,) * n), axes + rest)
                                 .reshape(1 << d, -1))
        want = np.transpose(zgemm(u, b, backend=backend).reshape((2,) * n),
                            np.argsort(axes + rest)).reshape(-1)
        assert np.isfinite(got["1"]).all()
        np.testing.assert_array_equal(got["1"], want)
        np.testing.assert_array_equal(got["0"], want)


def _crt_value_cpu(values, num_moduli):
    """ozaki2's rounding of integers C' (|C'| < P/2) from their residues q_p C' mod p: the CPU's
    CRT sums, carries and sum of the digits (scheme II step 5)."""
    from ozsim.gemm.ozaki2.scheme import _CRTAccumulator

    const = crt_constants(num_moduli)
    acc = _CRTAccumulator(const, (len(values),), np)
    for i, (p, q) in enumerate(zip(const.moduli, const.weights)):
        acc.add(i, np.array([float(q * v % p) for v in values]))
    return acc.finish()


@pytest.mark.gpu
@pytest.mark.parametrize("num_moduli", [2, 8, 14, 15])
def test_exact_products_round_as_the_crt_reconstruction(num_moduli):
    """crt_gate_exact.cu's rounding of an exact C' (its balanced digits summed from the lowest
    up; at a tie, a digit's low bits exactly 2**39, the CRT's own sums) = the CPU's reconstruction
    from the residues, bit for bit, on random C', the extremes, and ties at each lower digit
    (including C' whose two balanced forms round differently: the naive digit sum differs from
    the CPU there, so the tie path is what passes them); forced through the residues, too. The
    scheme's range is |C'| < (P / 2)(1 - 2**-40)."""
    cupy_or_skip()
    from ozsim.gemm.ozaki2 import onepass

    const = crt_constants(num_moduli)
    half, radix = const.P // 2, 1 << LIMB_BITS
    limit = half - (half >> 40)  # the scheme's range: |C'| < (P / 2)(1 - 2**-40)
    r = random.Random(num_moduli)
    vals = [0, 1, -1, limit - 1, 1 - limit, radix // 2, -(radix // 2)]
    vals += [r.randrange(1 - half, half) for _ in range(300)]
    for c in range(1, const.num_limbs):  # a tie at digit c - 1, the digits below balanced
        top_bits = half.bit_length() - 2 - LIMB_BITS * c
        for _ in range(200):
            top = r.randrange(-(1 << top_bits), 1 << top_bits) if top_bits > 0 else 0
            low = r.randrange(-(radix // 2), radix // 2) if c > 1 else 0
            vals.append((top << (LIMB_BITS * c)) + (radix // 2) * radix ** (c - 1) + low)
    if const.num_limbs >= 3:  # 2**79 + low: its balanced forms' partial sums round apart
        vals += [(radix // 2) * radix + m * 2**26 + j for m in range(1, 64, 2) for j in (1, -1)]
    vals += [-v for v in vals]
    vals = [v for v in vals if abs(v) < limit]

    want = _crt_value_cpu(vals, num_moduli)
    for force in (False, True):
        got = onepass.exact_values(vals, num_moduli, force_residues=force)
        np.testing.assert_array_equal(got, want)
    if const.num_limbs >= 3:
        assert any(_naive_digit_sum(v, const.num_limbs) != w for v, w in zip(vals, want)), \
            "no tie that the digits miss"


def _naive_digit_sum(v, num_limbs):
    """C' rounded from its balanced digits with -2**39 at every tie, summed as crt_value sums
    them: crt_value's rounding except at some ties."""
    radix = 1 << LIMB_BITS
    digits = []
    for _ in range(num_limbs - 1):
        lo = ((v + radix // 2) % radix) - radix // 2
        digits.append(lo)
        v = (v - lo) // radix
    digits.append(v)
    out = float(digits[0])
    for c in range(1, len(digits)):
        out = float(digits[c]) * float(radix ** c) + out
    return out


def _short_solution(p, q, target, bits):
    """Integers (x, y), each of about ``bits / 2`` bits, with ``p x - q y = target`` mod
    ``2**bits`` (p odd): the particular solution ``(target / p, 0)`` less its nearest vector of
    the lattice of solutions of ``= 0``, by a Lagrange-reduced basis and rounding."""
    mod = 1 << bits
    inv = pow(p, -1, mod)
    b1, b2 = (mod, 0), (q * inv % mod, 1)  # p x = q y (mod 2**bits)

    def norm2(v):
        return v[0] * v[0] + v[1] * v[1]

    def rdiv(p, q):  # round(p / q) in integers (q > 0)
        return (2 * p + q) // (2 * q)

    if norm2(b1) < norm2(b2):
        b1, b2 = b2, b1
    while True:  # Lagrange: b2 the shortest vector, b1 reduced against it
        mu = rdiv(b1[0] * b2[0] + b1[1] * b2[1], norm2(b2))
        b1 = (b1[0] - mu * b2[0], b1[1] - mu * b2[1])
        if norm2(b1) >= norm2(b2):
            break
        b1, b2 = b2, b1
    x0 = target * inv % mod
    det = b1[0] * b2[1] - b1[1] * b2[0]  # Babai's rounding of (x0, 0) in the basis b1, b2
    if det < 0:
        b1, det = (-b1[0], -b1[1]), -det
    c1 = rdiv(x0 * b2[1], det)
    c2 = rdiv(-x0 * b1[1], det)
    return x0 - c1 * b1[0] - c2 * b2[0], -c1 * b1[1] - c2 * b2[1]


@pytest.mark.gpu
def test_byte_slice_gate_rounds_tied_digits_as_the_crt_reconstruction(monkeypatch):
    """crt_gate_slices.cu on products C' whose digits tie (a digit of exactly -2**39, where
    the kernel's write-back defers to its residue path): a permuted gate of small phases (one
    entry a row, A'_im near 2**40, odd and prime to A'_re) and columns of one amplitude 1 and
    the others crafted so that C'_re is 2**39 mod 2**40 (a tie at digit 0), 2**79 + low mod
    2**80 (digit 1), or +-(2**79 + m 2**26 + j), m odd, 0 < |j| < 2**20 (whose two balanced
    forms round apart). = the CPU's bits, 15 moduli, d = 3..6."""
    cp = cupy_or_skip()
    from ozsim.gemm import zgemm
    from ozsim.gemm.ozaki2 import onepass
    from ozsim.gemm.ozaki2.scheme import PreparedCRTOperand, analyse_rows, fixed_plan

    calls = []
    real = onepass._apply_slices
    monkeypatch.setattr(onepass, "_apply_slices", lambda *a: calls.append(1) or real(*a))
    plan = fixed_plan(15)
    limbs = crt_constants(15).num_limbs
    rng = np.random.default_rng(21)
    r = random.Random(21)
    n = 10
    for d in sorted(onepass.SLICE_QUBITS):
        k = 1 << d
        perm = rng.permutation(k)

        def phases(size):  # angles of about 2**-17: A'_im near 2**40
            return np.exp(1j * rng.choice([-1, 1], size) * (1 + rng.random(size)) * 2.0**-17)

        phase = phases(k)
        while True:  # A'_im odd and prime to A'_re
            u = np.zeros((k, k), complex)
            u[np.arange(k), perm] = phase
            sr, si = onepass._scaled_gate(PreparedCRTOperand(cp.asarray(u)), plan)
            ar = [int(v) for v in sr.sum(1).get()]  # (one entry a row)
            ai = [int(v) for v in si.sum(1).get()]
            bad = np.array([y % 2 == 0 or math.gcd(x, y) != 1 for x, y in zip(ar, ai)])
            if not bad.any():
                break
            phase[bad] = phases(int(bad.sum()))
        cols = 1 << (n - d)
        b = np.zeros((k, cols), complex)
        f = analyse_rows(np.eye(1, k, dtype=complex))[0]  # a column's exponent: its 1
        targets = []
        for c in range(cols):
            b[c % k, c] = 1.0
            for row in range(k):
                if perm[row] == c % k:
                    continue
                kind = r.randrange(3)
                if kind == 0:
                    t = (r.getrandbits(30) << 40) + (1 << 39)
                elif kind == 1:
                    t = (1 << 79) + r.randrange(-(1 << 39), 1 << 39)
                a, bb = ar[row], ai[row]
                if kind < 2:  # C'_re = t mod 2**80
                    t = t if r.random() < 0.5 else -t
                    y, x = _short_solution(-bb, -a, t, 80)
                    assert (a * x - bb * y - t) % (1 << 80) == 0
                else:  # C'_re = t: x = t / a mod A'_im, taken where |x| < |A'_im| / 32
                    for _ in range(1000):
                        j = r.randrange(1, 1 << 20) * r.choice((1, -1))
                        t = ((1 << 79) + r.randrange(1, 1 << 13, 2) * 2**26 + j) * \
                            r.choice((1, -1))
                        x = t * pow(a, -1, abs(bb)) % abs(bb)
                        x -= abs(bb) * (2 * x > abs(bb))
                        if 32 * abs(x) < abs(bb):
                            break
                    y = (a * x - t) // bb
                    assert a * x - bb * y == t
                assert max(abs(x), abs(y)) < 2**53
                b[perm[row], c] = np.ldexp(float(x), f - plan.bits_b) + 1j * np.ldexp(
                    float(y), f - plan.bits_b)  # exact: |x|, |y| < 2**53
                targets.append((row, c, x, y))
        assert (analyse_rows(b.T) == f).all()
        exact = [ar[row] * x - ai[row] * y for row, c, x, y in targets]  # C'_re
        cpu = _crt_value_cpu(exact, 15)
        ties = [((v + (1 << 39) + (1 << 79)) >> (40 * i)) % (1 << 40) == 0
                for v in exact for i in range(limbs - 1)]
        assert sum(ties[0::2]) > 100 and sum(ties[1::2]) > 100, (d, "too few ties")
        assert any(_naive_digit_sum(v, limbs) != w for v, w in zip(exact, cpu)), (d, "no tie "
                                                                                 "that matters")
        psi0 = np.ascontiguousarray(b.T).reshape(-1)  # qubits 0..d-1: member = the low d bits
        qubits = tuple(range(d))
        calls.clear()
        sv = StateVector(n, cp)
        sv._buf[...] = cp.asarray(psi0)
        sv.apply(registry.parse("int8-crt15").scheme.prepare(cp.asarray(u)), qubits,
                 backend="int8-crt15")
        assert calls, d
        want = zgemm(u, b, backend="int8-crt15")
        np.testing.assert_array_equal(sv.to_numpy().reshape(cols, k).T, want, err_msg=f"d={d}")


def _check_kernel_takes(monkeypatch, kernel, qubit_counts):
    """Gates of each d in qubit_counts with up to 15 moduli run onepass.<kernel> (16 moduli: the
    residue kernels), = CPU bitwise on adversarial columns: equal magnitudes under a
    Walsh-Hadamard gate (the largest sums), amplitudes near 2**-1074 and 2**1000 (the scalings
    past 2**1023), zero groups."""
    cp = cupy_or_skip()
    from ozsim.gemm import zgemm
    from ozsim.gemm.ozaki2 import onepass

    calls = []
    real = getattr(onepass, kernel)
    monkeypatch.setattr(onepass, kernel, lambda *a: calls.append(1) or real(*a))
    n = 10
    rng = np.random.default_rng(3)
    for d in qubit_counts:
        h = np.array([[1.0]])
        for _ in range(d):
            h = np.kron(h, np.array([[1.0, 1.0], [1.0, -1.0]]) / np.sqrt(2))
        gates = [h * np.exp(0.25j * np.pi), haar_unitary(1 << d, rng)]
        states = [np.full(1 << n, (1 + 1j) / 2 ** ((n + 1) / 2)),
                  np.where(rng.random(1 << n) < 0.5, 5e-324, 2.0 ** -1060)
                  * rng.choice([1, -1, 1j, -1j], 1 << n),
                  np.where(rng.random(1 << n) < 0.1, 0, 1e300 * (rng.random(1 << n) - 0.5))
                  .astype(complex)]
        for backend, taken in (("int8-crt15", True), ("int8-crt-auto", True),
                               ("int8-crt16", False)):
            for u in gates:
                for psi0 in states:
                    calls.clear()
                    qubits = tuple(int(q) for q in rng.choice(n, d, replace=False))
                    sv = StateVector(n, cp)
                    sv._buf[...] = cp.asarray(psi0)
                    sv.apply(registry.parse(backend).scheme.prepare(cp.asarray(u)), qubits,
                             backend=backend, T=0)
                    assert bool(calls) == taken, (d, backend)
                    axes = [n - 1 - q for q in reversed(qubits)]
                    rest = [a for a in range(n) if a not in axes]
                    b = np.ascontiguousarray(np.transpose(psi0.reshape((2,) * n), axes + rest)
                                             .reshape(1 << d, -1))
                    c = zgemm(u, b, backend=backend, T=0)
                    want = np.transpose(c.reshape((2,) * n), np.argsort(axes + rest)).reshape(-1)
                    np.testing.assert_array_equal(sv.to_numpy(), want)


@pytest.mark.gpu
def test_small_gates_take_exact_products_up_to_15_moduli(monkeypatch):
    """d <= 3 (outside onepass.SLICE_QUBITS) with up to 15 moduli runs crt_gate_exact.cu."""
    cupy_or_skip()
    from ozsim.gemm.ozaki2 import onepass

    _check_kernel_takes(monkeypatch, "_apply_exact",
                        [d for d in (1, 2, 3) if d not in onepass.SLICE_QUBITS])


@pytest.mark.gpu
def test_gates_of_3_to_6_qubits_take_byte_slice_products_up_to_15_moduli(monkeypatch):
    """d in onepass.SLICE_QUBITS with up to 15 moduli runs crt_gate_slices.cu (exact INT8
    products of all 64 byte-slice pairs); with the slice kernel switched off, d = 3 takes the
    exact-product kernel again."""
    cupy_or_skip()
    from ozsim.gemm.ozaki2 import onepass

    assert onepass.SLICE_QUBITS
    _check_kernel_takes(monkeypatch, "_apply_slices", sorted(onepass.SLICE_QUBITS))
    if 3 in onepass.SLICE_QUBITS:
        monkeypatch.setattr(onepass, "SLICE_QUBITS", onepass.SLICE_QUBITS - {3})
        _check_kernel_takes(monkeypatch, "_apply_exact", [3])


@pytest.mark.gpu
def test_byte_slice_gate_takes_every_launch_it_is_measured_with(monkeypatch):
    """crt_gate_slices.cu under each block shape and prefetch setting that SLICE_LAUNCH was
    chosen from gives the residue kernels' bits (random Haar gates and states, 15 moduli)."""
    cp = cupy_or_skip()
    from ozsim.gemm.ozaki2 import onepass

    rng = np.random.default_rng(12)
    n = 12
    for d in sorted(onepass.SLICE_QUBITS):
        u = haar_unitary(1 << d, rng)
        psi0 = rng.standard_normal(1 << n) + 1j * rng.standard_normal(1 << n)
        qubits = tuple(int(q) for q in rng.choice(n, d, replace=False))
        prep = registry.parse("int8-crt15").scheme.prepare(cp.asarray(u))

        def run():
            sv = StateVector(n, cp)
            sv._buf[...] = cp.asarray(psi0)
            sv.apply(prep, qubits, backend="int8-crt15", T=0)
            return sv.to_numpy()

        monkeypatch.setattr(onepass, "SLICE_QUBITS", frozenset())
        want = run()
        monkeypatch.setattr(onepass, "SLICE_QUBITS", frozenset({d}))
        for launch in ((128, 1), (256, 1), (256, 2), (512, 1)):
            for prefetch in (0, 1):
                monkeypatch.setitem(onepass.SLICE_LAUNCH, d, launch)
                monkeypatch.setitem(onepass.SLICE_OPTIONS, d, (f"-DPREFETCH={prefetch}",))
                np.testing.assert_array_equal(run(), want, err_msg=f"d={d} {launch} {prefetch}")


@pytest.mark.gpu
def test_one_pass_emulated_gate_raises_on_nan():
    cp = cupy_or_skip()
    from ozsim import NonFiniteError
    from ozsim.gemm import registry

    for backend, qubits in [("int8x9", (1,)), ("int8-auto", (1,)), ("int8-crt14", (1,)),
                            ("int8-crt-auto", (1,)), ("int8x9", (0, 2, 4, 5)),
                            ("int8-auto", (5, 1, 3)), ("int8-crt14", (7, 0, 3, 2)),
                            ("int8-crt-auto", (6, 5, 4))]:
        sv = StateVector(8, cp)
        sv._buf[5] = np.nan
        u = cp.eye(1 << len(qubits), dtype=cp.complex128)
        with pytest.raises(NonFiniteError, match="NaN or Inf"):
            sv.apply(registry.parse(backend).scheme.prepare(u), qubits, backend=backend)


@pytest.mark.gpu
def test_one_pass_gate_without_the_check_leaves_nan_where_it_was():
    """check_each_gate = False (the simulator's statevector runs): a fixed-s scheme I or a
    scheme II gate does not wait for its NaN/Inf flag; the NaN's group is left as it was (so the
    final check finds it) and the other groups are the checked run's. int8-auto still raises:
    its statistics read is awaited anyway."""
    cp = cupy_or_skip()
    from ozsim import NonFiniteError
    from ozsim.gemm import registry

    rng = np.random.default_rng(8)
    for backend, qubits in [("int8x9", (0, 2, 4)), ("int8-crt14", (7, 0, 3, 2)),
                            ("int8x9", (1,)), ("int8-crt-auto", (6, 5, 4))]:
        psi = rng.standard_normal(1 << 9) + 1j * rng.standard_normal(1 << 9)
        psi[5] = np.nan
        u = cp.asarray(haar_unitary(1 << len(qubits), rng))
        prep = registry.parse(backend).scheme.prepare(u)
        checked, free = StateVector(9, cp), StateVector(9, cp)
        for sv in (checked, free):
            sv._buf[...] = cp.asarray(psi)
        with pytest.raises(NonFiniteError, match="NaN or Inf"):
            checked.apply(prep, qubits, backend=backend)
        free.check_each_gate = False
        free.apply(prep, qubits, backend=backend)
        got, want = free._buf.get(), checked._buf.get()
        group = [i for i in range(1 << 9)
                 if all((i >> q) & 1 == (5 >> q) & 1 for q in range(9) if q not in qubits)]
        np.testing.assert_array_equal(got[group], psi[group])  # (NaN compares equal here)
        np.testing.assert_array_equal(got, want)
    sv = StateVector(9, cp)
    sv._buf[5] = np.nan
    sv.check_each_gate = False
    with pytest.raises(NonFiniteError, match="NaN or Inf"):
        sv.apply(registry.parse("int8-auto").scheme.prepare(cp.eye(8, dtype=cp.complex128)),
                 (0, 1, 2), backend="int8-auto")


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["int8-auto", "int8x8", "int8-crt-auto", "int8-crt12",
                                     "zgemm"])
def test_brickwork_of_small_gates_on_the_gpu_is_the_cpu_run(backend):
    cupy_or_skip()
    from ozsim import Simulator, gates

    for gq in (1, 2):
        circuit = gates.brickwork(9, depth=5, gate_qubits=gq, seed=4 + gq)
        runs = [Simulator(backend=backend, T=1, device=dev, max_fused_qubits=0).run(circuit)
                for dev in ("cpu", "gpu")]
        cpu, gpu = (r.statevector for r in runs)
        if backend == "zgemm":
            np.testing.assert_allclose(gpu, cpu, rtol=0, atol=1e-14)
        else:
            np.testing.assert_array_equal(gpu, cpu)
            assert runs[0].metadata["splits"] == runs[1].metadata["splits"]


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["int8-auto", "int8-crt-auto", "zgemm"])
def test_gemm_path_run_is_the_one_pass_run(backend):
    """Simulator(one_pass=False), the benchmarks' native baseline: the same blocks (fusion fixed)
    through the GEMM path give the one-pass kernels' state (bitwise for the INT8 schemes)."""
    cupy_or_skip()
    from ozsim import Simulator, gates

    circuit = gates.brickwork(12, depth=4, gate_qubits=2, seed=9)
    runs = [Simulator(backend=backend, T=1 if backend == "int8-auto" else 0, device="gpu",
                      max_fused_qubits=4, one_pass=flag).run(circuit) for flag in (True, False)]
    one, gemm = (r.statevector for r in runs)
    assert runs[0].metadata["fusion"] == runs[1].metadata["fusion"]
    assert runs[1].metadata["peak_memory_bytes"] > runs[0].metadata["peak_memory_bytes"]
    if backend == "zgemm":
        np.testing.assert_allclose(gemm, one, rtol=0, atol=1e-14)
    else:
        np.testing.assert_array_equal(gemm, one)


@pytest.mark.gpu
def test_gpu_run_of_small_gates_holds_one_buffer():
    cupy_or_skip()
    from ozsim import Simulator, gates

    circuit = gates.brickwork(12, depth=4, gate_qubits=2, seed=1)
    for backend in ("zgemm", "int8-auto", "int8-crt-auto"):
        gpu = Simulator(backend=backend, device="gpu", max_fused_qubits=2).run(circuit)
        cpu = Simulator(backend=backend, device="cpu", max_fused_qubits=2).run(circuit)
        assert gpu.metadata["peak_memory_bytes"] == 16 * 2**12
        np.testing.assert_allclose(gpu.statevector, cpu.statevector, rtol=0, atol=1e-14)


@pytest.mark.gpu
def test_zgemm_seven_qubit_gates_run_in_place_where_the_device_has_m16n8k8():
    """Gauss's form at d = 7 (FP64 m16n8k8, compute capability 9.0): a run of 7-qubit gates
    holds one buffer and agrees with the CPU; elsewhere the GEMM path's two buffers."""
    cupy_or_skip()
    from ozsim import Circuit, Simulator
    from ozsim.gemm import native

    rng = np.random.default_rng(17)
    n = 12
    circuit = Circuit(n)
    for _ in range(3):
        circuit.unitary(haar_unitary(1 << 7, rng), tuple(int(q) for q in rng.choice(n, 7, False)))
    gpu = Simulator(backend="zgemm", device="gpu", max_fused_qubits=7).run(circuit)
    cpu = Simulator(backend="zgemm", device="cpu", max_fused_qubits=7).run(circuit)
    one = native.one_pass_supported(7)
    assert (gpu.metadata["peak_memory_bytes"] == 16 * 2**n) == one
    np.testing.assert_allclose(gpu.statevector, cpu.statevector, rtol=0, atol=1e-14)


def test_zgemm_seven_qubit_one_pass_needs_a_gpu_that_has_it():
    from dataclasses import replace

    from ozsim.gemm import native, registry

    scheme = registry.parse("zgemm").scheme
    assert native.one_pass_supported(6) and scheme.one_pass("gpu", 6)
    assert replace(scheme, one_pass_check=lambda d: True).one_pass("gpu", 7)
    assert not replace(scheme, one_pass_check=lambda d: d < 7).one_pass("gpu", 7)
    assert not scheme.one_pass("gpu", 8)
    if importlib.util.find_spec("cupy") is None:  # no CuPy: the GEMM path at 7
        assert not native.one_pass_supported(7) and not scheme.one_pass("gpu", 7)
    # fusion prices d = 7 as a one-pass gate only where this GPU runs it so
    top = 7 if native.one_pass_supported(7) else 6
    assert registry.cost_model("gpu", "zgemm").one_pass_qubits == top
    assert scheme.costs["gpu"].one_pass_qubits == 7


def test_cost_models_keep_their_one_pass_range_where_no_check_cuts_it():
    from ozsim.gemm import registry

    for schemes, precision in ((registry.SCHEMES, "double"), (registry.SINGLE_SCHEMES, "single")):
        for scheme in schemes:
            if scheme.one_pass_check is not None:
                continue
            for device, model in scheme.costs.items():
                first = scheme.names[0]
                count = first.counts[0] if first.counts else 0
                name = first.pattern.format(s=count, N=count)
                got = registry.cost_model(device, name, precision)
                assert got.one_pass_qubits == model.one_pass_qubits, (scheme.key, device)


def _statistics_cases(seed: int, d: int):
    """``(psi, qubits, B.T)`` for the statistics tests: a 14-qubit state of Ozaki's phi = 4
    inputs with zeros, a zero group and subnormal amplitudes, viewed through low targets and
    through random ones (B.T as the CPU path sees it: targets to the front)."""
    from ozsim.testing import ozaki_matrix

    rng = np.random.default_rng(seed)
    n = 14
    psi = ozaki_matrix(rng, 1 << n, 1, 4.0)[:, 0]
    psi[rng.random(1 << n) < 0.1] = 0
    psi[: 1 << d] = 0
    psi[7] = 3e-320 + 1e-310j
    for qubits in [tuple(range(d)), tuple(int(q) for q in rng.choice(n, d, replace=False))]:
        axes = [n - 1 - q for q in reversed(qubits)]
        rest = [a for a in range(n) if a not in axes]
        bt = np.ascontiguousarray(np.transpose(psi.reshape((2,) * n), axes + rest)
                                  .reshape(1 << d, -1).T)
        yield psi, qubits, bt


@pytest.mark.gpu
@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 6])
def test_int8_auto_statistics_pass_is_the_cpu_loss_histogram(d):
    """The one-read statistics kernels against ozaki1.loss_histogram of B.T, on Ozaki's inputs
    with zeros, whole zero groups and subnormal amplitudes (losses past the packed counters)."""
    cp = cupy_or_skip()
    from ozsim.gemm.ozaki1 import onepass
    from ozsim.gemm.ozaki1.scheme import loss_histogram, row_exponents

    for psi, qubits, bt in _statistics_cases(40 + d, d):
        want = loss_histogram(bt, row_exponents(bt))
        got = onepass.statistics(cp.asarray(psi), qubits)
        assert want[8:].sum() > 0  # the kernel's shared-memory path is exercised too
        np.testing.assert_array_equal(got, want)


def test_cost_model_takes_measured_one_pass_multiples_where_given():
    m = CostModel(1e12, 1e13, 20, 0.0, 10, one_pass_qubits=4, one_pass_rate=1e13,
                  one_pass_passes=(3.0, 2.0))
    floor = 32 * 2**20 / 1e12
    assert m.gate_time(20, 1) == pytest.approx(3 * floor)
    assert m.gate_time(20, 2) == pytest.approx(2 * floor)
    assert m.gate_time(20, 3) == pytest.approx(max(floor, 8 * 2**23 / 1e13))  # the rate model
    assert m.gate_time(20, 5) == pytest.approx(20 * floor)

"""The GPU path of Ozaki scheme II (``ozsim.gemm.ozaki2.cuda``) against the CPU path, bit for bit.

Scheme II is exact integer arithmetic up to one final rounding done by the same operations on
both devices (``ozsim.gemm.ozaki2``), so every ``int8-crt{N}`` / ``int8-crt-auto`` result here
must equal the CPU's (``array_equal``: signed zeros compare equal). Skipped cleanly without CuPy
or a CUDA device.
"""

from __future__ import annotations

import numpy as np
import pytest

from ozsim import NonFiniteError
from ozsim.gemm import PreparedCRTOperand, ozaki1, zgemm
from ozsim.gemm.ozaki2 import analyse_rows, crt_constants, residues, scaled_pieces
from ozsim.testing import ozaki_matrix

from conftest import cupy_or_skip

pytestmark = pytest.mark.gpu

cp = cupy_or_skip(module=True)

# imported once a GPU is known (they import CuPy)
from ozsim.gates import brickwork
from ozsim.gemm.ozaki1 import cuda as _cuda
from ozsim.gemm.ozaki2 import cuda as _cuda_crt
from ozsim.simulator import Simulator

# (m, k, n): k = 1, k not a multiple of 4, k >= 64 (16-byte padding), k > MAX_GEMM_K (two
# cuBLAS pieces), odd m and n, and state-vector shapes 2**d x 2**(N-d).
SHAPES = [(24, 96, 20), (7, 1, 5), (5, 13, 33), (3, 70, 9), (6, 9000, 7), (16, 16, 2**14),
          (64, 64, 2**12), (130, 200, 257)]


def _pair(seed, m, k, n, phi):
    rng = np.random.default_rng(seed)
    return ozaki_matrix(rng, m, k, phi), ozaki_matrix(rng, k, n, phi)


@pytest.mark.parametrize("m, k, n", SHAPES[:5] + [(40, 20000, 40)])
def test_analysis_matches_cpu(m, k, n):
    """Norm exponents equal the CPU's; (40, 20000, 40) splits k into segments."""
    a, b = _pair(1, m, k, n, 3.0)
    a[0] = 0
    a[-1] *= 2.0**-1045  # a row whose largest scalar is below 2**-1010 (ldexp path)
    b[:, -1] *= 2.0**-1060
    b[0, 0] = 0
    for x in (a, b.T):  # rows contiguous along k, and B's strided columns
        f_cpu = analyse_rows(x)
        f_gpu = _cuda_crt.analyse(cp.asarray(x) if x is a else cp.asarray(b).T)
        assert np.array_equal(f_gpu.get(), f_cpu)


@pytest.mark.parametrize("rows, k", [(5, 1), (70, 64), (9, 128), (33, 256), (17, 300),
                                     (4, 1000), (130, 1024), (3, 2000), (5, 4096), (3, 8192)])
def test_analysis_tile_equals_segments(rows, k, monkeypatch):
    """The one-pass analysis (``crt_analyse_tile``, k <= 8192; 8 .. 1024 threads per row)
    gives the CPU's norm exponents, and the segmented passes' flag, on rows
    contiguous along k and on strided columns (rows adjacent in memory), with a zero row, a row
    below 2**-1010 and rows not a multiple of the block's; NaN and Inf still raise."""
    rng = np.random.default_rng(rows + k)
    x = ozaki_matrix(rng, rows, k, 4.0)
    x[1 % rows] = 0
    x[-1] *= 2.0**-1045
    f_cpu = analyse_rows(x)
    for xg in (cp.asarray(x), cp.asarray(np.ascontiguousarray(x.T)).T):
        f_t, acc_t = _cuda_crt.analyse_launch(xg)
        with monkeypatch.context() as mp:
            mp.setattr(_cuda_crt, "_TILE_K", 0)
            f_s, acc_s = _cuda_crt.analyse_launch(xg)
        assert np.array_equal(f_t.get(), f_cpu) and np.array_equal(f_s.get(), f_cpu)
        assert cp.array_equal(acc_t, acc_s) and int(acc_t.get()[0]) == 0
        for bad in (np.nan, np.inf):
            y = xg.copy()
            y[rows // 2, k - 1] = complex(0.0, bad)
            with pytest.raises(NonFiniteError):
                _cuda_crt.analyse(y)


def test_reduce_extreme_products():
    """crt_reduce's integer mod (multiply-high) on INT32 products up to +-(2**31 - 2**14)."""
    rng = np.random.default_rng(11)
    m, ld = 6, 64
    big = 2**31 - 2**14
    t = rng.integers(-big, big + 1, size=(3, m, ld), dtype=np.int64)
    t[:, 0, :8] = [[big, -big, 0, 1, -1, 255, -256, 2**30]] * 3
    for p in crt_constants(20).moduli:
        u = cp.empty((2, m, ld), dtype=cp.uint8)
        _cuda_crt._kernel("crt_reduce")(
            (2,), (128,), (cp.asarray(t.astype(np.int32)), np.int64(m), np.int64(ld),
                           np.int64(m * ld), np.int32(p), np.uint32((1 << 39) // p + 1), u))
        got = u.get().astype(np.int64)
        assert np.array_equal(got[0], (t[0] - t[1]) % p), p
        assert np.array_equal(got[1], (t[2] - t[0] - t[1]) % p), p


@pytest.mark.parametrize("bits", [13, 30, 40, 58, 60, 65, 66, 70, 71, 100, 150])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("rounding", [True, False])
def test_residues_match_cpu(bits, weighted, rounding):
    a, b = _pair(2, 9, 70, 11, 4.0)
    b[:, -1] *= 2.0**-1060  # 2**(bits - f) is not a normal number: the ldexp path
    n_mod = 20
    const = crt_constants(n_mod)
    for x_host, x_dev in ((a, cp.asarray(a)), (b.T, cp.asarray(b).T)):
        f = analyse_rows(x_host)
        kpad = _cuda.padded_k(x_host.shape[1])
        ra = -(-x_host.shape[0] // 4) * 4
        got = _cuda_crt.residues_gpu(x_dev, cp.asarray(f), bits, n_mod, weighted=weighted,
                                     kpad=kpad, rows_alloc=ra, rounding=rounding).get()
        shift = (bits - f)[:, None]
        pr = scaled_pieces(x_host.real, shift, bits, rounding=rounding)
        pi = scaled_pieces(x_host.imag, shift, bits, rounding=rounding)
        rows, k = x_host.shape
        for i, (p, q) in enumerate(zip(const.moduli, const.weights)):
            want = residues(pr, pi, p, q if weighted else 1)
            assert np.array_equal(got[i, :, :rows, :k], want.astype(np.int8)), (bits, p)
        assert not got[:, :, rows:].any() and not got[:, :, :, k:].any()
        # the fused kernel's layouts: [r, i] and [r, -i, r, i] (int8 negation wraps -128 to
        # -128: the same residue mod 256, the only modulus with -128 among its residues)
        for planes, want_planes in [(2, [got[:, 0], got[:, 1]]),
                                    (4, [got[:, 0], -got[:, 1], got[:, 0], got[:, 1]])]:
            other = _cuda_crt.residues_gpu(x_dev, cp.asarray(f), bits, n_mod, weighted=weighted,
                                           kpad=kpad, rows_alloc=ra, rounding=rounding,
                                           planes=planes).get()
            assert np.array_equal(other, np.stack(want_planes, axis=1)), (bits, planes)


@pytest.mark.parametrize("bits", [15, 16, 29, 30, 44, 45, 58, 59, 65, 70])
def test_residues_extreme_integers(bits):
    """Scaled integers at the edge of each piece plan (crt_residues32's bound |acc| < 2**23 is
    tightest there): |v| = 2**bits, 2**bits - 1 (53 bits of ones, shifted), and the ties of the
    balanced pieces (v = 2**(PB - 1) (1 + 2**PB + ...)), both signs, every modulus, all planes."""
    plan = _cuda_crt.pieces32(bits)
    pb = plan[1] if plan else 26
    top = 2.0**bits
    specials = [top, top - 2.0 ** max(0, bits - 53), 2.0 ** (pb - 1), 0.0, 1.0,
                sum(2.0 ** (pb * i + pb - 1) for i in range(bits // pb)),
                sum(2.0 ** (pb * i + pb - 1) for i in range(bits // pb)) + 2.0 ** (pb - 2)]
    vals = np.array([s for s in specials if abs(s) <= top] * 2)
    rng = np.random.default_rng(bits)
    vals = np.concatenate([vals, -vals, rng.uniform(-1, 1, 64) * top])
    k = 4 * (-(-vals.size // 4))
    x = np.zeros((2, k), dtype=np.complex128)
    x[0, :vals.size] = vals * 2.0**-bits + 1j * vals[::-1] * 2.0**-bits
    x[1, :vals.size] = -vals[::-1] * 2.0**-bits + 1j * vals * 2.0**-bits
    f = np.zeros(2, dtype=np.int32)  # v = rint(x 2**bits) exactly the values above
    shift = (bits - f)[:, None]
    pr = scaled_pieces(x.real, shift, bits)
    pi = scaled_pieces(x.imag, shift, bits)
    const = crt_constants(20)
    for weighted in (False, True):
        got = _cuda_crt.residues_gpu(cp.asarray(x), cp.asarray(f), bits, 20, weighted=weighted,
                                     kpad=k, rows_alloc=4).get()
        for i, (p, q) in enumerate(zip(const.moduli, const.weights)):
            want = residues(pr, pi, p, q if weighted else 1)
            assert np.array_equal(got[i, :, :2], want.astype(np.int8)), (bits, p, weighted)


@pytest.mark.parametrize("bits, plan", [(15, (1, 13)), (30, (2, 15)), (44, (3, 15)),
                                        (58, (4, 15)), (59, (5, 13)), (70, (5, 14)), (71, None)])
def test_pieces32_plan_and_bound(bits, plan):
    """The fewest balanced pieces, and the bound that makes them exact, at each edge."""
    assert _cuda_crt.pieces32(bits) == plan
    if plan:
        n, pb = plan
        top = max(0, bits - pb * (n - 1))
        assert 128 * ((n - 1) * 2 ** (pb - 1) + 2**top) < 2**23


@pytest.mark.parametrize("m, k, n", SHAPES)
@pytest.mark.parametrize("num_moduli", [2, 8, 14, 16, 20])
def test_fixed_moduli_bitwise_equal_to_cpu(m, k, n, num_moduli):
    a, b = _pair(3, m, k, n, 1.0)
    backend = f"int8-crt{num_moduli}"
    ref = zgemm(a, b, backend=backend)
    got = zgemm(cp.asarray(a), cp.asarray(b), backend=backend)
    assert np.array_equal(got.get(), ref)


@pytest.mark.parametrize("phi", [0.1, 1.0, 4.0])
@pytest.mark.parametrize("T", [0.0, 1.0, 3.0])
def test_auto_same_plan_and_bits_as_cpu(phi, T):
    a, b = _pair(4, 24, 96, 20, phi)
    ref, info_c = zgemm(a, b, backend="int8-crt-auto", T=T, return_info=True)
    got, info_g = zgemm(cp.asarray(a), cp.asarray(b), backend="int8-crt-auto", T=T,
                        return_info=True)
    assert info_g == info_c
    if info_c.fallback:
        np.testing.assert_allclose(got.get(), ref, rtol=1e-12, atol=0)
    else:
        assert np.array_equal(got.get(), ref)


def test_blocking_out_strides_and_cached_residues():
    a, b = _pair(5, 16, 16, 3000, 2.0)
    ad, bd = cp.asarray(a), cp.asarray(b)
    ref = zgemm(a, b, backend="int8-crt15")
    prep = PreparedCRTOperand(ad)
    c1 = zgemm(prep, bd, backend="int8-crt15", workspace_bytes=20_000)  # many column blocks
    assert _cuda_crt.last_stats["blocks"] > 1
    out = cp.full((3000, 16), np.nan, dtype=cp.complex128).T  # strided output
    c2 = zgemm(prep, bd[:, ::1], backend="int8-crt15", out=out)
    assert c2 is out and len(prep._device_cache) == 1
    assert np.array_equal(c1.get(), ref) and np.array_equal(c2.get(), ref)


@pytest.mark.parametrize("backend", ["int8-crt9", "int8-crt-auto"])
def test_nonfinite_raise_on_gpu(backend):
    a = cp.eye(4, dtype=cp.complex128)
    b = cp.ones((4, 3), dtype=cp.complex128)
    a2 = a.copy()
    a2[1, 2] = np.nan
    with pytest.raises(NonFiniteError, match="NaN or Inf"):
        zgemm(a2, b, backend=backend)
    b2 = b.copy()
    b2[3, 0] = np.inf
    with pytest.raises(NonFiniteError, match="NaN or Inf"):
        zgemm(a, b2, backend=backend)


@pytest.mark.parametrize("backend, T", [("int8-crt-auto", 1.0), ("int8-crt14", 1.0)])
def test_simulator_gpu_equals_cpu(backend, T):
    circ = brickwork(12, depth=4, gate_qubits=4, seed=9)
    cpu = Simulator(backend=backend, T=T, device="cpu", max_fused_qubits=0).run(circ)
    gpu = Simulator(backend=backend, T=T, device="gpu", max_fused_qubits=0).run(circ)
    assert np.array_equal(gpu.statevector, cpu.statevector)
    assert gpu.metadata["fallbacks"] == cpu.metadata["fallbacks"] == 0


@pytest.mark.parametrize("backend", ["int8-crt9", "int8-crt-auto"])
def test_prepared_operand_nan_raises_at_first_gemm(backend):
    """The GPU prepared operand's NaN/Inf flag is fetched with B's (one sync per GEMM) or with
    the auto rule's statistics: NaN in the gate still raises, at the GEMM and before anything is
    written; the statistics equal the CPU's."""
    a, b = _pair(18, 8, 16, 5, 1.0)
    a_bad = a.copy()
    a_bad[3, 4] = np.nan
    prep = PreparedCRTOperand(cp.asarray(a_bad))  # launches only
    out = cp.full((8, 5), 7.0, dtype=cp.complex128)
    with pytest.raises(NonFiniteError, match="NaN or Inf"):
        zgemm(prep, cp.asarray(b), backend=backend, out=out)
    assert bool((out == 7.0).all())
    with pytest.raises(NonFiniteError, match="NaN or Inf"):
        PreparedCRTOperand(cp.asarray(a_bad)).bound_stats
    good = PreparedCRTOperand(cp.asarray(a))
    assert good._pending is not None
    c = zgemm(good, cp.asarray(b), backend=backend)
    assert good._pending is None
    assert good.bound_stats == PreparedCRTOperand(a).bound_stats
    assert np.array_equal(c.get(), zgemm(a, b, backend=backend))


@pytest.mark.parametrize("phi", [0.5, 4.0])
def test_bound_stats_of_prepared_operand_match(phi):
    """The auto rule's statistics are exact: the GPU's equal the CPU's, so both pick alike."""
    a, _ = _pair(6, 32, 4000, 1, phi)
    a[:, 5] *= 2.0**-30
    assert PreparedCRTOperand(a).bound_stats == PreparedCRTOperand(cp.asarray(a)).bound_stats
    assert np.array_equal(ozaki1.row_exponents(a), _cuda.analyse(cp.asarray(a), False)[0].get())


# -- the fused products (ozsim.gemm.ozaki2.wgmma; default for K <= FUSED_MAX_K) --------------------
def _fused_or_skip():
    from ozsim.gemm.ozaki2 import wgmma as _crt_wgmma

    if not _crt_wgmma.available():
        why = _crt_wgmma._state.get("error") or "compute capability 9.0 (H100/H200) needed"
        pytest.skip(f"fused scheme II kernel unavailable: {why}")
    return _crt_wgmma


@pytest.mark.parametrize("m, k, n", SHAPES + [(300, 1000, 700), (256, 256, 1000)])
@pytest.mark.parametrize("num_moduli", [2, 16, 20])
@pytest.mark.parametrize("form", [3, 4])
def test_fused_products_bitwise_equal_to_cpu(m, k, n, num_moduli, form, monkeypatch):
    """Both forms (Karatsuba, direct): partial tiles (m, n not multiples of 128/256), k < BK,
    k > 8192, all moduli counts (256 among them: the direct form's -(-128))."""
    _fused_or_skip()
    monkeypatch.setenv("OZSIM_CRT_FUSED", str(form))
    a, b = _pair(7, m, k, n, 1.0)
    backend = f"int8-crt{num_moduli}"
    ref = zgemm(a, b, backend=backend)
    got = zgemm(cp.asarray(a), cp.asarray(b), backend=backend)
    assert _cuda_crt.last_stats["form"] == form
    assert np.array_equal(got.get(), ref)


def test_fused_blocking_and_auto(monkeypatch):
    """Several column blocks through one prepared operand, and int8-crt-auto, fused = CPU."""
    _fused_or_skip()
    monkeypatch.setenv("OZSIM_CRT_FUSED", "1")
    a, b = _pair(8, 130, 200, 3000, 2.0)
    ref = zgemm(a, b, backend="int8-crt15")
    got = zgemm(PreparedCRTOperand(cp.asarray(a)), cp.asarray(b), backend="int8-crt15",
                workspace_bytes=2_000_000)
    assert _cuda_crt.last_stats["fused"] and _cuda_crt.last_stats["blocks"] > 1
    assert np.array_equal(got.get(), ref)
    ref, info_c = zgemm(a, b, backend="int8-crt-auto", T=0.0, return_info=True)
    got, info_g = zgemm(cp.asarray(a), cp.asarray(b), backend="int8-crt-auto", T=0.0,
                        return_info=True)
    assert info_g == info_c and not info_c.fallback
    assert np.array_equal(got.get(), ref)


@pytest.mark.parametrize("form", [3, 4])
def test_fused_k_chunks_equal_to_cpu(form, monkeypatch):
    """K split into launches of 384 (three chunks, the last partial: 384 + 384 + 240) that add
    their residues mod p into u, both forms, all 20 moduli."""
    wg = _fused_or_skip()
    monkeypatch.setenv("OZSIM_CRT_FUSED", str(form))
    monkeypatch.setattr(wg, "K_CHUNK", 384)
    a, b = _pair(11, 140, 1000, 300, 2.0)
    got = zgemm(cp.asarray(a), cp.asarray(b), backend="int8-crt20")
    assert _cuda_crt.last_stats["form"] == form
    assert np.array_equal(got.get(), zgemm(a, b, backend="int8-crt20"))


def test_fused_default_rule_and_overrides(monkeypatch):
    """Unset: fused for K <= FUSED_MAX_K (direct form up to DIRECT_MAX_K, Karatsuba above),
    cuBLAS above; 0, 1, 3, 4 force; results always equal."""
    _fused_or_skip()
    monkeypatch.delenv("OZSIM_CRT_FUSED", raising=False)
    kmax, kdir = _cuda_crt.FUSED_MAX_K, _cuda_crt.DIRECT_MAX_K
    for k, env, form in [(kmax, None, 3), (kmax + 1, None, 0), (kdir, None, 4), (kdir + 1, None, 3),
                         (300, "0", 0), (kmax + 1, "1", 3), (300, "4", 4), (300, "3", 3),
                         (32769, "4", 3)]:
        if env is None:
            monkeypatch.delenv("OZSIM_CRT_FUSED", raising=False)
        else:
            monkeypatch.setenv("OZSIM_CRT_FUSED", env)
        a, b = _pair(9, 40, k, 300, 1.0)
        got = zgemm(cp.asarray(a), cp.asarray(b), backend="int8-crt16")
        assert _cuda_crt.last_stats["form"] == form, (k, env)
        assert _cuda_crt.last_stats["fused"] is (form > 0), (k, env)
        assert np.array_equal(got.get(), zgemm(a, b, backend="int8-crt16")), (k, env)


@pytest.mark.parametrize("form, cluster", [(3, 1), (3, 2), (4, 1), (4, 2), (4, 4)])
@pytest.mark.parametrize("m, k, n", [(40, 96, 300), (130, 200, 257), (300, 1000, 700),
                                     (256, 256, 1000), (513, 2048, 600)])
def test_fused_clusters_equal_to_cpu(m, k, n, cluster, form, monkeypatch):
    """Clusters of 2 CTAs (B multicast) and of 1, forced, both forms (the direct one's short
    reduction at k <= 256), and of 4 in the direct form: one row tile (the partners' tiles
    empty), two, three (an odd count), five; = CPU bitwise."""
    wg = _fused_or_skip()
    monkeypatch.setenv("OZSIM_CRT_FUSED", str(form))
    monkeypatch.setattr(wg, "CLUSTER", cluster)
    monkeypatch.setattr(wg, "DIRECT_CLUSTER", {0: cluster})
    a, b = _pair(12, m, k, n, 1.0)
    got = zgemm(cp.asarray(a), cp.asarray(b), backend="int8-crt16")
    assert _cuda_crt.last_stats["form"] == form
    assert np.array_equal(got.get(), zgemm(a, b, backend="int8-crt16"))


def test_fused_cluster_sizes():
    """Clusters of 1, 2 or (the direct form) 4 only; by default the direct form runs alone on
    one row tile, in clusters of 4 on four and in pairs otherwise, Karatsuba's form alone."""
    wg = _fused_or_skip()
    pm = _cuda_crt.modulus_table(2)
    for pa, pb, cluster in [(4, 2, 3), (3, 3, 4)]:
        with pytest.raises(ValueError, match="clusters"):
            wg.gemm_mod(cp.zeros((2, pa, 8, 32), cp.int8), cp.zeros((2, pb, 8, 32), cp.int8),
                        pm, cp.zeros((2, 2, 5, 16), cp.uint8), 5, 16, cluster=cluster)
    funcs = wg._state.setdefault("funcs", {})
    for pa, pb, m, want in [(4, 2, 200, 2), (4, 2, 100, 1), (4, 2, 500, 4), (4, 2, 700, 2),
                            (3, 3, 200, wg.CLUSTER)]:
        funcs.clear()
        wg.gemm_mod(cp.zeros((2, pa, 704, 32), cp.int8), cp.zeros((2, pb, 8, 32), cp.int8), pm,
                    cp.zeros((2, 2, m, 16), cp.uint8), m, 16)
        assert {key[1] for key in funcs} == {want}, (pa, m)


@pytest.mark.parametrize("form, k, cluster", [(3, 65536, 1), (3, 65536, 2), (4, 32768, 1),
                                               (4, 32768, 2), (4, 256, 1), (4, 256, 2),
                                               (4, 256, 4), (4, 1024, 1), (4, 1024, 4)])
def test_fused_extreme_products(form, k, cluster):
    """Every residue -128 (Bi: 127 on even columns) at each form's bound, all 20 moduli (256 down
    to 173), against Python integers, in one launch and in the default K chunks. Karatsuba at
    k = 65536: |T1| = |T3| = 2**30, |T2| up to 2**30 (also in clusters of 2 CTAs, over two row
    tiles); direct at k = 32768: |D1| = |D2| up to 2**30, summed mod p over launches of
    |D| <= 2**28; direct at k = 256 and in launches of 256 (crt_gemm_mod4_short's reduction):
    |D| = 2**23, its bound (also in clusters of 2 and 4, over two and four row tiles)."""
    wg = _fused_or_skip()
    moduli = crt_constants(20).moduli
    N, m, n = 20, {1: 5, 2: 200, 4: 500}[cluster], 40
    pa, pb = (3, 3) if form == 3 else (4, 2)
    a_res = cp.full((N, pa, -(-m // 8) * 8, k), -128, dtype=cp.int8)
    b_res = cp.full((N, pb, n, k), -128, dtype=cp.int8)
    b_res[:, 1, ::2] = 127  # Bi: 127 on even columns
    bi = np.where(np.arange(n) % 2 == 0, 127, -128)
    t1, t2 = k * 128 * 128, k * -128 * bi  # (-128)(-128) and (-128) Bi summed over k
    # Karatsuba: u_re = T1 - T2, u_im = T3 - T1 - T2 with T3 = T1 (the third planes are -128
    # too); direct: D1 = A0 Br + A1 Bi, D2 = A2 Bi + A3 Br, every A plane -128
    want = (t1 - t2, -t2) if form == 3 else (t1 + t2, t1 + t2)
    # one launch at the bound (direct: launches of |D| = 2**28, LAUNCH_T_BITS, k_chunk = k being
    # cut to that), and the default K chunks
    for k_chunk in (k, None) + ((wg.SHORT_K,) if form == 4 and k <= 1024 else ()):
        u = cp.zeros((N, 2, m, 48), dtype=cp.uint8)
        wg.gemm_mod(a_res, b_res, _cuda_crt.modulus_table(N), u, m, 48, k_chunk=k_chunk,
                    cluster=cluster)
        got = u.get()[:, :, :, :n].astype(np.int64)
        for i, p in enumerate(moduli):
            for j in range(2):
                assert np.array_equal(got[i, j], np.broadcast_to(want[j] % p, (m, n))), (p, j)


def _unpermute(u):
    """gemm_mod's permuted stores back in column order: in each aligned group of 32 columns,
    column c's byte lies at c with bits 1-2 and 3-4 swapped (its own inverse)."""
    s = np.arange(u.shape[-1])
    c = (s & ~31) | ((s & 6) << 2) | ((s >> 2) & 6) | (s & 1)
    out = np.empty_like(u)
    out[..., c] = u
    return out


@pytest.mark.parametrize("form, k, k_chunk", [(4, 256, None), (4, 1024, None), (4, 1024, 256),
                                               (3, 384, None), (3, 384, 128)])
def test_fused_permuted_stores_are_a_column_permutation(form, k, k_chunk):
    """permuted=True stores the very bytes of permuted=False, each row's columns swapped
    within groups of 32 (the direct form in one launch, short and plain, and in launches of
    256 that add to the earlier ones; Karatsuba likewise), on random residues of 15 moduli; an
    ld that is not a multiple of 32 is refused."""
    wg = _fused_or_skip()
    rng = np.random.default_rng(k + form)
    N, m, n, ld = 15, 37, 90, 96
    pa, pb = (3, 3) if form == 3 else (4, 2)
    a_res = cp.asarray(rng.integers(-128, 128, (N, pa, 40, k), dtype=np.int8))
    b_res = cp.asarray(rng.integers(-128, 128, (N, pb, n, k), dtype=np.int8))
    pm = _cuda_crt.modulus_table(N)
    got = []
    for permuted in (False, True):
        u = cp.zeros((N, 2, m, ld), dtype=cp.uint8)
        wg.gemm_mod(a_res, b_res, pm, u, m, ld, k_chunk=k_chunk, permuted=permuted)
        got.append(u.get())
    assert got[0][..., :n].any()
    assert np.array_equal(_unpermute(got[1])[..., :n], got[0][..., :n])
    assert not np.array_equal(got[1][..., :n], got[0][..., :n])  # the stores did move
    with pytest.raises(ValueError, match="ld % 32"):
        wg.gemm_mod(a_res, b_res, pm, cp.zeros((N, 2, m, 112), cp.uint8), m, 112,
                    permuted=True)


@pytest.mark.parametrize("backend", ["int8-crt15", "int8-crt16", "int8-crt8"])
@pytest.mark.parametrize("n", [90, 250, 1024])
def test_fused_permuted_path_equal_to_cpu(n, backend, monkeypatch):
    """The GEMM path with the permuted stores (ld % 32 == 0: n = 90 and 250 end inside a group
    of 32, 1024 fills them) and without them: = CPU bitwise, direct form (k = 200, the short
    kernel) and Karatsuba (k = 300 forced); crt_finish with 2 columns a thread (15 moduli: the
    columns in order, read at their stored place) and 4 (16 and 8 moduli: in stored order)."""
    wg = _fused_or_skip()
    for env, k in (("4", 200), ("3", 300)):
        monkeypatch.setenv("OZSIM_CRT_FUSED", env)
        a, b = _pair(n + k, 40, k, n, 2.0)
        want = zgemm(a, b, backend=backend)
        for permuted in (True, False):
            monkeypatch.setattr(wg, "PERMUTED", permuted)
            got = zgemm(cp.asarray(a), cp.asarray(b), backend=backend)
            assert _cuda_crt.last_stats["fused"], (n, env)
            assert np.array_equal(got.get(), want), (n, env, permuted)


@pytest.mark.parametrize("num_moduli", [2, 5, 8, 11, 12, 15, 16])
def test_finish_on_tensor_cores_equals_crt_finish(num_moduli, monkeypatch):
    """crt_finish_tc (the digit sums on the INT8 tensor cores) = crt_finish bit for bit on
    random residues and on residues at p - 1 (the largest sums), columns in order and permuted
    (groups of 32 cut by nb), rows and columns not multiples of the tiles, an output with
    strides; crt_finish itself equals the CPU (the GEMM tests)."""
    from types import SimpleNamespace

    if int(cp.cuda.Device().compute_capability) < 80:
        pytest.skip("mma.m16n8k16 with u8 needs compute capability 8.0")
    c = crt_constants(num_moduli)
    p = cp.asarray(np.array(c.moduli, dtype=np.int64))[:, None, None, None]
    rng = cp.random.default_rng(num_moduli)
    for m, nb, perm in ((3, 5, False), (40, 300, False), (40, 300, True), (130, 1000, True),
                        (7, 2085, False), (7, 2085, True)):
        ld = -(-nb // 32) * 32 if perm else -(-nb // 4) * 4
        for extreme in (False, True):
            u = (p - 1 if extreme else rng.integers(0, 1 << 30, size=(1, 2, m, ld)) % p)
            u = cp.ascontiguousarray(cp.broadcast_to(u, (num_moduli, 2, m, ld)).astype(cp.uint8))
            prep = SimpleNamespace(norm_exponents=rng.integers(-30, 30, m, dtype=cp.int32))
            fb = rng.integers(-30, 30, nb, dtype=cp.int32)
            outs = []
            for tc in (False, True):
                monkeypatch.setattr(_cuda_crt, "FINISH_TC", tc)
                fk = _cuda_crt._finish_kernel(num_moduli)
                assert (fk[1] is not None) == tc
                out = cp.full((nb + 3, m), np.nan, dtype=cp.complex128)
                view = out[:nb].T  # strides (1, m + ...) in elements: so_r = 1, so_c = m
                _cuda_crt._finish(fk, u, m, nb, ld, _cuda_crt._crt_constants_gpu(num_moduli),
                                  prep, fb, 90, view, 1, m, perm)
                outs.append(out.get())
            assert not np.isnan(outs[1][:nb]).any() and np.isnan(outs[1][nb:]).all()
            assert np.array_equal(outs[0].view(np.uint64), outs[1].view(np.uint64)), \
                (m, nb, perm, extreme)


def test_finish_on_tensor_cores_where_it_applies(monkeypatch):
    """By default the reconstruction takes the tensor cores only on GPUs without full-rate FP64;
    forced (FINISH_TC = True), the GEMM path takes them up to 16 moduli and crt_finish from 17
    (two k16 steps), = CPU bitwise either way."""
    if int(cp.cuda.Device().compute_capability) < 80:
        pytest.skip("mma.m16n8k16 with u8 needs compute capability 8.0")
    cc = cp.cuda.Device().compute_capability
    assert _cuda_crt.FINISH_TC is None
    assert _cuda_crt._finish_tc_applies(15) == (cc not in _cuda_crt._FULL_FP64)
    assert not _cuda_crt._finish_tc_applies(17)
    monkeypatch.setattr(_cuda_crt, "FINISH_TC", True)
    names = []
    real = _cuda_crt._finish
    monkeypatch.setattr(_cuda_crt, "_finish",
                        lambda fk, *a, **kw: names.append(fk[1] is not None) or real(fk, *a, **kw))
    a, b = _pair(9, 64, 200, 777, 2.0)
    for num_moduli, tc in ((16, True), (17, False), (8, True)):
        names.clear()
        want = zgemm(a, b, backend=f"int8-crt{num_moduli}")
        got = zgemm(cp.asarray(a), cp.asarray(b), backend=f"int8-crt{num_moduli}")
        assert names and set(names) == {tc}
        assert np.array_equal(got.get(), want), num_moduli


def test_fused_direct_rejects_overflowing_k():
    """The direct form's INT32 chains hold k 2**15: kpad > 32768 is refused, not wrapped."""
    wg = _fused_or_skip()
    with pytest.raises(ValueError, match="overflow"):
        wg.gemm_mod(cp.zeros((2, 4, 8, 32784), cp.int8), cp.zeros((2, 2, 8, 32784), cp.int8),
                    _cuda_crt.modulus_table(2), cp.zeros((2, 2, 5, 16), cp.uint8), 5, 16)


# -- the state read through the gate's permutation (GatheredMatrix; no transposing copy) -------
def _gathered(seed, n, d):
    """A random state of n qubits in a random layout, a random d-qubit front: the
    GatheredMatrix the engine builds, and the permuted copy it stands for."""
    from ozsim.statevector import StateVector

    rng = np.random.default_rng(seed)
    sv = StateVector(n, cp)
    sv._buf[:] = cp.asarray(rng.standard_normal(1 << n) + 1j * rng.standard_normal(1 << n))
    sv.layout = tuple(rng.permutation(n).tolist())
    front = tuple(rng.choice(n, d, replace=False).tolist())
    b, layout = sv._gathered(front, "int8-crt16")
    assert b is not None and layout[:d] == front
    view, _ = sv._transposed(front)
    return b, cp.ascontiguousarray(view).reshape(1 << d, -1)


@pytest.mark.parametrize("n, d, seed", [(12, 6, 1), (14, 8, 2), (13, 7, 3), (16, 10, 4),
                                        (14, 12, 5)])
def test_gathered_matrix_equals_permuted_copy(n, d, seed, monkeypatch):
    """The offsets address the permuted state: materialised, sliced and transposed it equals
    the copy; the analysis and both residue kernels (FP32: 58 bits, FP64: 100 bits) give the
    bytes they give on the copy; zgemm through it (int8-crt16, int8-crt-auto, and the backends
    that materialise it: zgemm, int8-auto) equals zgemm on the copy bitwise."""
    b, ref = _gathered(seed, n, d)
    assert b.shape == ref.shape
    assert cp.array_equal(b.materialize(), ref)
    assert cp.array_equal(b[:, 5:40].T.materialize(), ref[:, 5:40].T)
    f_g = _cuda_crt.analyse(b.T)
    f_r = _cuda_crt.analyse(ref.T)
    assert cp.array_equal(f_g, f_r)
    monkeypatch.setattr(_cuda_crt, "_TILE_K", 0)  # the segmented passes through the tables
    f_s = _cuda_crt.analyse(b.T)
    monkeypatch.undo()
    assert cp.array_equal(f_s, f_r)
    for bits in (58, 100):
        for planes in (2, 3):
            kw = dict(weighted=False, kpad=-(-ref.shape[0] // 16) * 16, rows_alloc=ref.shape[1],
                      planes=planes)
            got = _cuda_crt.residues_gpu(b.T, f_g, bits, 16, **kw)
            want = _cuda_crt.residues_gpu(ref.T, f_r, bits, 16, **kw)
            assert cp.array_equal(got, want), (bits, planes)
    gate = cp.asarray(ozaki_matrix(np.random.default_rng(seed), 1 << d, 1 << d, 1.0))
    for backend in ("int8-crt16", "int8-crt-auto", "zgemm", "int8-auto"):
        got = zgemm(gate, b, backend=backend, T=0.0)
        assert cp.array_equal(got, zgemm(gate, ref, backend=backend, T=0.0)), backend


@pytest.mark.parametrize("k", [32, 128, 512])
@pytest.mark.parametrize("num_moduli, bits, rounding", [(2, 20, True), (8, 47, False),
                                                        (15, 62, True), (16, 58, True)])
def test_residues_on_tensor_cores_equal_analysis_and_residues(k, num_moduli, bits, rounding):
    """kernels/crt_residues_tc.cu (B's analysis and residues in one read) gives the norm
    exponents of analyse and the bytes of residues_gpu (planes [Re, Im], padding rows zero),
    strided (rows contiguous, or adjacent in memory: the staged form) and through offset
    tables, on Ozaki's inputs with phi = 4, zero rows, a row of one nonzero and integers at
    2**bits; NaN sets its flag."""
    if int(cp.cuda.Device().compute_capability) < 80:
        pytest.skip("mma.sync m16n8k32 s8 needs compute capability 8.0")
    rng = np.random.default_rng(k + num_moduli)
    rows, ra = 37, 40
    x = ozaki_matrix(rng, rows, k, 4.0)
    x[3] = 0
    x[5] = 0
    x[5, 7] = -2.5e-300 + 1e-310j
    x[9, :] = 2.0**bits
    xd = cp.asarray(x)
    f_ref = _cuda_crt.analyse(xd)
    want = _cuda_crt.residues_gpu(xd, f_ref, bits, num_moduli, weighted=False, kpad=k,
                                  rows_alloc=ra, rounding=rounding, planes=2)
    # the same matrix through offset tables (a GatheredMatrix of B = X.T)
    buf = cp.ascontiguousarray(xd.T).ravel()
    b = _cuda_crt.GatheredMatrix(buf, cp.arange(k, dtype=cp.int64) * rows,
                                 cp.arange(rows, dtype=cp.int64), (rows, 1))
    assert _cuda_crt.residues_tc_fits(k, num_moduli, bits)
    for xx in (xd, cp.asfortranarray(xd), b.T):
        f = cp.full(rows, -99, dtype=cp.int32)
        out = cp.full((num_moduli, 2, ra, k), 77, dtype=cp.int8)
        flag = cp.zeros(1, dtype=cp.uint64)
        _cuda_crt.residues_tc(xx, f, bits, num_moduli, rows_alloc=ra, rounding=rounding,
                              out=out, flag=flag)
        assert cp.array_equal(f, f_ref), type(xx)
        assert cp.array_equal(out, want), type(xx)
        assert int(flag.get()[0]) == 0
    xd[11, 3] = np.nan
    flag = cp.zeros(1, dtype=cp.uint64)
    _cuda_crt.residues_tc(xd, f, bits, num_moduli, rows_alloc=ra, rounding=rounding, out=out,
                          flag=flag)
    assert int(flag.get()[0]) == 1


def test_gemm_path_takes_the_tensor_core_residues(monkeypatch):
    """int8_crt_zgemm_gpu uses crt_residues_tc for B where it fits (here k = 128, 15 moduli),
    with the same bits as the CPU, over several column blocks; NaN in B still raises."""
    if _cuda_crt._layout(128)[2] != 2 or not _cuda_crt.residues_tc_fits(128, 15, 0):
        pytest.skip("the direct form of the fused products (compute capability 9.0) and "
                    "mma.sync s8 are needed")
    calls = []
    real = _cuda_crt.residues_tc
    monkeypatch.setattr(_cuda_crt, "residues_tc",
                        lambda *a, **kw: calls.append(1) or real(*a, **kw))
    a, b = _pair(8, 128, 128, 3000, 1.0)
    ref = zgemm(a, b, backend="int8-crt15")
    got = zgemm(cp.asarray(a), cp.asarray(b), backend="int8-crt15", workspace_bytes=2_000_000)
    assert calls and _cuda_crt.last_stats["blocks"] > 1
    assert np.array_equal(got.get(), ref)
    b[100, 2999] = np.inf
    with pytest.raises(NonFiniteError, match="NaN or Inf"):
        zgemm(cp.asarray(a), cp.asarray(b), backend="int8-crt15")


@pytest.mark.parametrize("backend", ["int8-crt-auto", "int8-crt15"])
def test_simulator_gathered_equals_copy(backend, monkeypatch, gathered_calls):
    """A brickwork circuit of 7-qubit gates on 15 qubits (the GEMM path: every gate needs a
    permutation): the state read through the permutation (the default) equals the copying
    engine bitwise, and the CPU; the gathered path is taken."""
    taken = gathered_calls
    circ = brickwork(15, depth=4, gate_qubits=7, seed=11)
    cpu = Simulator(backend=backend, T=0.0, device="cpu", max_fused_qubits=0).run(circ)
    taken.clear()  # (the CPU's state vector never gathers)
    got = Simulator(backend=backend, T=0.0, device="gpu", max_fused_qubits=0).run(circ)
    assert any(taken)
    monkeypatch.setenv("OZSIM_GATHER", "0")
    taken.clear()
    copy = Simulator(backend=backend, T=0.0, device="gpu", max_fused_qubits=0).run(circ)
    assert not any(taken)
    assert np.array_equal(got.statevector, copy.statevector)
    assert np.array_equal(got.statevector, cpu.statevector)


def test_an_unimportable_gpu_module_is_a_named_error(monkeypatch):
    import sys

    import ozsim.gemm.ozaki2 as pkg
    from ozsim import GPUModuleError

    monkeypatch.delattr(pkg, "cuda", raising=False)
    monkeypatch.setitem(sys.modules, "ozsim.gemm.ozaki2.cuda", None)
    a = cp.asarray(ozaki_matrix(np.random.default_rng(0), 8, 8, 1.0))
    with pytest.raises(GPUModuleError, match=r"ozsim\.gemm\.ozaki2\.cuda failed to import"):
        zgemm(a, a, backend="int8-crt14")


@pytest.mark.parametrize("m, k", [(1, 1), (70, 3), (3000, 40), (40, 20000), (513, 257)])
def test_bound_stats_on_the_gpu_equal_the_cpu_for_every_shape(m, k):
    """The column statistics over the whole GPU (tall, wide, tiny, transposed views): the CPU's
    integers, zero rows and columns, subnormal columns and NaN included."""
    rng = np.random.default_rng(m + k)
    a = ozaki_matrix(rng, m, k, 3.0)
    a[m // 2] = 0
    a[:, k // 2] = 0
    a[:, -1] *= 2.0**-1060
    from ozsim.gemm.ozaki2 import bound_stats

    for x in (a, np.ascontiguousarray(a.T).T):
        assert bound_stats(cp.asarray(x)) == bound_stats(x)
    bad = a.copy()
    bad[-1, 0] = np.inf
    with pytest.raises(NonFiniteError):
        bound_stats(cp.asarray(bad))

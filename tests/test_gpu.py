"""The GPU path (``ozsim.gemm.ozaki1.cuda``) against the CPU path: bit for bit for ``int8x{s}``.

The INT8 backends are built from exact integer products and one fixed FP64 accumulation order,
so the GPU must reproduce the CPU's bits, not merely come close: every comparison of an
``int8x{s}`` or ``int8-auto`` result here is ``array_equal``. Native ZGEMM (cuBLAS vs BLAS) sums
in a different order and is compared to 1e-12. Every test needs CuPy and a CUDA device and is
skipped cleanly without them.
"""

from __future__ import annotations

import numpy as np
import pytest

from ozsim import Circuit, InsufficientMemoryError, NonFiniteError
from ozsim.gemm import PreparedOperand, bits_per_slice, zgemm
from ozsim.gemm.ozaki1 import loss_histogram, row_exponents, split_rows
from ozsim.testing import ozaki_matrix

from conftest import cupy_or_skip

pytestmark = pytest.mark.gpu

cp = cupy_or_skip(module=True)

from ozsim.gemm.ozaki1 import cuda as _cuda  # noqa: E402  (imports CuPy: only once a GPU is known)
from ozsim.simulator import Simulator, get_array_module  # noqa: E402
from ozsim.statevector import StateVector  # noqa: E402

PHIS = (0.1, 1.0, 4.0)
SPLITS = (3, 7, 8, 12, 18)
# (m, k, n): odd sizes, k = 1, k not a multiple of 4, k >= 64 (16-byte padding), and
# state-vector shapes 2**d x 2**(N-d).
SHAPES = [(24, 96, 20), (7, 1, 5), (5, 13, 33), (3, 70, 9), (4, 4, 2**14), (64, 64, 2**12)]


def _pair(seed, m, k, n, phi):
    rng = np.random.default_rng(seed)
    return ozaki_matrix(rng, m, k, phi), ozaki_matrix(rng, k, n, phi)


def _haar(rng, dim):
    z = (rng.standard_normal((dim, dim)) + 1j * rng.standard_normal((dim, dim))) / np.sqrt(2)
    q, r = np.linalg.qr(z)
    return q * (np.diag(r) / np.abs(np.diag(r)))


def _brickwork(num_qubits, depth, d, seed):
    rng = np.random.default_rng(seed)
    circ = Circuit(num_qubits, name=f"brickwork_n{num_qubits}_d{d}")
    for layer in range(depth):
        off = 0 if layer % 2 == 0 else d // 2
        for s0 in range(off, num_qubits - d + 1, d):
            circ.unitary(_haar(rng, 1 << d), tuple(range(s0, s0 + d)))
    return circ


# -- kernels against the CPU functions --------------------------------------------------------
@pytest.mark.parametrize("phi", PHIS)
@pytest.mark.parametrize("shape", [(37, 5), (6, 300), (1, 1), (2**12, 4), (33, 16), (1000, 128),
                                   (300, 512), (5, 1024), (77, 32), (45, 64), (129, 256)])
def test_analyse_matches_row_exponents_and_histogram(phi, shape):
    """All three kernels (values in registers for k = 32 .. 1024, a power of two; else a thread
    a row or a warp a row), state-vector row lengths included."""
    rng = np.random.default_rng(11)
    x = ozaki_matrix(rng, *shape, phi)
    x[0, :] = 0  # a zero row
    if shape[1] > 1:
        x[-1, 0] = 2.0**-1070  # a subnormal
    # row-major (one warp a row) and column-major (one thread a row) layouts
    for view in (cp.asarray(x), cp.asfortranarray(cp.asarray(x))):
        e, h = _cuda.analyse(view)
        np.testing.assert_array_equal(e.get(), row_exponents(x))
        np.testing.assert_array_equal(h, loss_histogram(x, row_exponents(x)))
        e_t, h_t = _cuda.analyse(view.T)  # columns: the B operand's case
        np.testing.assert_array_equal(e_t.get(), row_exponents(x.T))
        np.testing.assert_array_equal(h_t, loss_histogram(x.T, row_exponents(x.T)))


@pytest.mark.parametrize("k", [64, 128, 256, 512])
def test_analyse_register_counts_are_flushed_before_they_wrap(k, monkeypatch):
    """oz_analyse_r counts losses 0..7 in 8-bit fields: with one multiprocessor's worth of blocks
    every thread takes many rows, so a missing flush would wrap the counts."""
    monkeypatch.setattr(_cuda, "_sms", lambda: 1)
    rng = np.random.default_rng(k)
    x = ozaki_matrix(rng, 2**21 // k + 3, k, 0.5)
    e, h = _cuda.analyse(cp.asfortranarray(cp.asarray(x)))
    np.testing.assert_array_equal(e.get(), row_exponents(x))
    np.testing.assert_array_equal(h, loss_histogram(x, row_exponents(x)))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("s", [3, 8, 18])
@pytest.mark.parametrize("shape", [(5, 3), (8, 16), (3, 70), (33, 1)])
def test_split_matches_split_rows(reverse, s, shape):
    rng = np.random.default_rng(12)
    x = ozaki_matrix(rng, *shape, 2.0)
    rows, k = shape
    bits = bits_per_slice(k)
    e = row_exponents(x)
    ref = split_rows(x, e, s, bits, reverse=reverse)
    got = _cuda.split(cp.asarray(x), cp.asarray(e), s, bits, reverse=reverse).get()
    ra, kpad = _cuda.padded_rows(rows), _cuda.padded_k(k)
    assert got.shape == (2 * ra, s, kpad) and got.dtype == np.int8
    np.testing.assert_array_equal(got[:rows, :, :k], ref[:rows])
    np.testing.assert_array_equal(got[ra : ra + rows, :, :k], ref[rows:])
    assert not got[:, :, k:].any() and not got[rows:ra].any() and not got[ra + rows :].any()


@pytest.mark.parametrize("s", [3, 9, 18])
@pytest.mark.parametrize("shape", [(45, 128), (37, 256), (9, 512), (200, 128)])
def test_split_at_state_vector_row_lengths_matches_split_rows(s, shape):
    """k of 7- to 9-qubit gates (16 bytes a thread and slice), rows adjacent in memory and rows
    contiguous along k, a zero row and padding rows."""
    rng = np.random.default_rng(s)
    x = ozaki_matrix(rng, *shape, 3.0)
    x[1, :] = 0
    rows, k = shape
    e = row_exponents(x)
    ref = split_rows(x, e, s, 7, reverse=True)
    ra = _cuda.padded_rows(rows) + 6
    for view in (cp.asarray(x), cp.asfortranarray(cp.asarray(x))):
        got = _cuda.split(view, cp.asarray(e), s, 7, reverse=True, rows_alloc=ra).get()
        np.testing.assert_array_equal(got[:rows], ref[:rows])
        np.testing.assert_array_equal(got[ra : ra + rows], ref[rows:])
        assert not got[rows:ra].any() and not got[ra + rows :].any()


@pytest.mark.parametrize("k", [4, 128, 1024])
def test_analyse_flags_nan_and_inf(k):
    rng = np.random.default_rng(k)
    x = cp.asarray(ozaki_matrix(rng, 70, k, 1.0))
    for bad in (cp.nan, cp.inf):
        y = x.copy()
        y[69, k - 1] = bad
        with pytest.raises(NonFiniteError):
            _cuda.analyse(y)
        with pytest.raises(NonFiniteError):
            _cuda.analyse(cp.asfortranarray(y))


# -- zgemm, bit for bit -----------------------------------------------------------------------
@pytest.mark.parametrize("phi", PHIS)
@pytest.mark.parametrize("s", SPLITS)
@pytest.mark.parametrize("shape", SHAPES)
def test_int8_is_bitwise_identical_to_cpu(shape, s, phi):
    a, b = _pair(hash((shape, s, phi)) & 0xFFFF, *shape, phi)
    want = zgemm(a, b, backend=f"int8x{s}")
    got = zgemm(cp.asarray(a), cp.asarray(b), backend=f"int8x{s}")
    assert isinstance(got, cp.ndarray)
    np.testing.assert_array_equal(got.get(), want)


@pytest.mark.parametrize("k", [2**15, 2**18])
def test_large_k_chunks_groups_exactly(k):
    """k (2**b - 1)**2 leaves room for only a few slice pairs per INT32 GEMM: groups are chunked."""
    bits = bits_per_slice(k)
    assert _cuda.max_chunk(k, bits) < 6
    assert len(_cuda.groups(8, k, bits)) > 8
    a, b = _pair(13, 3, k, 2, 1.0)
    want = zgemm(a, b, backend="int8x8")
    got = zgemm(cp.asarray(a), cp.asarray(b), backend="int8x8").get()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", ["int8x7", "int8x13", "int8-auto"])
def test_zero_rows_subnormal_and_extreme_exponents_bitwise(backend):
    rng = np.random.default_rng(5)
    a = ozaki_matrix(rng, 6, 16, 1.0)
    b = ozaki_matrix(rng, 16, 5, 1.0)
    a[2] = 0
    b[:, 3] = 0
    a[4] *= 2.0**-1060
    a[5] *= 2.0**1000
    b[:, 1] *= 2.0**-900
    want = zgemm(a, b, backend=backend, T=0)
    got = zgemm(cp.asarray(a), cp.asarray(b), backend=backend, T=0).get()
    np.testing.assert_array_equal(got, want)


def test_blocking_strides_and_out_do_not_change_bits():
    rng = np.random.default_rng(6)
    a = ozaki_matrix(rng, 8, 8, 2.0)
    big = ozaki_matrix(rng, 16, 3003, 2.0)
    b = big[::2, ::3]  # (8, 1001), non-contiguous
    want = zgemm(a, b, backend="int8x9")
    a_d, b_d = cp.asarray(a), cp.asarray(big)[::2, ::3]
    c1 = zgemm(a_d, b_d, backend="int8x9")
    c2 = zgemm(a_d, b_d, backend="int8x9", workspace_bytes=1)  # one column a block
    assert _cuda.last_stats["blocks"] == 1001
    c3 = zgemm(PreparedOperand(a_d), b_d, backend="int8x9", workspace_bytes=50_000)
    assert 1 < _cuda.last_stats["blocks"] < 1001
    out_big = cp.full((8, 2002), cp.nan, dtype=cp.complex128)
    c4 = zgemm(a_d, b_d, backend="int8x9", out=out_big[:, ::2])
    for c in (c1, c2, c3, c4):
        np.testing.assert_array_equal(c.get(), want)
    assert cp.isnan(out_big[:, 1::2]).all()  # untouched


@pytest.mark.parametrize("phi", PHIS)
def test_prepared_operand_analysed_on_the_host_is_the_gpu_analysis(phi):
    """PreparedOperand(matrix, host=...): exponents and loss histogram from the NumPy copy equal
    the GPU kernel's, and its slices the same bits; NaN in the host copy raises."""
    rng = np.random.default_rng(int(10 * phi))
    a = ozaki_matrix(rng, 32, 32, phi)
    a[3, :5] = 0
    a[7] = 0
    gpu, host = PreparedOperand(cp.asarray(a)), PreparedOperand(cp.asarray(a), host=a)
    assert isinstance(host.exponents, cp.ndarray)
    np.testing.assert_array_equal(host.exponents.get(), gpu.exponents.get())
    np.testing.assert_array_equal(host.histogram, gpu.histogram)
    np.testing.assert_array_equal(host.split(8, 7).slices.get(), gpu.split(8, 7).slices.get())
    a[1, 1] = np.nan
    with pytest.raises(NonFiniteError):
        PreparedOperand(cp.asarray(a), host=a)


@pytest.mark.parametrize("T", [0.0, 1.0])
@pytest.mark.parametrize("phi", PHIS)
def test_int8_auto_chooses_the_same_splits(T, phi):
    a, b = _pair(14, 16, 64, 300, phi)
    want, info_cpu = zgemm(a, b, backend="int8-auto", T=T, return_info=True)
    got, info_gpu = zgemm(cp.asarray(a), cp.asarray(b), backend="int8-auto", T=T,
                          return_info=True)
    assert info_gpu == info_cpu
    np.testing.assert_array_equal(got.get(), want)


def test_int8_auto_first_gate_counts_nonzeros_only():
    rng = np.random.default_rng(3)
    gate = _haar(rng, 16)
    state = np.zeros((16, 2**12), dtype=np.complex128)
    state[0, 0] = 1.0
    _, info_cpu = zgemm(gate, state, backend="int8-auto", T=1, return_info=True)
    c, info = zgemm(cp.asarray(gate), cp.asarray(state), backend="int8-auto", T=1,
                    return_info=True)
    assert info == info_cpu and info.num_splits >= 8
    assert float(cp.abs(c - cp.asarray(gate @ state)).max()) < 1e-15


def test_native_zgemm_close_to_cpu():
    a, b = _pair(15, 40, 50, 60, 1.0)
    got = zgemm(cp.asarray(a), cp.asarray(b), backend="zgemm").get()
    np.testing.assert_allclose(got, a @ b, rtol=0, atol=1e-12 * np.abs(a @ b).max())


@pytest.mark.parametrize("backend", ["int8x8", "int8-auto"])
@pytest.mark.parametrize("where", ["a", "b"])
def test_nan_raises_before_writing(backend, where):
    a, b = _pair(16, 4, 8, 6, 1.0)
    (a if where == "a" else b)[1, 2] = np.nan
    out = cp.full((4, 6), 7.0, dtype=cp.complex128)
    with pytest.raises(NonFiniteError, match="NaN or Inf"):
        zgemm(cp.asarray(a), cp.asarray(b), backend=backend, out=out)
    assert bool((out == 7.0).all())


def test_profile_stages_reports_every_stage():
    a, b = _pair(17, 64, 64, 2**14, 1.0)
    a_d, b_d = cp.asarray(a), cp.asarray(b)
    with _cuda.profile_stages() as t:
        zgemm(a_d, b_d, backend="int8-auto", T=1)
    assert {"analyse", "split_a", "split_b", "gemm", "accumulate"} <= set(t)
    assert all(v > 0 for v in t.values())
    st = _cuda.last_stats
    assert st["workspace_bytes"] == st["b_slice_bytes"] + st["product_bytes"] > 0


# -- the simulator ------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["int8x8", "int8x13", "int8-auto"])
@pytest.mark.parametrize("d", [2, 3])
def test_brickwork_on_gpu_is_bitwise_the_cpu_run(backend, d):
    circ = _brickwork(11, 6, d, seed=20 + d)
    kw = {"backend": backend, "T": 1.0, "max_fused_qubits": 0}
    cpu = Simulator(device="cpu", **kw).run(circ)
    gpu = Simulator(device="gpu", **kw).run(circ)
    assert gpu.metadata["device"] == "gpu"
    assert gpu.metadata["splits"] == cpu.metadata["splits"]
    np.testing.assert_array_equal(gpu.statevector, cpu.statevector)


def test_brickwork_zgemm_on_gpu_close_to_cpu_and_state_stays_on_device():
    circ = _brickwork(12, 5, 4, seed=30)
    cpu = Simulator(backend="zgemm", device="cpu", max_fused_qubits=0).run(circ)
    gpu = Simulator(backend="zgemm", device="gpu", max_fused_qubits=0).run(circ)
    assert isinstance(gpu._amplitudes, cp.ndarray)  # no host copy until asked for
    np.testing.assert_allclose(gpu.amplitude_range(100, 300), cpu.statevector[100:300], rtol=0,
                               atol=1e-12)
    assert isinstance(gpu._amplitudes, cp.ndarray)  # a range leaves the state on the device
    np.testing.assert_allclose(gpu.statevector, cpu.statevector, rtol=0, atol=1e-12)


def test_auto_device_is_the_gpu(monkeypatch):
    monkeypatch.delenv("OZSIM_DEVICE", raising=False)
    xp, device = get_array_module("auto")
    assert xp is cp and device == "gpu"


def test_state_too_large_for_the_gpu_fails_before_allocating():
    pool = cp.get_default_memory_pool()
    before = pool.total_bytes()
    with pytest.raises(InsufficientMemoryError, match=r"a 40-qubit state vector .* GiB of GPU "
                       "memory is free"):
        StateVector(40, cp)
    assert pool.total_bytes() == before


def test_gpu_workspace_default_is_sized_to_the_device():
    sv = StateVector(20, cp)
    assert (1 << 28) <= sv.workspace_bytes <= (1 << 34)
    assert StateVector(20, cp, workspace_bytes=12345).workspace_bytes == 12345


@pytest.mark.parametrize("precision", ["double", "single"])
def test_gpu_permutation_kernel_is_the_transposition(precision, monkeypatch):
    """StateVector._permute on the GPU through kernels/permute_state.cu: the same bits as the
    transposition on the host, for random layouts, targets on the low bits included."""
    n = 13
    rng = np.random.default_rng(7)
    dtype = np.complex128 if precision == "double" else np.complex64
    src = (rng.standard_normal(1 << n) + 1j * rng.standard_normal(1 << n)).astype(dtype)
    for trial in range(8):
        sv = StateVector(n, cp, precision=precision)
        layout = tuple(int(q) for q in rng.permutation(n))
        sv._buf[...] = cp.asarray(src)
        sv.layout = layout
        front = (layout[-1], layout[-2]) if trial < 2 else tuple(
            int(q) for q in rng.permutation(n)[: 1 + trial])
        monkeypatch.setenv("OZSIM_PERMUTE", "1")
        sv._permute(front)
        new = sv.layout
        assert new[: len(front)] == front
        ref = src.reshape((2,) * n).transpose([layout.index(q) for q in new]).ravel()
        np.testing.assert_array_equal(cp.asnumpy(sv._buf), ref)

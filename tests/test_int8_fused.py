"""Scheme I's fused Hopper kernel (``ozsim.gemm.ozaki1.wgmma``: INT8 products and the FP64
accumulation in one ``wgmma`` kernel) against the CPU, bit for bit, and against the cuBLAS path.

Gates above 6 qubits run through the GEMM path; on an H100/H200 its products and accumulation are
this kernel wherever :func:`~ozsim.gemm.ozaki1.wgmma.fits` takes the shape (``kpad`` a multiple
of 128, at least 64 rows). Every comparison is ``array_equal``. Needs CuPy and a CUDA device;
the kernel's own tests also need compute capability 9.0 and are skipped elsewhere.
"""

from __future__ import annotations

import numpy as np
import pytest

from ozsim import Circuit
from ozsim.gates import haar_unitary
from ozsim.gemm import PreparedOperand, bits_per_slice, zgemm
from ozsim.testing import ozaki_matrix

from conftest import cupy_or_skip

pytestmark = pytest.mark.gpu

cp = cupy_or_skip(module=True)

from ozsim.gemm.ozaki1 import backend as _backend  # noqa: E402
from ozsim.gemm.ozaki1 import cuda as _cuda  # noqa: E402  (imports CuPy: only once a GPU is known)
from ozsim.gemm.ozaki1 import wgmma  # noqa: E402
from ozsim.simulator import Simulator  # noqa: E402

needs_fused = pytest.mark.skipif(not wgmma.available(),
                                 reason=f"no fused scheme I kernel: {wgmma._state.get('error')}")

# (m, k, n): a 7-qubit gate on a few columns, m not a multiple of 64, a 10-qubit gate, a column
# count that leaves partial tiles, a tall skinny B
SHAPES = [(128, 128, 1000), (100, 256, 257), (64, 128, 3), (1024, 1024, 300), (256, 512, 2**12)]


def _pair(seed, m, k, n, phi):
    rng = np.random.default_rng(seed)
    return ozaki_matrix(rng, m, k, phi), ozaki_matrix(rng, k, n, phi)


@needs_fused
@pytest.mark.parametrize("phi", [0.1, 1.0, 4.0])
@pytest.mark.parametrize("s", [3, 8, 18])
@pytest.mark.parametrize("shape", SHAPES)
def test_fused_products_are_bitwise_the_cpu(shape, s, phi, monkeypatch):
    monkeypatch.setattr(wgmma, "MAX_IMAGE_BYTES", 1 << 40)  # the kernel on every shape it fits
    a, b = _pair(hash((shape, s, phi)) & 0xFFFF, *shape, phi)
    want = zgemm(a, b, backend=f"int8x{s}")
    got = zgemm(cp.asarray(a), cp.asarray(b), backend=f"int8x{s}")
    assert _cuda.last_stats["products"].startswith("fused")
    assert _cuda.last_stats["product_bytes"] == 0
    np.testing.assert_array_equal(got.get(), want)


@needs_fused
def test_fused_and_cublas_paths_give_the_same_bits(monkeypatch):
    """Zero rows and columns, tiny and huge exponents, a strided ``out``, column blocks: the
    fused kernel and the cuBLAS path agree bit for bit, and NaN in B raises before writing."""
    rng = np.random.default_rng(7)
    a = ozaki_matrix(rng, 128, 128, 2.0)
    b = ozaki_matrix(rng, 128, 999, 2.0)
    a[3] = 0
    a[5] *= 2.0**-1000
    a[9] *= 2.0**900
    b[:, 7] = 0
    b[:, 11] *= 2.0**-1040
    a_d, b_d = PreparedOperand(cp.asarray(a)), cp.asarray(b)
    out = cp.full((128, 2 * 999), cp.nan, dtype=cp.complex128)
    fused = zgemm(a_d, b_d, backend="int8x9", out=out[:, ::2], workspace_bytes=300_000)
    assert _cuda.last_stats["blocks"] > 1 and _cuda.last_stats["products"].startswith("fused")
    assert cp.isnan(out[:, 1::2]).all()  # untouched
    monkeypatch.setenv("OZSIM_INT8_FUSED", "0")
    cublas = zgemm(a_d, b_d, backend="int8x9")
    assert _cuda.last_stats["products"] == "cublas int8"
    np.testing.assert_array_equal(fused.get(), cublas.get())
    np.testing.assert_array_equal(fused.get(), zgemm(a, b, backend="int8x9"))
    monkeypatch.delenv("OZSIM_INT8_FUSED")
    b_d[5, 17] = cp.nan
    out2 = cp.full((128, 999), 3.0, dtype=cp.complex128)
    with pytest.raises(Exception, match="NaN"):
        zgemm(a_d, b_d, backend="int8x9", out=out2)
    assert (out2 == 3.0).all()


@needs_fused
@pytest.mark.parametrize("m", [256, 200])
def test_row_blocks_give_the_same_bits(m, monkeypatch):
    """A's rows in several launches (each block's image within MAX_IMAGE_BYTES), the last block
    partial: the same bits as one launch and as the CPU."""
    a, b = _pair(9, m, 256, 777, 1.0)
    want = zgemm(a, b, backend="int8x8")
    monkeypatch.setattr(wgmma, "MAX_IMAGE_BYTES", wgmma.image_bytes(64, 256, 8))
    monkeypatch.setattr(wgmma, "MAX_ROW_BLOCKS", 8)
    got = zgemm(cp.asarray(a), cp.asarray(b), backend="int8x8").get()
    assert _cuda.last_stats["row_blocks"] == -(-m // 64)
    np.testing.assert_array_equal(got, want)


@needs_fused
def test_fits_refuses_what_the_kernel_cannot_do():
    bits = bits_per_slice(4096)
    assert wgmma.fits(4096, 4096, 16, bits) and not wgmma.fits(4096, 4096, 17, bits)
    assert not wgmma.fits(32, 128, 8, 7)  # too few rows for a tile of the image
    assert not wgmma.fits(128, 144, 8, 7)  # kpad not a multiple of 128
    assert len(wgmma.row_blocks(512, 512, 16)) == 1  # 9-qubit gates: one launch
    assert wgmma.row_blocks(1024, 1024, 9) == [(0, 384), (384, 768), (768, 1024)]  # 10: three
    assert len(wgmma.row_blocks(4096, 4096, 9)) > wgmma.MAX_ROW_BLOCKS  # 12: cuBLAS
    a, b = _pair(3, 4096, 4096, 8, 1.0)  # s = 17 at k = 4096: the cuBLAS path, same bits
    got = zgemm(cp.asarray(a), cp.asarray(b), backend="int8x17").get()
    assert _cuda.last_stats["products"] == "cublas int8"
    np.testing.assert_array_equal(got, zgemm(a, b, backend="int8x17"))


@pytest.fixture
def speculative_calls(monkeypatch):
    """The calls of ``cuda.analyse_split`` (int8-auto's one-read analysis and split), recorded;
    the guesses of earlier tests forgotten."""
    calls = []
    real = _cuda.analyse_split
    monkeypatch.setattr(_backend, "_last_b_splits", {})
    monkeypatch.setattr(_cuda, "analyse_split",
                        lambda *args, **kw: (calls.append(args[1]), real(*args, **kw))[1])
    return calls


@needs_fused
@pytest.mark.parametrize("phi", [0.1, 1.0, 4.0])
@pytest.mark.parametrize("k", [128, 256, 512])
def test_speculative_auto_is_bitwise_the_cpu(k, phi, speculative_calls):
    """int8-auto with B analysed and split in one read for a guessed s: no guess (B analysed
    first), the right guess, one too large and one too small (A's s then decides) all give the
    CPU's bits and the CPU's s; a wrong guess multiplies again with the rule's s. (k = 512:
    rows too long for the one-read kernel, B analysed first whatever the guess.)"""
    rng = np.random.default_rng(k + int(10 * phi))
    a, b = ozaki_matrix(rng, k, k, 0.1), ozaki_matrix(rng, k, 3000, phi)
    want, info = zgemm(a, b, backend="int8-auto", T=1.0, return_info=True)
    a_d, b_d = PreparedOperand(cp.asarray(a)), cp.asarray(b)
    for guess in (None, info.num_splits, 18, 3):
        _backend._last_b_splits.clear()
        if guess is not None:
            _backend._last_b_splits[(k, 1.0)] = guess
        speculative_calls.clear()
        got, got_info = zgemm(a_d, b_d, backend="int8-auto", T=1.0, return_info=True)
        assert bool(speculative_calls) == (guess is not None and k <= 256)
        assert got_info.num_splits == info.num_splits
        np.testing.assert_array_equal(got.get(), want)
    assert _backend._last_b_splits[(k, 1.0)] == info.num_splits  # (A's s is 8, B's the larger)


@needs_fused
def test_speculative_auto_nan_raises_and_leaves_b_as_it_was(speculative_calls):
    a, b = _pair(5, 128, 128, 500, 1.0)
    b[3, 7] = np.nan
    b_d = cp.asarray(b)
    _backend._last_b_splits[(128, 1.0)] = 9
    with pytest.raises(Exception, match="NaN"):
        zgemm(cp.asarray(a), b_d, backend="int8-auto", T=1.0)
    assert speculative_calls
    np.testing.assert_array_equal(b_d.get().view(np.uint64), b.view(np.uint64))


@pytest.mark.parametrize("speculate", ["1", "0"])
@pytest.mark.parametrize("gather", ["1", "0"])
@pytest.mark.parametrize("backend", ["int8x8", "int8-auto"])
def test_seven_and_eight_qubit_gates_are_bitwise_the_cpu_run(backend, gather, speculate,
                                                             monkeypatch, gathered_calls,
                                                             speculative_calls):
    """Gates above the one-pass kernels' 6 qubits (the GEMM path: fused on an H100/H200, cuBLAS
    elsewhere), through the simulator, random targets, the state read through the permutation
    (OZSIM_GATHER=1: no transposing copy) or copied first, int8-auto's split speculated from
    the last gate of the same size or not: the GPU's state is the CPU's."""
    monkeypatch.setenv("OZSIM_GATHER", gather)
    monkeypatch.setenv("OZSIM_INT8_SPECULATE", speculate)
    gathered = gathered_calls
    rng = np.random.default_rng(40)
    circ = Circuit(12, name="wide")
    for d in (7, 8, 7, 8):
        circ.unitary(haar_unitary(1 << d, rng), tuple(int(x) for x in rng.permutation(12)[:d]))
    kw = {"backend": backend, "T": 1.0, "max_fused_qubits": 0}
    cpu = Simulator(device="cpu", **kw).run(circ)
    gathered.clear()  # (the CPU's state vector never gathers)
    gpu = Simulator(device="gpu", **kw).run(circ)
    assert gathered and all(gathered) == (gather == "1") and any(gathered) == (gather == "1")
    assert bool(speculative_calls) == (backend == "int8-auto" and speculate == "1"
                                       and wgmma.available())
    assert gpu.metadata["splits"] == cpu.metadata["splits"]
    np.testing.assert_array_equal(gpu.statevector, cpu.statevector)

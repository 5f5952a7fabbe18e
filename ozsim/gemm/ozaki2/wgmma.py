"""Scheme II's INT8 products with the reduction mod p in the epilogue, on Hopper (private).

One kernel, ``crt_gemm_mod3``, replaces the per-modulus sequence of three cuBLAS INT8 GEMMs (INT32
planes ``T1, T2, T3`` written to HBM) and ``crt_reduce`` (the planes read back) of
:mod:`ozsim.gemm.ozaki2.cuda`: per output tile it computes the three Karatsuba products of one
modulus with ``wgmma`` (INT8 -> INT32 on the tensor cores), reduces each mod ``p`` in registers and
writes only the two UINT8 residues ``u_re = (T1 - T2) mod p`` and ``u_im = (T3 - T1 - T2) mod p``:
2 bytes per output and modulus reach HBM instead of 12 written and 12 read back. The integers are
the cuBLAS path's (exact INT32 sums, ``|T| <= k 2**14``), so results are bitwise equal.

Structure (NVIDIA Hopper, ``sm_90a``; the usual warp-specialised TMA + ``wgmma`` pipeline):

* persistent CTAs (one per multiprocessor) loop over work items = ``128 x 256`` output tiles of
  one modulus, moduli slowest, tiles in groups of :data:`GROUP_N` column tiles so that CTAs
  running together share operand tiles in L2; the stage ring runs on across work items, so the
  next tile's operands load during the epilogue;
* warpgroup 0 (one thread) loads ``128 x 128`` A tiles and ``256 x 128`` B tiles of INT8
  residues (K-major, 128-byte swizzle) with the tensor memory accelerator (TMA) into a ring of
  :data:`STAGES` shared-memory stages, each guarded by a *full* and an *empty* mbarrier;
* warpgroups 1 and 2 each own 64 rows: ``wgmma.m64n256k32.s32.s8.s8`` into 128 INT32 accumulators
  per thread. The three products run one after another over K (``T1 = Ar Br``, then
  ``T2 = Ai Bi``, then ``T3 = (Ar+Ai)(Br+Bi)``), so one accumulator set suffices: after ``T1`` its
  residues stay in registers (one byte per output), after ``T2`` ``u_re`` is written and
  ``(T1 + T2) mod p`` kept, after ``T3`` ``u_im`` is written;
* K longer than :data:`K_CHUNK` runs as several launches; each later one adds its residues to
  ``u`` mod p in the epilogue (1 byte read per output and modulus more per launch);
* ``crt_gemm_mod3_c2`` runs the same in clusters of two CTAs (``cuLaunchKernelEx``) that take
  row tiles ``m0`` and ``m0 + 128`` of one column tile in lockstep: each loads its A tile and
  half of the B tile, which TMA multicasts into both CTAs' shared memory, so B leaves L2 once per
  pair; a stage's *empty* barrier counts the consumer warps of both CTAs (remote arrivals through
  ``mapa``), and both CTAs meet at a cluster barrier before either exits. For Karatsuba's form
  opt-in (:data:`CLUSTER`): not faster on any shape measured since the epilogue stores are
  coalesced. The direct form's ``crt_gemm_mod4_c2`` and ``crt_gemm_mod4_short_c2`` are the
  default where A has more than one row tile, and ``crt_gemm_mod4_c4`` (clusters of 4) where it
  has four (:data:`DIRECT_CLUSTER`): there the B tiles' trips from L2 into shared memory bound
  the kernel.

``crt_gemm_mod4`` is the *direct* form: ``u_re = (Ar Br + (-Ai) Bi) mod p`` and ``u_im = (Ar Bi +
Ai Br) mod p`` as two INT32 chains of two products each, so B needs two residue planes instead
of three and the epilogue two reductions and no kept bytes, for a third more tensor-core work:
the default for ``K <= 1024`` (``ozaki2.cuda.DIRECT_MAX_K``), where the epilogue bounds the
kernel (1.8x faster than Karatsuba's form at K = 256 on the H100), Karatsuba's above.
``crt_gemm_mod4_short`` is the same for launches of ``K <= 256`` (:data:`SHORT_K`; gates of 7
and 8 qubits), whose ``|D| <= 2**23`` lets the epilogue reduce in three instructions.

The epilogue writes whole 32-byte sectors: a thread's accumulators hold 2 adjacent output bytes
every 8 columns, so each quad of lanes (one row) transposes its 4 x 4 block of 16-bit pieces
with two shuffles (``quad_transpose``) and every lane stores 8 adjacent bytes. With 2-byte stores
(ncu: 75% of the written sectors excess) the direct form took 25.5 ms at N = 28, d = 8; 10.2 ms
after (H100, 2026-11-24).

Launched through the driver API (:mod:`ctypes`): the TMA descriptors are built by
``cuTensorMapEncodeTiled`` and passed by value (``__grid_constant__``). The source is
``kernels/products_wgmma.cu`` (the PTX wrappers in ``kernels/hopper.cuh``; package data); each
kernel is compiled on its first launch in a process, by NVRTC for ``sm_90a`` (``wgmma`` and
``setmaxnreg`` exist only there) with the tile geometry as ``-D`` options; on any other GPU
:func:`available` is False and ozsim keeps the cuBLAS path.

Status: the default for ``K <= 8192`` (:func:`ozsim.gemm.ozaki2.cuda._fused_form`: the direct form
for ``K <= 1024``, Karatsuba's above; override with ``OZSIM_CRT_FUSED=0/1/3/4``). 168 registers, no
spills. Checked on an H100 (2026-11-23/24) against exact FP64 products
(an earlier probe, incl. ``|T| = 2**30``; direct: over launches of ``2**28``) and
bitwise against the CPU (``tests/test_gpu_crt.py``); timings in ``benchmarks/RESULTS.md`` section 1.
Karatsuba's epilogue is compiled once per chain (``epilogue<FORM, t>``: 9.0k instructions instead
of 5.6k): with the whole-sector stores that made it 10-20% faster at every K measured (N = 28, d =
8..12; square 8192); with 2-byte stores it had been slower at K = 1024-2048.

References:
    [Ozaki2] K. Ozaki, Y. Uchino, T. Imamura, arXiv:2504.08009 (2025): one exact GEMM per
        modulus. NVIDIA PTX ISA 8.x, "Asynchronous warpgroup level matrix multiply-accumulate"
        (``wgmma.mma_async``, shared-memory matrix descriptors) and "cp.async.bulk.tensor";
        CUDA driver API, ``cuTensorMapEncodeTiled``.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import cupy as cp

from .._gpu import _libcuda, set_dynamic_smem, sm90a_module

__all__ = ["BM", "BN", "BK", "available", "gemm_mod"]

#: Tile of one CTA: rows of A (gate), columns of B (state), bytes of K per stage.
BM, BN, BK = 128, 256, 128
STAGES = 4
#: K per launch: a longer K is split into launches that add their residues mod p into ``u``.
#: A CTA streams its B panel (256 columns x K x 3 planes) for the whole work item, and the
#: panels of the CTAs running together must stay in L2; at K = 16384 one launch ran at 1.23-1.29
#: POP/s on some machines and 0.8-1.0 on others; on one of the latter, chunks of 8192 took 385 ms
#: against 429 ms for one launch (H100, 2026-11-24).
K_CHUNK = 8192
#: ``|D|`` one launch of the direct form may reach: its epilogue's reduction (``modp<true>``) is
#: exact for ``|D| <= 2**28``, so a launch covers at most K = 8192 (``|D| <= k 2**15``); a larger
#: ``k_chunk`` is cut to that. (Karatsuba's reduction takes any ``|T| < 2**31``.)
LAUNCH_T_BITS = 28
#: Column tiles per raster group (CTAs that run together share A and B tiles in L2): 2 was the
#: fastest of 2, 4, 8, 16, 64 on an H100 (``benchmarks/RESULTS.md`` section 7; 8 ran at 45% of
#: 2's rate at 16384^3).
GROUP_N = 2
#: CTAs per cluster (1, or 2 with B multicast: see :func:`gemm_mod`). H100, N = 28, 15 moduli:
#: with 2-byte epilogue stores pairs ran d = 8 in 23.6-24.1 against 25.4 ms; with the coalesced
#: stores 25.8 against 22.4 (slower), and slower or equal on every other shape
#: (``benchmarks/RESULTS.md`` section 7).
CLUSTER = 1
#: CTAs per cluster of the direct form by its number of row tiles ``ceil(m / BM)`` (key 0: any
#: other count; one row tile runs alone). Its four products load B's two planes twice per work
#: item, and every row tile loads them again; a cluster's CTAs take adjacent row tiles of one
#: column tile and share each B tile by TMA multicast. H200, N = 30, 15 moduli, the products
#: kernel alone on random residues at the GEMM path's shapes (a quarter of the columns a launch),
#: times the copy floor, clusters of 1 / 2 / 4: the TMA loads alone (no products, no epilogue)
#: 2.62 / 1.64 at d = 8 (2 row tiles), 4.87 / 3.78 at d = 9 (4); the kernel, two machines, d = 8
#: 4.06-4.34 / 3.91-4.20, d = 9 7.09-7.56 / 6.35-7.29 / 6.81-6.86, d = 10 (8) 12.85-13.62 /
#: 12.59-12.76 / 12.89-13.00; the same bytes.
DIRECT_CLUSTER = {1: 1, 4: 4, 0: 2}
#: The direct form's kernel for launches of K <= :data:`SHORT_K` (``crt_gemm_mod4_short``): with
#: ``|D| <= 2**23`` its epilogue reduces mod p in three instructions instead of four (no shift;
#: ``products_wgmma.cu``, ``modp``'s SHORT, exact for every modulus 128 < p <= 256, checked
#: exhaustively). Its key in the kernel table.
SHORT_FORM, SHORT_K = "4s", 256
#: The GEMM path (``ozaki2.cuda.int8_crt_zgemm_gpu``) stores ``u`` in the epilogue's own order
#: where ``ld % 32 == 0`` (:func:`gemm_mod`'s ``permuted``; ``crt_finish`` reads it so): no quad
#: transpose; the same bytes in other places, so the same results.
PERMUTED = True
_STAGE_BYTES = (BM + BN) * BK
_SMEM_BYTES = STAGES * _STAGE_BYTES + 1024  # + alignment of the 1024-byte swizzle atoms


#: The kernel's source (package data) and NVRTC options besides sm_90a (``wgmma``,
#: ``setmaxnreg``): C++17, the tile geometry above.
_KERNEL = Path(__file__).parent / "kernels" / "products_wgmma.cu"
_OPTIONS = ("-std=c++17", f"-DBM={BM}", f"-DBN={BN}", f"-DBK={BK}",
            f"-DSTAGES={STAGES}")

_state: dict = {}

# CUDA driver API enums (cuda.h, stable since CUDA 12.0)
_CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0
_CU_TENSOR_MAP_INTERLEAVE_NONE = 0
_CU_TENSOR_MAP_SWIZZLE_128B = 3
_CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3
_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0
_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4


class _TMap(ctypes.Structure):
    _fields_ = [("v", ctypes.c_uint64 * 16)]


class _LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute: id, pad to 8, a 64-byte union
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_uint64 * 8)]


class _LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared_bytes", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(_LaunchAttribute)), ("num_attrs", ctypes.c_uint)]


def _cluster_config(grid: int, cluster: int, stream: int) -> tuple[_LaunchConfig, object]:
    """A ``CUlaunchConfig`` for ``grid`` CTAs of 384 threads in clusters of ``cluster`` along x
    (the attribute array is returned too: it must outlive the config)."""
    attr = (_LaunchAttribute * 1)()
    attr[0].id = _CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    dims = ctypes.cast(attr[0].value, ctypes.POINTER(ctypes.c_uint * 3)).contents
    dims[0], dims[1], dims[2] = cluster, 1, 1
    cfg = _LaunchConfig()
    cfg.grid[:] = (grid, 1, 1)
    cfg.block[:] = (384, 1, 1)
    cfg.shared_bytes = _SMEM_BYTES
    cfg.stream = ctypes.c_void_p(stream)
    cfg.attrs = attr
    cfg.num_attrs = 1
    return cfg, attr


def max_clusters(cluster: int = 2, form=3) -> int:
    """Clusters of ``cluster`` CTAs of the ``form`` kernel (``crt_gemm_mod3_c2`` by default;
    every form's kernel has the same block and shared memory) that can be resident at once
    (``cuOccupancyMaxActiveClusters``; a persistent grid larger than this would run its last
    clusters after the others finish)."""
    key = ("max_clusters", cluster)
    if key not in _state:
        cfg, _attr = _cluster_config(cluster * 256, cluster, 0)
        num = ctypes.c_int(0)
        res = _state["lib"].cuOccupancyMaxActiveClusters(
            ctypes.byref(num), ctypes.c_void_p(_function(form, cluster).ptr),
            ctypes.byref(cfg))
        if res != 0:
            raise RuntimeError(f"cuOccupancyMaxActiveClusters failed ({res})")
        _state[key] = int(num.value)
    return _state[key]


def _kernel_options(form, cluster: int = 1, permuted: bool = False) -> tuple[str, tuple]:
    """The name and NVRTC options of the kernel of ``form`` (3: Karatsuba's, 4: the direct form,
    :data:`SHORT_FORM`: its short reduction), ``cluster`` CTAs a cluster and ``permuted`` stores:
    ``crt_gemm_mod3``, ``crt_gemm_mod4``, ``crt_gemm_mod4_short``, each with ``_c2`` / ``_c4``
    in clusters and ``_p`` permuted; the template arguments as ``-DGEMM_*``
    (``kernels/products_wgmma.cu``)."""
    short = form == SHORT_FORM
    name = ("crt_gemm_mod4_short" if short else f"crt_gemm_mod{form}") + (
        f"_c{cluster}" if cluster > 1 else "") + ("_p" if permuted else "")
    return name, (*_OPTIONS, f"-DKERNEL_NAME={name}", f"-DGEMM_FORM={3 if form == 3 else 4}",
                  f"-DGEMM_CL={int(cluster)}", f"-DGEMM_SHORT={int(short)}",
                  f"-DGEMM_PERM={int(bool(permuted))}")


def _function(form, cluster: int = 1, permuted: bool = False):
    """The kernel of ``form`` (3, 4 or :data:`SHORT_FORM`), ``cluster`` and ``permuted``
    (a ``cupy.cuda.function.Function`` with its dynamic shared memory allowed), compiled on first
    use by NVRTC for sm_90a as a module of its own (``kernels/products_wgmma.cu`` with
    :func:`_kernel_options`; the PTX wrappers in ``kernels/hopper.cuh``): about 1 s a kernel.

    Raises:
        RuntimeError: the compiler's log, or the driver refused the shared memory.
    """
    key = (form, cluster, bool(permuted))
    funcs = _state.setdefault("funcs", {})
    if key not in funcs:
        name, options = _kernel_options(form, cluster, permuted)
        func = sm90a_module(_KERNEL, options).get_function(name)
        set_dynamic_smem(func, _SMEM_BYTES)
        funcs[key] = func
    return funcs[key]


def available() -> bool:
    """True on a GPU of compute capability 9.0 (H100, H200) where the kernel compiles (the direct
    form's, as a probe: the others compile on first use) and the driver's TMA entry points are
    found (else the reason is in ``_state["error"]``)."""
    if "ok" in _state:
        return _state["ok"]
    ok = False
    if cp.cuda.Device().compute_capability != "90":
        _state["error"] = f"compute capability {cp.cuda.Device().compute_capability}, not 9.0"
    else:
        try:
            _state["lib"] = _libcuda()
            _function(4)
            ok = True
        except Exception as exc:  # noqa: BLE001 - a capability probe: any failure means "no"
            _state["error"] = f"{type(exc).__name__}: {exc}"
    _state["ok"] = ok
    return ok


def _tensor_map(ptr: int, rows: int, kpad: int, box_rows: int) -> _TMap:
    """TMA descriptor of a ``(rows, kpad)`` INT8 row-major array, ``BK x box_rows`` boxes (also
    :mod:`ozsim.gemm.ozaki1.wgmma`'s)."""
    lib = _libcuda()
    tmap = _TMap()
    dims = (ctypes.c_uint64 * 2)(kpad, rows)
    strides = (ctypes.c_uint64 * 1)(kpad)
    box = (ctypes.c_uint32 * 2)(BK, box_rows)
    elem = (ctypes.c_uint32 * 2)(1, 1)
    res = lib.cuTensorMapEncodeTiled(
        ctypes.byref(tmap), _CU_TENSOR_MAP_DATA_TYPE_UINT8, ctypes.c_uint32(2),
        ctypes.c_void_p(ptr), dims, strides, box, elem, _CU_TENSOR_MAP_INTERLEAVE_NONE,
        _CU_TENSOR_MAP_SWIZZLE_128B, _CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        _CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if res != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed ({res}) for {rows} x {kpad} at {ptr:#x}")
    return tmap


def gemm_mod(a_res, b_res, pm, u, m: int, ld: int, *, group: int | None = None,
             ctas: int | None = None, k_chunk: int | None = None,
             cluster: int | None = None, permuted: bool = False) -> None:
    """``u[l] = [Re(A B) mod p_l, Im(A B) mod p_l]`` for every modulus ``l`` from INT8 residues,
    one launch per K chunk on the current CuPy stream (:func:`available` must be True).

    Two forms, chosen by the number of planes of ``a_res``:

    * Karatsuba (3 planes): ``u_re = (T1 - T2) mod p``, ``u_im = (T3 - T1 - T2) mod p`` with
      ``T1 = Ar Br^T``, ``T2 = Ai Bi^T``, ``T3 = As Bs^T``: three INT8 GEMMs, ``|T| <= k 2**14``.
    * direct (4 planes): ``u_re = (Ar Br^T + (-Ai) Bi^T) mod p``, ``u_im = (Ar Bi^T + Ai Br^T)
      mod p``, each an INT32 chain of two INT8 GEMMs over K (``|D| <= k 2**15 < 2**31`` needs
      ``kpad <= 32768``): four GEMMs, but B has two planes and the epilogue two reductions.

    Args:
        a_res (cupy.ndarray): ``(N, 3, mpa, kpad)`` int8 residues ``[Ar, Ai, Ar + Ai]`` of A's
            rows per modulus, or ``(N, 4, mpa, kpad)`` ``[Ar, -Ai, Ar, Ai]`` (the direct form),
            C-contiguous, ``kpad % 16 == 0`` (TMA strides).
        b_res (cupy.ndarray): ``(N, 3, nbp, kpad)`` int8 residues ``[Br, Bi, Br + Bi]`` of B's
            columns, or ``(N, 2, nbp, kpad)`` ``[Br, Bi]`` with 4-plane ``a_res``; C-contiguous.
        pm (cupy.ndarray): ``(N, 2)`` int32: ``p_l`` and ``crt_reduce``'s multiplier
            ``floor(2**39 / p_l) + 1`` as uint32 bits (``ozaki2.cuda.modulus_table``).
        u (cupy.ndarray): ``(N, 2, m, ld)`` uint8 output, C-contiguous, ``ld % 16 == 0``.
        m: rows of A written (``<= mpa``).
        ld: ``u``'s leading dimension.
        group: column tiles per raster group, default :data:`GROUP_N` (tuning; any value >= 1
            gives the same results).
        ctas: CTAs launched (persistent: each loops over work items); default one per
            multiprocessor; the number of work items ``N ceil(m / 128) ceil(ncols / 256)`` gives
            one work item per CTA (tuning; the results are the same).
        k_chunk: K per launch, default :data:`K_CHUNK` (rounded down to a multiple of 128; in
            the direct form at most 8192, the :data:`LAUNCH_T_BITS` bound); a later
            launch adds its residues to ``u`` mod p (``(x + y) mod p`` of two residues is the
            residue of the sum, so the results are the same).
        cluster: 1, 2 or (the direct form) 4: clusters of CTAs that take adjacent row tiles
            ``m0``, ``m0 + 128``, ... of the same column tile in lockstep, each loading its
            share of the B tile with TMA multicast to all (B read from L2 once per cluster);
            default :data:`CLUSTER` in Karatsuba's form, :data:`DIRECT_CLUSTER` by the row
            tiles in the direct form (tuning; the results are the same).
        permuted: store each row's bytes permuted within aligned groups of 32 columns (column
            ``c`` at ``c`` with bits 1-2 and 3-4 swapped, an involution), as the epilogue holds
            them, without its 4 x 4 transpose inside each quad of lanes (about an instruction an
            output byte); ``crt_finish`` reads that order (``finish.cu``, perm). Needs
            ``ld % 32 == 0``.

    The products run over the stored K (exact INT32 sums). Every ``u[l, :, i, j]`` with
    ``i < m``, ``j < min(nbp, ld)`` is written; columns up to the next multiple of 256 below
    ``ld`` may get residues of the rows the last B tile overhangs into (the caller reads only its
    ``nb <= nbp`` columns).

    Raises:
        ValueError: ``kpad`` or ``ld`` not a multiple of 16 (``ld`` of 32 when ``permuted``),
            a non-contiguous array, planes other than 3/3 or 4/2, the direct form with
            ``kpad > 32768``, or a cluster other than 1, 2 or (the direct form) 4.
        RuntimeError: the driver refused the tensor maps or the launch (its status code), or
            the kernel, compiled on its first launch (:func:`_function`), failed to compile.
    """
    N, pa, mpa, kpad = a_res.shape
    pb, nbp = b_res.shape[1], b_res.shape[2]
    if kpad % 16 or b_res.shape[3] != kpad or ld % 16:
        raise ValueError("crt_gemm_mod needs kpad and ld multiples of 16")
    if permuted and ld % 32:
        raise ValueError(f"crt_gemm_mod's permuted stores need ld % 32 == 0, got ld = {ld}")
    mtiles, ntiles = -(-m // BM), -(-min(nbp, ld) // BN)
    if cluster is None:
        cluster = CLUSTER if pa == 3 else DIRECT_CLUSTER.get(mtiles, DIRECT_CLUSTER[0])
    cl = int(cluster)
    if cl not in (1, 2, 4) or (cl == 4 and pa != 4):
        raise ValueError(f"crt_gemm_mod runs clusters of 1 or 2 CTAs (4 in the direct form), got "
                         f"cluster = {cluster} with {pa} planes")
    if (pa, pb) not in ((3, 3), (4, 2)) or b_res.shape[0] != N:
        raise ValueError(f"crt_gemm_mod needs 3/3 (Karatsuba) or 4/2 (direct) residue planes "
                         f"of N moduli, got A {a_res.shape}, B {b_res.shape}")
    if pa == 4 and kpad > 32768:
        raise ValueError(f"the direct form's INT32 chains overflow for kpad = {kpad} > 32768")
    if not (a_res.flags.c_contiguous and b_res.flags.c_contiguous and u.flags.c_contiguous):
        raise ValueError("crt_gemm_mod needs contiguous residues and output")
    ta = _tensor_map(a_res.data.ptr, N * pa * mpa, kpad, BM)
    tb = _tensor_map(b_res.data.ptr, N * pb * nbp, kpad, BN // cl)
    total = -(-mtiles // cl) * ntiles * N  # work items (of cl row tiles each)
    kblocks = -(-kpad // BK)
    step = int(K_CHUNK if k_chunk is None else k_chunk)
    if pa == 4:
        step = min(step, 1 << (LAUNCH_T_BITS - 15))  # |D| <= 2**28 per launch
    step = max(1, step // BK)

    def form_of(kb0):  # the kernel of the launch at K block kb0
        return SHORT_FORM if pa == 4 and min(step, kblocks - kb0) * BK <= SHORT_K else pa

    if ctas is None:
        ctas = _state.setdefault("sms", cp.cuda.Device().attributes["MultiProcessorCount"])
        if cl > 1:
            ctas = min(ctas, cl * max_clusters(cl, form_of(0)))
    grid = cl * max(1, min(int(ctas) // cl, total))
    stream = cp.cuda.get_current_stream().ptr
    for kb0 in range(0, kblocks, step):
        args = [ta, tb, ctypes.c_int32(mpa), ctypes.c_int32(nbp), ctypes.c_int32(m),
                ctypes.c_int32(ld), ctypes.c_int32(kb0), ctypes.c_int32(min(step, kblocks - kb0)),
                ctypes.c_int32(mtiles), ctypes.c_int32(ntiles), ctypes.c_int32(N),
                ctypes.c_int32(max(1, int(GROUP_N if group is None else group))),
                ctypes.c_int32(kb0 > 0), ctypes.c_uint64(pm.data.ptr), ctypes.c_uint64(u.data.ptr)]
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p)
                                                 for a in args])
        func = ctypes.c_void_p(_function(form_of(kb0), cl, permuted).ptr)
        if cl == 1:
            res = _state["lib"].cuLaunchKernel(
                func, ctypes.c_uint(grid), ctypes.c_uint(1), ctypes.c_uint(1), ctypes.c_uint(384),
                ctypes.c_uint(1), ctypes.c_uint(1), ctypes.c_uint(_SMEM_BYTES),
                ctypes.c_void_p(stream), params, None)
        else:
            cfg, _attr = _cluster_config(grid, cl, stream)
            res = _state["lib"].cuLaunchKernelEx(ctypes.byref(cfg), func, params, None)
        if res != 0:
            raise RuntimeError(f"crt_gemm_mod launch failed ({res})")

"""The one list of GEMM backends: every scheme, its names, devices, costs and accuracy knobs.

Name parsing (:func:`parse`), ``ozsim info``, ``ozsim check --backends all``, the CLI help and
fusion's cost model (:func:`cost_model`) all read :data:`SCHEMES`. Adding a scheme is one module
(or package) with ``run(a, b, backend, *, T, out, xp, check_finite, workspace_bytes) ->
(C, GemmInfo)`` and ``prepare(matrix)``, plus one :class:`Scheme` entry here.

=================  ================================================================================
``zgemm``          native complex128 GEMM (BLAS on the CPU, cuBLAS on the GPU)
``int8x{s}``       Ozaki scheme I over INT8 with ``s`` = 3..18 slices ([ozIMMU] Alg. 3-4, Sec. 4.4)
``int8-auto``      INT8-AUTO: the fewest slices whose mean mantissa loss is ``<= T`` bits
``int8-crt{N}``    Ozaki scheme II over INT8 with ``N`` = 2..20 moduli (3N INT8 GEMMs, Karatsuba)
``int8-crt-auto``  scheme II with the fewest moduli whose error bound is ``<= 2**T`` FP64's
``fp16x{s}``       the Ozaki scheme over FP16 slices, FP32 accumulation, ``s`` = 3..24 ([DGEMM-TC])
``fp16-auto``      the fewest FP16 slices whose largest mantissa loss is ``<= T`` bits ([DGEMM-TC]
                   Alg. 3, :mod:`ozsim.gemm.fp16`)
``int8-cr``        correctly rounded: INT8 slices until nothing is left, every slice product, one
                   rounding (:mod:`ozsim.gemm.exact`)
``fp16-cr``        the same with FP16 slices ([DGEMM-TC] Sec. 4)
=================  ================================================================================

Single precision (``Simulator(precision="single")``, complex64 amplitudes, :mod:`ozsim.gemm.single`)
has its own list, :data:`SINGLE_SCHEMES`: ``cgemm`` (native), ``tf32x3`` / ``tf32x4`` (two TF32
words a value), ``fp16-le`` (LE-GEMM) and ``int8-auto`` (INT8-AUTO with the loss counted against
FP32's 24 bits). :func:`parse` takes the precision.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from . import exact, native
from .cost import CostModel
from .fp16 import MAX_SPLITS as FP16_MAX_SPLITS
from .fp16 import MIN_SPLITS as FP16_MIN_SPLITS
from .fp16 import backend as fp16_backend
from .ozaki1 import MAX_SPLITS, MIN_SPLITS
from .ozaki1 import backend as ozaki1_backend
from .ozaki2 import MAX_MODULI, MIN_MODULI
from .ozaki2 import backend as ozaki2_backend
from .ozaki2.exact_gate import padded_qubits

__all__ = ["PRECISIONS", "SCHEMES", "SINGLE_SCHEMES", "Backend", "BackendName", "Scheme",
           "all_names", "cost_model", "help_text", "parse"]


@dataclass(frozen=True)
class BackendName:
    """One name pattern of a scheme.

    Attributes:
        pattern: the name, with ``{s}``/``{N}`` standing for the count where it takes one
            (``"int8x{s}"``), else the literal name (``"int8-auto"``).
        kind: the legacy kind :func:`ozsim.gemm.parse_backend` returns (``"int8"`` for
            ``int8x{s}``, else the name).
        summary: one line for ``ozsim info`` and the CLI help.
        counts: ``(lo, hi)``, the inclusive range of the count, or ``None`` without one.
        count_name: what the count is (``"splits"``, ``"moduli"``).
        auto: the backend reads the threshold ``T`` (bits of mean mantissa loss).
        check_count: the count ``ozsim check --backends all`` runs this pattern with.
    """

    pattern: str
    kind: str
    summary: str
    counts: tuple[int, int] | None = None
    count_name: str = ""
    auto: bool = False
    check_count: int | None = None

    @property
    def regex(self) -> re.Pattern:
        text = re.escape(self.pattern)
        if self.counts is not None:
            text = re.sub(r"\\\{\w+\\\}", r"(\\d+)", text)
        return re.compile(text)

    def display(self) -> str:
        """``"int8x{s}, s = 3..18"`` or the plain name."""
        if self.counts is None:
            return self.pattern
        sym = re.search(r"\{(\w+)\}", self.pattern).group(1)
        return f"{self.pattern}, {sym} = {self.counts[0]}..{self.counts[1]}"


@dataclass(frozen=True)
class Scheme:
    """One GEMM scheme.

    Attributes:
        key: short identifier (``"native"``, ``"ozaki1"``, ``"ozaki2"``).
        title: one line.
        names: its :class:`BackendName` patterns.
        devices: where it runs (``"cpu"``, ``"gpu"``).
        costs: device -> :class:`~ozsim.gemm.cost.CostModel` for fusion (calibration below).
        accuracy: its accuracy knobs, one line.
        reference: the paper and section of the algorithm.
        run: ``run(a, b, backend, *, T, out, xp, check_finite, workspace_bytes) -> (C, info)``.
        prepare: ``prepare(matrix, host=None)``: the gate operand for repeated products
            (``host``: the same matrix as NumPy where ``matrix`` is on the device; a scheme may
            analyse it there without waiting for the device).
        one_pass_qubits: device -> the largest gate its one-pass kernel applies in place
            (one read and one write of the state; absent: the device has none).
        apply_one_pass: ``apply_one_pass(psi, gate, positions, backend, T, check_finite=True)
            -> GemmInfo``: that kernel (the gate as ``prepare`` returns it, little-endian over
            the amplitude-index bits ``positions``; ``backend`` the parsed name). The INT8
            schemes' kernels leave an amplitude group with NaN or Inf as it was and raise
            ``NonFiniteError``; with ``check_finite=False`` they do not wait for the device to
            find out (the caller checks the final state: the NaN stays there).
        one_pass_check: ``one_pass_check(d) -> bool``, consulted on a GPU for the d
            ``one_pass_qubits`` allows: whether this device's kernel takes d (a kernel that
            needs a newer tensor-core shape; absent: every d allowed).
        pad_gates: ``{d: d'}``, or a function ``(count, d) -> d'`` of the backend's count
            (``None`` for an auto backend): a simulator applies a d-qubit gate as ``I (x) U``
            on ``d'`` qubits (:func:`ozsim.statevector.pad_gate`, through :meth:`padded`), on
            every device alike (so CPU and GPU give the same bits). Scheme I's tensor-core
            one-pass kernels start at 3 qubits and beat its CUDA-core kernels at 1 and 2;
            scheme II's exact-product kernel takes 1- and 2-qubit gates as they are up to 15
            moduli (:func:`ozsim.gemm.ozaki2.exact_gate.padded_qubits`;
            ``benchmarks/RESULTS.md``, section 2).
    """

    key: str
    title: str
    names: tuple[BackendName, ...]
    devices: tuple[str, ...]
    costs: Mapping[str, CostModel]
    accuracy: str
    reference: str
    run: Callable = field(repr=False)
    prepare: Callable = field(repr=False)
    one_pass_qubits: Mapping[str, int] = field(default_factory=dict)
    apply_one_pass: Callable | None = field(default=None, repr=False)
    one_pass_check: Callable[[int], bool] | None = field(default=None, repr=False)
    pad_gates: Mapping[int, int] | Callable[[int | None, int], int] = field(default_factory=dict)

    def padded(self, count: int | None, d: int) -> int:
        """The qubits a d-qubit gate is applied on (:attr:`pad_gates`; ``count``: the backend's
        number of slices or moduli, ``None`` for an auto backend)."""
        if callable(self.pad_gates):
            return self.pad_gates(count, d)
        return self.pad_gates.get(d, d)

    def one_pass(self, device: str, d: int) -> bool:
        """Whether a d-qubit gate on ``device`` runs through the one-pass kernel."""
        return (self.apply_one_pass is not None and 1 <= d <= self.one_pass_qubits.get(device, 0)
                and (device != "gpu" or self.one_pass_check is None or self.one_pass_check(d)))


# Cost models, calibrated on measured runs (2026-11-22):
# CPU (2-core x86 CI-class machine, NumPy/OpenBLAS; benchmarks/fusion_bench.py and 20-qubit
# quantum-volume runs at every limit 2..10): native ZGEMM costs about 4 passes' worth of time per
# gate (permutation, GEMM, Python) and runs small-k ZGEMMs at ~35 GFLOP/s; scheme I ~120 passes
# a gate (split, slice products, accumulation over s ~ 9 slices) and ~1.8 GFLOP/s of emulated
# ZGEMM; scheme II ~390 passes and ~5 GFLOP/s. States whose two buffers fit in a 32 MB
# last-level cache see about 4x the bandwidth.
# GPU (H100, N = 28, benchmarks/RESULTS.md): 3.35 TB/s; native ZGEMM 50 TFLOP/s and 3.8
# passes a gate through the GEMM path (the transposing copy, cuBLAS's read and write and the
# engine's ping-pong: QV-30's 7-qubit blocks measured 3.76 on an H200; the earlier 2 made fusion
# prefer 7-qubit GEMM blocks to 4-qubit one-pass ones and QV-30 take 2.6 s instead of 1.5 s);
# scheme I 8 passes (an H200, N = 30: 7.5, 13.2, 23.9, 40.8 floors at d = 7, 8, 9, 10 with the
# fused wgmma products and the state read through the permutation; 20 with cuBLAS's INT32
# planes) and ~27 TFLOP/s at d >= 10; scheme II ~17 passes and
# ~60 TFLOP/s at d = 12 (kept: its GEMM path now takes 7-10 passes at d = 7..9, 72.6-105 ms on an
# H200 at N = 30, but with 7.5 the max(memory, flops) model fuses QV-30 into 37 9-qubit blocks
# and 19 smaller, modelled 4.1 s against 4.4 s; at the measured per-gate times that plan is about
# 5.0 s, where the 6-qubit plan took 4.23 s; `ozsim calibrate` measures each d). One-pass
# kernels (N = 30, benchmarks/gate_bench.py): native FP64 1.02 to 1.05 times one pass at d <= 3
# (CUDA cores), 1.15, 1.10, 1.45, 3.3 at d = 4..7 (tensor cores,
# m16n8k8 f64, Gauss's three products from d = 5, an H200; the real embedding took 1.65 at d = 6
# and m8n8k4 1.17, 1.55, 2.78 at d = 4..6; the GEMM path 3.4 at d = 6, 4.4 at 7); scheme I
# (int8-auto at T = 1, s = 8, statistics pass included; an H200) 2.3, 2.45, 3.4, 4.8 at d = 3..6
# (the tensor-core kernel, wgmma at 5, 6; group barriers, 2026-11-27); scheme II (int8-crt-auto
# at T = 0: 15 moduli for a Haar gate, no statistics pass; H100) 3.6 and 4.5 at d = 3 (B as
# byte digits), 4 (tensor
# cores); on an H200 5.2, 6.5, 7.0 at d = 3, 4, 5 (d = 5 scaled into the H100 column by 7.0 /
# 6.5), and at d = 6 (paired A fragments, one block an SM, 2026-11-27) 7.0-7.3 against 5.3-5.5
# at d = 5 (the GEMM path took 12.1-12.4, the gate padded to 7 qubits 9.2); with B's residues on
# the tensor cores (TC_SPLIT) 4.53, 5.62 at d = 4, 5 and, with 16 warps a block, 6.2-6.8 at 6
# (scaled by 4.9 / 5.6: 4.0, 5.7); with one 512-thread block an SM and its warp groups apart
# 3.86, 4.24, 5.22, 6.16 at d = 3..6 against 3.96, 4.54, 5.61, 6.77 in the same kind of run
# (the column scaled by those ratios: 3.6, 3.75, 4.55, 5.2; the H100 measured 2.65, 2.86, 3.62,
# 4.17 of its floor); with B's residues by residue_byte 3.82, 4.18, 5.05, 5.99 (the column: 3.55,
# 3.7, 4.4, 5.05), then d = 5 with paired A fragments 4.77 (4.15). Scheme I applies 1- and
# 2-qubit gates as 3-qubit ones (pad_gates: its CUDA-core kernels took 3.1 / 4.8 and 16.5 / 6.5
# there), so d = 1, 2 cost what d = 3 does; scheme II takes d <= 3 by exact integer products
# (crt_gate_exact.cu, up to 15 moduli): 1.58, 1.87, 2.92 on an H200 against 3.76 for the
# padded or 3-qubit tensor-core gate (the column scaled by those ratios: 1.5, 1.75, 2.75), and
# d = 3..6 by byte-slice products on the tensor cores (crt_gate_slices.cu, up to 15 moduli):
# 2.61, 2.49, 3.17, 5.07 on an H200 against 2.68, 4.08, 4.63, 5.87 for the kernels before, and
# since then 2.07, 2.28, 2.98, 5.04 (each of the kernel's A/B runs' ratios applied to the column
# in turn: 2.1, 2.0, 2.65, 4.3).
SCHEMES: tuple[Scheme, ...] = (
    Scheme(
        key="native",
        title="native complex128 GEMM: BLAS through NumPy on the CPU, cuBLAS ZGEMM on the GPU",
        names=(BackendName("zgemm", "zgemm", "native complex128 GEMM (the baseline)"),),
        devices=("cpu", "gpu"),
        costs={"cpu": CostModel(1.0e10, 3.5e10, 4.2, 2e-5, 8, 32e6, 4e10),
               "gpu": CostModel(3.35e12, 5.0e13, 3.8, 1e-5, 10, one_pass_qubits=7,
                                one_pass_passes=(1.02, 1.02, 1.05, 1.15, 1.10, 1.5, 3.2))},
        accuracy="FP64 rounding of the BLAS; no knobs",
        reference="BLAS / cuBLAS zgemm",
        run=native.run,
        prepare=native.prepare,
        one_pass_qubits={"gpu": 7},
        apply_one_pass=native.apply_one_pass,
        one_pass_check=native.one_pass_supported,
    ),
    Scheme(
        key="ozaki1",
        title="Ozaki scheme I over INT8 (ozIMMU): slices, exact INT8 products, FP64 sums",
        names=(
            BackendName("int8x{s}", "int8", "scheme I with s INT8 slices: 2s(s+1) INT8 GEMMs",
                        (MIN_SPLITS, MAX_SPLITS), "splits", check_count=9),
            BackendName("int8-auto", "int8-auto", "INT8-AUTO: fewest slices with mean mantissa "
                        "loss <= T bits (native ZGEMM if none <= 18)", auto=True),
        ),
        devices=("cpu", "gpu"),
        costs={"cpu": CostModel(1.0e10, 1.8e9, 120, 2e-4, 8, 32e6, 4e10),
               "gpu": CostModel(3.35e12, 2.7e13, 8, 1e-4, 12, one_pass_qubits=6,
                                one_pass_passes=(2.3, 2.3, 2.3, 2.45, 3.4, 4.8))},
        accuracy="s slices keep 7s bits; int8-auto: T = mean mantissa loss in bits (>= 0)",
        reference="Ootomo, Ozaki, Yokota, IJHPCA 2024 (ozIMMU), Alg. 3-4 and Sec. 4.4",
        run=ozaki1_backend.run,
        prepare=ozaki1_backend.prepare,
        one_pass_qubits={"gpu": 6},
        apply_one_pass=ozaki1_backend.apply_one_pass,
        pad_gates={1: 3, 2: 3},
    ),
    Scheme(
        key="ozaki2",
        title="Ozaki scheme II over INT8: CRT over INT8 moduli, Karatsuba complex products",
        names=(
            BackendName("int8-crt{N}", "int8-crt", "scheme II with N moduli: 3N INT8 GEMMs and a "
                        "CRT reconstruction", (MIN_MODULI, MAX_MODULI), "moduli", check_count=14),
            BackendName("int8-crt-auto", "int8-crt-auto", "fewest moduli whose error bound is "
                        "<= 2**T times FP64's (native ZGEMM if none <= 20)", auto=True),
        ),
        devices=("cpu", "gpu"),
        costs={"cpu": CostModel(1.0e10, 5.0e9, 390, 2e-4, 8, 32e6, 4e10),
               "gpu": CostModel(3.35e12, 6.0e13, 17, 1e-4, 12, one_pass_qubits=6,
                                one_pass_passes=(1.5, 1.75, 2.1, 2.0, 2.65, 4.3))},
        accuracy="N moduli keep gamma(N) bits per product; int8-crt-auto: T in bits (>= 0), "
                 "T = 0: norm-wise error bound no larger than FP64's",
        reference="Ozaki, Uchino, Imamura, arXiv:2504.08009 (2025); Uchino et al. (complex)",
        run=ozaki2_backend.run,
        prepare=ozaki2_backend.prepare,
        one_pass_qubits={"gpu": 6},
        apply_one_pass=ozaki2_backend.apply_one_pass,
        pad_gates=padded_qubits,
    ),
    # The FP16 and correctly rounded schemes' costs are estimates, not measurements: FP16 products
    # cost what scheme I's do on the CPU (the same FP64 BLAS on slice values, ~1.3x fewer slices:
    # b = 9-11 bits instead of 7 at small k); on the GPU each slice pair is its own FP16 Tensor
    # Core GEMM with an FP32 plane added into an FP64 group sum (~1/3 of scheme I's emulated
    # rate, ~30 passes). A correctly rounded GEMM computes all s_A s_B pairs (s ~ 12 for a
    # state's spread of exponents) and two carry passes over ~2 T b / 7 INT64 digit slots per
    # output part: ~600 passes on the CPU, ~200 on the GPU.
    Scheme(
        key="fp16",
        title="the Ozaki scheme over FP16 slices (DGEMM-TC): FP16 Tensor Core products with "
              "exact FP32 sums, FP64 accumulation",
        names=(
            BackendName("fp16x{s}", "fp16", "FP16 Ozaki scheme with s slices: s(s+1)/2 slice "
                        "products, 2s(s+1) FP16 GEMMs", (FP16_MIN_SPLITS, FP16_MAX_SPLITS),
                        "splits", check_count=8),
            BackendName("fp16-auto", "fp16-auto", "fewest FP16 slices whose largest mantissa "
                        "loss is <= T bits (native ZGEMM if none <= 24)", auto=True),
        ),
        devices=("cpu", "gpu"),
        costs={"cpu": CostModel(1.0e10, 2.3e9, 100, 2e-4, 8, 32e6, 4e10),
               "gpu": CostModel(3.35e12, 1.0e13, 30, 2e-4, 12)},
        accuracy="s slices keep s*b bits (b = min(11, floor((24 - log2 k) / 2))); fp16-auto: T = "
                 "largest mantissa loss in bits (>= 0), T = 0: every input scalar exact",
        reference="Mukunoki, Ozaki, Ogita, Imamura, ISC 2020 (DGEMM-TC), Alg. 1-3",
        run=fp16_backend.run,
        prepare=fp16_backend.prepare,
    ),
    Scheme(
        key="cr",
        title="correctly rounded GEMMs: slices until nothing is left, every slice product, "
              "an exact INT64 sum, one rounding",
        names=(
            BackendName("int8-cr", "int8-cr", "correctly rounded, INT8 slices: s_A s_B slice "
                        "products, exact sum, one rounding"),
            BackendName("fp16-cr", "fp16-cr", "correctly rounded, FP16 slices: s_A s_B slice "
                        "products, exact sum, one rounding"),
        ),
        devices=("cpu", "gpu"),
        costs={"cpu": CostModel(1.0e10, 4.0e8, 600, 5e-4, 8, 32e6, 4e10),
               "gpu": CostModel(3.35e12, 4.0e12, 200, 5e-4, 10)},
        accuracy="each real and imaginary part correctly rounded (to nearest, ties to even); "
                 "no knobs",
        reference="Mukunoki et al., ISC 2020 (Sec. 4); Boldo, Melquiond, IEEE TC 2008 "
                  "(rounding to odd)",
        run=exact.run,
        prepare=exact.prepare,
    ),
)


@dataclass(frozen=True)
class Backend:
    """A parsed backend name.

    Attributes:
        name: the canonical (lower-case) name, e.g. ``"int8x9"``.
        scheme: its :class:`Scheme`.
        pattern: the :class:`BackendName` it matched.
        count: slices or moduli for a fixed-count name, else ``None``.
    """

    name: str
    scheme: Scheme
    pattern: BackendName
    count: int | None

    @property
    def kind(self) -> str:
        return self.pattern.kind

    @property
    def auto(self) -> bool:
        return self.pattern.auto


def _schemes(precision: str) -> tuple[Scheme, ...]:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}; got {precision!r}")
    return SCHEMES if precision == "double" else SINGLE_SCHEMES


def help_text(precision: str = "double") -> str:
    """``"zgemm, int8x{s} with s = 3..18, ..."``: every name, for messages and the CLI help."""
    return ", ".join(p.display().replace(", ", " with ", 1) for s in _schemes(precision)
                     for p in s.names)


def parse(name: str, precision: str = "double") -> Backend:
    """Parse a backend name (case and surrounding blanks ignored).

    Args:
        name: a backend name of ``precision``'s list.
        precision: ``"double"`` (:data:`SCHEMES`, complex128 GEMMs) or ``"single"``
            (:data:`SINGLE_SCHEMES`, complex64).

    Raises:
        TypeError: ``name`` is not a string.
        ValueError: an unknown name (the message lists the precision's names), a count outside
            the pattern's range (the message gives the range), or an unknown precision.
    """
    if not isinstance(name, str):
        raise TypeError(f"backend must be a string, got {type(name).__name__}")
    text = name.strip().lower()
    for scheme in _schemes(precision):
        for pat in scheme.names:
            m = pat.regex.fullmatch(text)
            if not m:
                continue
            count = None
            if pat.counts is not None:
                count = int(m.group(1))
                lo, hi = pat.counts
                if not lo <= count <= hi:
                    raise ValueError(f"backend {name!r}: the number of {pat.count_name} must be "
                                     f"in {lo}..{hi}")
            return Backend(text, scheme, pat, count)
    where = "" if precision == "double" else " in single precision"
    raise ValueError(f"unknown backend {name!r}{where}; expected {help_text(precision)}")


def all_names(precision: str = "double") -> list[str]:
    """One name per pattern of ``precision``'s list, as ``ozsim check --backends all`` runs
    them (fixed-count patterns at their ``check_count``)."""
    out = []
    for scheme in _schemes(precision):
        for pat in scheme.names:
            out.append(pat.pattern if pat.counts is None else
                       re.sub(r"\{\w+\}", str(pat.check_count), pat.pattern))
    return out


def cost_model(device: str, backend: str, precision: str = "double") -> CostModel:
    """Fusion's :class:`~ozsim.gemm.cost.CostModel` for ``device`` (``"cpu"``/``"gpu"``) and a
    backend name of ``precision``'s list, its one-pass range cut to what this device's kernels
    take (:meth:`Scheme.one_pass`; ``zgemm``'s 7-qubit gates need FP64 ``m16n8k8``).

    Raises:
        ValueError: an unknown backend, or a scheme that does not run on ``device``.
    """
    b = parse(backend, precision)
    if device not in b.scheme.costs:
        raise ValueError(f"backend {backend!r} does not run on {device!r}")
    model = b.scheme.costs[device]
    top = model.one_pass_qubits
    while top > 0 and not b.scheme.one_pass(device, top):
        top -= 1  # this GPU's one-pass range (Scheme.one_pass_check): larger d priced as GEMMs
    return model if top == model.one_pass_qubits else replace(model, one_pass_qubits=top)


# -- single precision ---------------------------------------------------------------------------
def _single_run(a, b, backend, *, T, out, xp, check_finite, workspace_bytes):
    """The registry's entry point for the single-precision backends: complex64 ``a @ b`` by
    :func:`ozsim.gemm.single.run` (``workspace_bytes`` unused: the engine passes blocks of
    columns that fit it)."""
    from .single import run

    return run(getattr(a, "matrix", a), b, backend.name, T=T, out=out, xp=xp,
               check_finite=check_finite)


def _single_prepare(matrix, host=None):
    """A single-precision gate operand: the matrix rounded to complex64 (once per gate)."""
    return matrix.astype("complex64")


def _single_one_pass(psi, gate, positions, backend, T,  # pragma: no cover - GPU
                     check_finite=True):
    """``cgemm``'s one-pass gate on the GPU: the FP32 CUDA-core kernel of
    :mod:`ozsim.gemm.native_gate` on complex64 amplitudes."""
    from . import native_gate
    from .info import GemmInfo

    native_gate.apply_dense_cuda_cores(psi, getattr(gate, "matrix", gate), positions)
    return GemmInfo(backend.name, None)


def _words_one_pass(psi, gate, positions, backend, T,  # pragma: no cover - GPU
                    check_finite=True):
    """``tf32x3``/``tf32x4``/``fp16-le``'s one-pass gate on the GPU (d <= 5): the words on CUDA
    cores with sums rounded to nearest, :mod:`ozsim.gemm.single.onepass`."""
    from .info import GemmInfo
    from .single import onepass

    onepass.apply_words(psi, getattr(gate, "matrix", gate), positions, backend.name)
    return GemmInfo(backend.name, 2, 11)


#: The precisions a state vector can have, with its amplitudes' dtype (Qiskit Aer's words).
PRECISIONS = {"double": "complex128", "single": "complex64"}

# Cost models (passes count 32 bytes an amplitude, so a complex64 state's pass is half a
# complex128 one's: the bandwidths below are doubled). CPU: NumPy's complex64 matmul at about
# twice complex128's rate; the emulated ones split the state into 2-4 words first (about 8 of
# those passes a gate). GPU (H200, N = 30, benchmarks/RESULTS.md section 2): cuBLAS CGEMM about
# 50 TFLOP/s; the FP32 CUDA-core one-pass kernel takes 1.01-1.31x, 1.02-1.66x, 1.11-2.17x,
# 1.62-3.01x the complex64 floor at d = 1..4 (targets on high bits / on the lowest bits: the
# table takes a mix); TF32 and FP16 tensor-core products 2-3x CGEMM's rate (section 5), after
# about 6 passes of splitting and summing (a gate through that GEMM path measured 14-17x the
# complex64 floor for tf32x3, 23-27x for fp16-le, at d = 4, 6, N = 30). Their one-pass gates
# (d <= 5, the words on CUDA cores, 12 2**d FP32 fused multiply-adds an amplitude) measured
# tf32x3 1.8-2.4x, 2.1-2.9x, 2.7-3.6x, 4.1-6.2x, 7.8-8.1x and fp16-le 2.7-3.4x, 3.1-3.9x,
# 3.8-4.7x, 5.9-7.8x, 11.3-11.9x the floor at d = 1..5 (targets on high / on low bits). Fusion
# stops at 5 qubits for them (max_limit): beyond, a gate's products go through the tensor cores,
# whose truncated FP32 sums, one per gate at k = 2**d, bias every amplitude toward zero and add
# up over a circuit (3-6x cgemm's error on a fused brickwork), which these FP32-level backends
# must not trade for speed.
SINGLE_SCHEMES: tuple[Scheme, ...] = (
    Scheme(
        key="native-single",
        title="native complex64 GEMM: BLAS on the CPU, cuBLAS CGEMM on the GPU",
        names=(BackendName("cgemm", "cgemm", "native complex64 GEMM (the single-precision "
                           "baseline)"),),
        devices=("cpu", "gpu"),
        costs={"cpu": CostModel(2.0e10, 7.0e10, 4.2, 2e-5, 8, 32e6, 8e10),
               "gpu": CostModel(6.7e12, 5.0e13, 2, 1e-5, 10, one_pass_qubits=4,
                                one_pass_passes=(1.1, 1.3, 1.6, 2.3))},
        accuracy="FP32 rounding of the BLAS; no knobs",
        reference="BLAS / cuBLAS cgemm",
        run=_single_run,
        prepare=_single_prepare,
        one_pass_qubits={"gpu": 4},
        apply_one_pass=_single_one_pass,
    ),
    Scheme(
        key="tf32",
        title="two TF32 words a value, 3 or 4 TF32 tensor-core products, FP32 accumulation",
        names=(BackendName("tf32x{s}", "tf32", "hi*hi + hi*lo + lo*hi (s = 3), + lo*lo (s = 4)",
                           (3, 4), "products", check_count=3),),
        devices=("cpu", "gpu"),
        costs={"cpu": CostModel(2.0e10, 2.0e10, 12, 2e-5, 8, 32e6, 8e10),
               "gpu": CostModel(6.7e12, 1.0e14, 15, 3e-5, 5, one_pass_qubits=5,
                                one_pass_passes=(2.1, 2.5, 3.1, 5.1, 8.0))},
        accuracy="FP32-level: each value as two TF32 words (22 bits); s = 3 or 4 products",
        reference="Valero-Lara, Liu, Vetter, Jorquera, 'Mixed-Precision S/DGEMM Using the TF32 "
                  "and TF64 Frameworks' (multiword TF32)",
        run=_single_run,
        prepare=_single_prepare,
        one_pass_qubits={"gpu": 5},
        apply_one_pass=_words_one_pass,
    ),
    Scheme(
        key="le-gemm",
        title="LE-GEMM: an FP16 high word (rounded; the paper cuts bits) and a 2**10-scaled FP16 "
              "residual, 3 products, two FP32 accumulators, power-of-two row and column scaling",
        names=(BackendName("fp16-le", "fp16-le", "LE-GEMM: 3 FP16 tensor-core products, FP32 "
                           "accumulation"),),
        devices=("cpu", "gpu"),
        costs={"cpu": CostModel(2.0e10, 2.0e10, 12, 2e-5, 8, 32e6, 8e10),
               "gpu": CostModel(6.7e12, 1.5e14, 23, 3e-5, 5, one_pass_qubits=5,
                                one_pass_passes=(3.1, 3.5, 4.2, 6.8, 11.6))},
        accuracy="FP32-level: 22 bits a value in two FP16 words, scaled into FP16's range",
        reference="Zhang et al., 'LE-GEMM' (FP16 high word plus scaled residual)",
        run=_single_run,
        prepare=_single_prepare,
        one_pass_qubits={"gpu": 5},
        apply_one_pass=_words_one_pass,
    ),
    Scheme(
        key="ozaki1-single",
        title="INT8-AUTO for single precision: scheme I with the loss counted against 24 bits",
        names=(BackendName("int8-auto", "int8-auto", "INT8-AUTO with T counted against FP32's "
                           "24-bit significand", auto=True),),
        devices=("cpu", "gpu"),
        costs={"cpu": CostModel(2.0e10, 3.6e9, 120, 2e-4, 8, 32e6, 8e10),
               "gpu": CostModel(6.7e12, 5.0e13, 20, 1e-4, 12)},
        accuracy="T = mean mantissa loss in bits of FP32's 24 (>= 0)",
        reference="Ootomo, Ozaki, Yokota, IJHPCA 2024 (ozIMMU), Sec. 4.4",
        run=_single_run,
        prepare=_single_prepare,
    ),
)

"""Scheme II's entry in the backend registry: ``int8-crt{N}`` and ``int8-crt-auto``."""

from __future__ import annotations

from ..info import GemmInfo
from ..native import matmul
from .scheme import PreparedCRTOperand, choose_plan, crt_zgemm, fixed_plan

__all__ = ["apply_one_pass", "prepare", "run"]


def prepare(matrix, host=None) -> PreparedCRTOperand:
    """The gate operand, analysed once (norm exponents, the auto rule's statistics; residues
    cached)."""
    return PreparedCRTOperand(matrix)


def apply_one_pass(psi, gate, positions, backend, T,  # pragma: no cover - GPU
                   check_finite=True):
    """The GPU's one-pass scheme II gate, ``d <= 6`` (:mod:`ozsim.gemm.ozaki2.onepass`); native
    one-pass when ``int8-crt-auto`` finds no ``N <= 20`` (a fallback, as :func:`run`'s).

    Returns:
        The :class:`GemmInfo` :func:`run` would give for the same product.
    """
    from .. import native_gate
    from . import onepass

    prep = gate if isinstance(gate, PreparedCRTOperand) else PreparedCRTOperand(gate)
    if backend.count is not None:
        plan = fixed_plan(backend.count)
    else:
        plan = choose_plan(prep.bound_stats, prep.shape[1], T)  # the gate alone decides
    if plan is None:
        native_gate.apply_dense(psi, prep.matrix, positions)
        return GemmInfo(backend.name, None, fallback=True)
    onepass.apply(psi, prep, positions, plan, check_finite)
    return _info(backend, plan)


def run(a, b, backend, *, T, out, xp, check_finite, workspace_bytes):
    """``int8-crt{N}`` (``backend.count`` moduli) or ``int8-crt-auto`` (threshold ``T``).

    Args: as :func:`ozsim.gemm.zgemm`; ``backend`` is the parsed name. NaN/Inf are always
    detected while scaling.

    Returns:
        ``(C, GemmInfo)``; native ZGEMM (a fallback) when the auto choice finds no ``N <= 20``.
    """
    c, plan = crt_zgemm(a, b, backend.count, T=T, out=out, workspace_bytes=workspace_bytes)
    if plan is None:
        return matmul(getattr(a, "matrix", a), b, out, xp), GemmInfo(backend.name, None,
                                                                      fallback=True)
    return c, _info(backend, plan)


def _info(backend, plan) -> GemmInfo:
    return GemmInfo(backend.name, None, num_moduli=plan.num_moduli,
                    kept_bits=(plan.bits_a, plan.bits_b), bound_bits=plan.bound_bits)

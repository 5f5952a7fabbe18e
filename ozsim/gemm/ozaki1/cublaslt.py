"""INT8 -> INT32 "TN" GEMMs through cuBLASLt with the algorithm chosen by timing (private).

The tuner is shared by both schemes and lives in :mod:`ozsim.gemm._gpu` (section "cuBLASLt",
which says why and how candidates are timed: :func:`ozsim.gemm._gpu.cublaslt_gemm_tn`); this
module keeps its names for scheme I's callers. Set :data:`ozsim.gemm._gpu.CANDIDATES` and the
other tuning constants there.
"""

from __future__ import annotations

from .._gpu import CANDIDATES, FINALISTS, MIN_TUNED_OPS, TUNING_ROUNDS, choices, tuning_log
from .._gpu import cublaslt_gemm_tn as gemm_tn

__all__ = ["CANDIDATES", "FINALISTS", "MIN_TUNED_OPS", "TUNING_ROUNDS", "choices", "gemm_tn",
           "tuning_log"]

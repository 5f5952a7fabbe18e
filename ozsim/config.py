"""Environment switches: the one table of them, each parsed and validated in one place.

Every switch changes *how* a result is computed, never its bits (``OZSIM_DEVICE`` aside, which
picks the device that ``device="auto"`` means). ``ozsim info`` prints the table with the value in
force; the README has the same table. A value outside the allowed ones is an error that names
them (:class:`ConfigError`), never silently ignored.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from .errors import OzsimError

__all__ = ["SWITCHES", "ConfigError", "Switch", "get", "switch"]


class ConfigError(OzsimError, ValueError):
    """An environment switch holds a value it does not allow."""


@dataclass(frozen=True)
class Switch:
    """One environment switch.

    Attributes:
        name: the variable, ``OZSIM_...``.
        allowed: the values it takes (compared after stripping blanks, case-insensitively).
        default: the value when unset or empty.
        description: what each value does, one line.
    """

    name: str
    allowed: tuple[str, ...]
    default: str
    description: str


SWITCHES: tuple[Switch, ...] = (
    Switch("OZSIM_DEVICE", ("auto", "cpu"), "auto",
           "what device='auto' means: the GPU when CuPy sees one (auto) or always the CPU (cpu)"),
    Switch("OZSIM_CRT_FUSED", ("auto", "0", "1", "3", "4"), "auto",
           "scheme II INT8 products on the GPU: the fused wgmma kernel where measured faster "
           "(auto), cuBLAS + a reduction kernel (0), fused Karatsuba (1 = 3) or fused direct "
           "form (4) wherever possible; same bits"),
    Switch("OZSIM_GATHER", ("1", "0"), "1",
           "scheme I and II GPU kernels read the state through the gate's qubit permutation "
           "for gates of >= 6 qubits on the GEMM path (1) or after a transposing copy (0); same "
           "bits"),
    Switch("OZSIM_PERMUTE", ("1", "0"), "1",
           "a GPU state vector brings a gate's targets to the front by ozsim's permutation "
           "kernel, one read and one write (1), or by CuPy's strided copy (0); same bits"),
    Switch("OZSIM_INT8_WGMMA", ("1", "0"), "1",
           "scheme I one-pass gates of 5 and 6 qubits on Hopper multiply with wgmma (1) or "
           "mma.sync (0); same bits"),
    Switch("OZSIM_INT8_FUSED", ("1", "0"), "1",
           "scheme I GEMM-path products on Hopper: one wgmma kernel that accumulates in FP64 "
           "(1) or cuBLAS INT8 GEMMs writing INT32 planes and an accumulation kernel (0); "
           "same bits"),
    Switch("OZSIM_INT8_SPECULATE", ("1", "0"), "1",
           "int8-auto's GEMM path on Hopper analyses and splits B in one read with the last "
           "gate's number of slices, multiplying again where the rule then chooses another "
           "(1), or analyses B before splitting it (0); same bits"),
    Switch("OZSIM_CUBLASLT", ("1", "0"), "1",
           "long-K INT8 GEMMs may use a tuned cuBLASLt algorithm (1) or only cublasGemmEx in "
           "pieces (0); same bits"),
)
_BY_NAME = {s.name: s for s in SWITCHES}


def switch(name: str) -> Switch:
    """The :class:`Switch` called ``name``.

    Raises:
        KeyError: no such switch.
    """
    return _BY_NAME[name]


@functools.lru_cache(maxsize=64)
def _parse(name: str, raw: str | None) -> str:
    sw = _BY_NAME[name]
    value = (raw or "").strip().lower() or sw.default
    if value not in sw.allowed:
        raise ConfigError(
            f"{name}={raw!r} is not allowed; use one of {', '.join(sw.allowed)} "
            f"(unset: {sw.default})"
        )
    return value


def get(name: str) -> str:
    """The value of switch ``name`` in force (the environment's, else its default).

    Raises:
        KeyError: no such switch.
        ConfigError: the environment holds a value the switch does not allow.
    """
    return _parse(name, os.environ.get(name))

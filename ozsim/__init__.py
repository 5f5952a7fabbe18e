"""ozsim: a quantum state-vector simulator whose gates run through an emulated ZGEMM.

The emulation is the Ozaki scheme over INT8 (ozIMMU: Ootomo, Ozaki, Yokota, "DGEMM on Integer
Matrix Multiplication Unit", 2024): see :mod:`ozsim.gemm`. Importing ozsim loads neither CuPy nor
Qiskit; they load on first use.
"""

from .circuit import Circuit, Operation
from .simulator import GateCache, Result, Simulator
from .errors import (
    DeviceUnavailableError,
    GPUModuleError,
    InsufficientMemoryError,
    MissingDependencyError,
    NonFiniteError,
    NonUnitaryError,
    OzsimError,
    QasmError,
    UnsupportedOperationError,
)

__version__ = "0.1.0"

__all__ = [
    "GateCache",
    "Simulator",
    "Result",
    "Circuit",
    "Operation",
    "OzsimError",
    "QasmError",
    "UnsupportedOperationError",
    "NonUnitaryError",
    "NonFiniteError",
    "InsufficientMemoryError",
    "DeviceUnavailableError",
    "GPUModuleError",
    "MissingDependencyError",
    "__version__",
]

"""The time model of one gate application that fusion plans with; each scheme's entry in
:mod:`ozsim.gemm.registry` carries one per device.

A d-qubit gate on N qubits costs ``max(passes * 32 * 2**N / bandwidth, 8 * 2**(N+d) / gemm_rate)
+ overhead`` seconds: the memory traffic of its passes over the state against the flops of the
ZGEMM ``(2**d x 2**d) @ (2**d x 2**(N-d))``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CostModel"]


@dataclass(frozen=True)
class CostModel:
    """Time model of one d-qubit gate application (see the module docstring).

    Attributes:
        bandwidth: memory bandwidth in bytes/s (read + write counted).
        gemm_rate: ZGEMM rate in flop/s, counting ``8 m n k`` per complex product.
        passes: passes over the state per gate (a pass reads and writes 16 bytes an amplitude).
        overhead: fixed seconds per gate (Python, kernel launches).
        max_limit: largest block size considered.
        cache_bytes: states whose two buffers fit in this many bytes use ``cache_bandwidth``
            (a CPU's last-level cache; 0: no such cache level).
        cache_bandwidth: bytes/s for such states.
        one_pass_qubits: gates of up to this many qubits run through a one-pass kernel: one
            pass over the state and ``one_pass_rate`` flop/s (0: no such kernel).
        one_pass_rate: that kernel's arithmetic rate in flop/s (``8`` flops per complex
            multiply-add).
        one_pass_passes: ``(p_1, p_2, ...)``: a one-pass gate of d qubits takes ``p_d`` times
            one read and one write of the state (measured: ``benchmarks/gate_bench.py``);
            where given it replaces the rate model for that d (a kernel whose cost is neither
            pure bandwidth nor a flop rate: splitting, statistics, tensor-core products).
        measured: ``((d, seconds per amplitude), ...)`` from ``ozsim calibrate`` on this
            device; a gate of a measured ``d`` costs that times ``2**N`` plus ``overhead``,
            another ``d`` the nearest measured one's cost scaled by the model's ratio.
    """

    bandwidth: float
    gemm_rate: float
    passes: float
    overhead: float
    max_limit: int
    cache_bytes: float = 0.0
    cache_bandwidth: float = 0.0
    one_pass_qubits: int = 0
    one_pass_rate: float = 0.0
    one_pass_passes: tuple[float, ...] = ()
    measured: tuple[tuple[int, float], ...] = ()

    def gate_time(self, num_qubits: int, d: int) -> float:
        """Modelled seconds for one d-qubit gate on a ``num_qubits`` state."""
        if self.measured:
            dm, per_amplitude = min(self.measured, key=lambda row: (abs(row[0] - d), row[0]))
            scale = 1.0 if dm == d else (self._model_time(num_qubits, d)
                                         / self._model_time(num_qubits, dm))
            return per_amplitude * 2.0**num_qubits * scale + self.overhead
        return self._model_time(num_qubits, d) + self.overhead

    def _model_time(self, num_qubits: int, d: int) -> float:
        d = max(d, 1)  # a 0-qubit block (a global phase) costs a 1-qubit gate's pass
        cached = 32.0 * 2.0**num_qubits <= self.cache_bytes
        bandwidth = self.cache_bandwidth if cached else self.bandwidth
        one_pass = d <= self.one_pass_qubits
        if one_pass and d <= len(self.one_pass_passes):
            return self.one_pass_passes[d - 1] * 32.0 * 2.0**num_qubits / bandwidth
        passes, rate = (1.0, self.one_pass_rate) if one_pass else (self.passes, self.gemm_rate)
        mem = passes * 32.0 * 2.0**num_qubits / bandwidth
        flops = 8.0 * 2.0 ** (num_qubits + d) / rate
        return max(mem, flops)

"""The accuracy guard: a-priori error bounds hold against exact products and whole circuits."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from ozsim import QasmError, Simulator, UnsupportedOperationError
from ozsim.gates.haar import haar_unitary
from ozsim.gemm import bounds, zgemm
from ozsim.interop.qiskit import load_qasm
from ozsim.simulator import needs_trajectories
from ozsim.testing import exact_zgemm, ozaki_matrix

BACKENDS = ["zgemm", "int8x3", "int8x5", "int8x9", "int8-auto", "int8-crt2", "int8-crt3",
            "int8-crt4", "int8-crt8", "int8-crt14", "int8-crt-auto"]
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("k", [2, 16, 256])
@pytest.mark.parametrize("phi", [0.5, 4.0])
def test_gemm_bounds_hold_against_exact_products(k, phi):
    rng = np.random.default_rng(k + int(10 * phi))
    for a in (haar_unitary(k, rng), ozaki_matrix(rng, k, k, phi)):  # a gate, and any matrix
        b = ozaki_matrix(rng, k, 64, phi)
        exact = exact_zgemm(a, b)
        for backend in BACKENDS:
            c, info = zgemm(a, b, backend=backend, T=0, return_info=True)
            err = np.linalg.norm(c - exact) / np.linalg.norm(b)
            assert np.isfinite(err) and err <= info.error_bound, (backend, err, info.error_bound)


def test_bound_formulas_by_hand():
    # native: sqrt(2) gamma_6 ||A||_F for k = 2
    u = 2.0**-53
    assert bounds.native(2, 1.0) == pytest.approx(np.sqrt(2) * 6 * u / (1 - 6 * u))
    # scheme I, s = 3, b = 7: delta = (3 + 3.03) 2**-21 + 1.2 u; 2 sqrt(2) 2k delta S_A
    assert bounds.scheme1(2, 3, 7, 1.0) == pytest.approx(
        2 * np.sqrt(2) * 4 * ((3 + 3.03) * 2.0**-21 + 1.2 * u))
    # scheme II rounding, gA = gB = 10, k = 2: K = 0.5 * 2 * 2**-9 + 4 * 0.25 * 2**-20 + 2**-51
    K = 0.5 * 2 * 2 * 2.0**-10 + 4 * 0.25 * 2.0**-20 + 2.0**-51
    assert bounds.scheme2(2, 10, 10, True, 1.0) == pytest.approx(np.sqrt(2) * K * 2.25**2)
    # S_A: rows whose largest parts are 0.75 (e = 0) and 3 (e = 2): sqrt(1 + 16)
    assert bounds.row_scale(np.array([[0.75, 0.5j], [1, 3j]])) == pytest.approx(17**0.5)


def _small_circuits():
    files = sorted((ROOT / "circuits").glob("*.qasm"))
    files += sorted((ROOT / "tests" / "data" / "qasmbench").glob("*.qasm"))
    for f in files:
        try:
            c = load_qasm(str(f))
        except (QasmError, UnsupportedOperationError):  # (a few QASMBench files are not valid)
            continue
        if c.num_qubits <= 12 and not needs_trajectories(c):
            yield f.name, c


def test_circuit_bounds_cover_the_measured_error_and_defaults_do_not_warn():
    checked = 0
    for name, circuit in _small_circuits():
        ref = Simulator(backend="zgemm", device="cpu").run(circuit).statevector
        for backend, T, warns in [("int8-auto", 1, False), ("int8-crt-auto", 0, False),
                                  ("int8x3", 1, True), ("int8-crt2", 1, True)]:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                res = Simulator(backend=backend, T=T, device="cpu").run(circuit)
            guard = [w for w in caught if "a-priori bound" in str(w.message)]
            err = np.linalg.norm(res.statevector - ref) / np.linalg.norm(ref)
            bound = res.metadata["error_bound"]
            assert err <= bound, (name, backend, err, bound)
            if res.metadata["num_gates"]:  # (a circuit without gates has nothing to warn of)
                assert len(guard) == int(warns), (name, backend, bound)
        checked += 1
    assert checked >= 20


def test_max_error_bound_is_an_option_and_checked():
    c = load_qasm(str(ROOT / "circuits" / "ghz_n20.qasm"))
    with pytest.warns(RuntimeWarning, match="a-priori bound"):
        Simulator(backend="int8-auto", device="cpu", max_error_bound=1e-30).run(c)
    with pytest.raises(ValueError, match="max_error_bound must be a positive number"):
        Simulator(max_error_bound=0)
    with pytest.raises(TypeError, match="max_error_bound must be a positive number"):
        Simulator(max_error_bound="1e-8")

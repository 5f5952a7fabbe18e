"""Long runs: outputs checked before work and written atomically, shots in memory independent of
their number, clean stops on SIGINT / SIGTERM, and values checked where they enter."""

from __future__ import annotations

import errno
import json
import math
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import ozsim.simulator as simulator_module
from ozsim import Circuit, Simulator
from ozsim.cli import main
from ozsim.errors import NonFiniteError, OutputError, QasmError, RunInterrupted
from ozsim.interop.qiskit import from_qiskit, loads_qasm
from ozsim.output import check_output_path, write_atomic

ROOT = Path(__file__).resolve().parents[1]
GHZ = ROOT / "circuits" / "ghz_n20.qasm"
HEADER = 'OPENQASM 2.0;\ninclude "qelib1.inc";\n'
RESET = HEADER + ("qreg q[2];\ncreg c[2];\nx q[0];\nmeasure q[0] -> c[0];\nreset q[0];\n"
                  "measure q[0] -> c[1];\n")


def _no_run(monkeypatch):
    """Make any simulation fail the test: errors must come before the work."""
    def refuse(*args, **kwargs):
        raise AssertionError("the simulation started")

    monkeypatch.setattr(Simulator, "run", refuse)


def _random_state_circuit(n: int, seed: int) -> Circuit:
    rng = np.random.default_rng(seed)
    c = Circuit(n)
    for q in range(n):
        a, b = rng.normal(size=2)
        u = np.array([[np.cos(a), -np.sin(a) * np.exp(1j * b)],
                      [np.sin(a), np.cos(a) * np.exp(1j * b)]])
        c.unitary(u, [q])
    return c


# -- 1. outputs -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, message",
    [
        ("r.txt", r"--output must end in \.json or \.npy, got '.*r\.txt'"),
        ("missing/r.json", r"the directory '.*missing' does not exist"),
        ("afile/r.json", r"'.*afile' is not a directory"),
        ("adir.json", r"--output '.*adir\.json' is a directory"),
    ],
)
def test_bad_output_paths(tmp_path, name, message):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir.json").mkdir()
    with pytest.raises(OutputError, match=message):
        check_output_path(tmp_path / name)


def test_unwritable_output_directory(tmp_path, monkeypatch):
    monkeypatch.setattr("ozsim.output.os.access", lambda path, mode: False)
    with pytest.raises(OutputError, match=r"the directory '.*' is not writable"):
        check_output_path(tmp_path / "r.json")


@pytest.mark.parametrize("output", ["/nonexistent/dir/r.json", "r.csv"])
def test_cli_bad_output_exits_2_before_any_work(output, monkeypatch, capsys):
    _no_run(monkeypatch)
    monkeypatch.setattr("ozsim.interop.qiskit.load_qasm",
                        lambda path: pytest.fail("the circuit was read"))
    assert main(["run", str(GHZ), "--output", output]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ozsim: error: --output") and err.count("\n") == 1


def test_cli_npy_for_a_trajectory_circuit_exits_2_before_the_run(tmp_path, monkeypatch, capsys):
    f = tmp_path / "reset.qasm"
    f.write_text(RESET)
    _no_run(monkeypatch)
    assert main(["run", str(f), "--output", str(tmp_path / "psi.npy")]) == 2
    assert "--output .npy needs a final state" in capsys.readouterr().err
    assert not (tmp_path / "psi.npy").exists()


def test_write_atomic_replaces_and_keeps_the_mode(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("old")
    write_atomic(target, lambda f: f.write(b"new"))
    assert target.read_text() == "new" and list(tmp_path.iterdir()) == [target]
    assert target.stat().st_mode & 0o600 == 0o600


@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, "No space left on device"),
                                     KeyboardInterrupt()])
def test_write_atomic_failure_leaves_the_old_file(tmp_path, failure):
    target = tmp_path / "r.json"
    target.write_text("old")

    def write(f):
        f.write(b"half a res")
        raise failure

    if isinstance(failure, OSError):
        with pytest.raises(OutputError, match=r"cannot write '.*r\.json': No space left on "
                           "device; nothing was written"):
            write_atomic(target, write)
    else:
        with pytest.raises(KeyboardInterrupt):
            write_atomic(target, write)
    assert target.read_text() == "old" and list(tmp_path.iterdir()) == [target]


@pytest.mark.parametrize("suffix", [".json", ".npy"])
def test_cli_disk_full_is_a_clean_error_with_no_file(tmp_path, suffix, monkeypatch, capsys):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("ozsim.output.os.fsync", full)
    out = tmp_path / f"r{suffix}"
    assert main(["run", str(GHZ), "--shots", "10", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"ozsim: error: cannot write '{out}': No space left on device; nothing "
                          "was written")
    assert list(tmp_path.iterdir()) == []


# -- 2. shots -------------------------------------------------------------------------------------
def test_shots_zero_is_the_final_state_only():
    res = Simulator(device="cpu", seed=1).run(GHZ, shots=0)
    assert res.counts is None and res.statevector.shape == (2**20,)
    assert Simulator(device="cpu", seed=1).run(GHZ).counts is None


def test_shots_zero_on_a_trajectory_circuit_needs_shots(tmp_path, monkeypatch, capsys):
    circ = loads_qasm(RESET)
    with pytest.raises(ValueError, match=r"shots=0 means the final state only, .* needs "
                       r"shots >= 1"):
        Simulator(device="cpu").run(circ, shots=0)
    assert sum(Simulator(device="cpu", seed=2).run(circ).counts.values()) == 1024  # default
    f = tmp_path / "reset.qasm"
    f.write_text(RESET)
    monkeypatch.setattr("ozsim.simulator._Run.apply", lambda *a: pytest.fail("a gate ran"))
    assert main(["run", str(f), "--shots", "0"]) == 2
    err = capsys.readouterr().err
    assert "needs shots >= 1" in err and err.count("\n") == 1


def test_huge_shot_counts_sample_in_constant_memory():
    res = Simulator(device="cpu", seed=3).run(GHZ, shots=10**12)
    zeros, ones = res.counts["0" * 20], res.counts["1" * 20]
    assert zeros + ones == 10**12 and abs(zeros - 5 * 10**11) < 5 * math.sqrt(2.5e11)
    traj = Simulator(device="cpu", seed=3).run(loads_qasm(RESET), shots=10**9)
    assert traj.counts == {"01": 10**9}


def test_sampling_is_reproducible_and_statistically_right(monkeypatch):
    res = Simulator(device="cpu", seed=11).run(_random_state_circuit(8, 5))
    p = res.probabilities()
    shots = 200_000
    a, b = res.sample_counts(shots), res.sample_counts(shots)
    assert a == b and res.sample_counts(shots, seed=12) != a
    monkeypatch.setattr(simulator_module, "_SAMPLE_CHUNK", 16)  # the chunked draw
    chunked = res.sample_counts(shots)
    assert chunked == res.sample_counts(shots)
    for counts in (a, chunked):
        assert sum(counts.values()) == shots and all(len(k) == 8 for k in counts)
        observed = np.array([counts.get(format(i, "08b"), 0) for i in range(256)])
        sigma = np.sqrt(shots * p * (1 - p)) + 1
        assert np.all(np.abs(observed - shots * p) < 6 * sigma)


def test_wide_classical_registers_keep_their_keys():
    circ = loads_qasm(HEADER + "qreg q[2];\ncreg c[70];\nx q[1];\nmeasure q[1] -> c[65];\n"
                      "measure q[0] -> c[3];\n")
    counts = Simulator(device="cpu", seed=0).run(circ, shots=5).counts
    key = ["0"] * 70
    key[69 - 65] = "1"
    assert counts == {"".join(key): 5}


# -- 3. stops -------------------------------------------------------------------------------------
def _stop_after(calls: int):
    seen = [0]

    def progress(done, total):
        seen[0] += 1
        if seen[0] == calls:
            raise KeyboardInterrupt

    return progress


def _branching_circuit(n: int, rounds: int) -> str:
    lines = [HEADER.rstrip("\n"), f"qreg q[{n}];", f"creg c[{n}];"]
    for r in range(rounds):
        lines += [f"h q[{i}];" for i in range(n)]
        lines += [f"cx q[{i}], q[{i + 1}];" for i in range(n - 1)]
        lines += [f"rz(0.{r + 1}) q[{i}];" for i in range(n)]
        lines.append(f"measure q[{r % n}] -> c[{r % n}];")
    lines += [f"measure q[{i}] -> c[{i}];" for i in range(n)]
    return "\n".join(lines) + "\n"


def test_interrupted_trajectory_run_keeps_the_completed_shots():
    circ = loads_qasm(_branching_circuit(4, 6))
    sim = Simulator(backend="zgemm", device="cpu", seed=4, max_fused_qubits=0)
    with pytest.raises(RunInterrupted, match=r"stopped after \d+ of 500 shots") as info:
        sim.run(circ, shots=500, progress=_stop_after(400))
    part = info.value.partial
    done = part.metadata["shots_completed"]
    assert part.metadata["partial"] is True and 0 < done < 500
    assert sum(part.counts.values()) == done and all(len(k) == 4 for k in part.counts)


def test_interrupted_final_state_run_has_no_partial_result():
    with pytest.raises(RunInterrupted, match="stopped before the final state was complete") as info:
        Simulator(device="cpu").run(GHZ, shots=10, progress=_stop_after(2))
    assert info.value.partial is None


def test_cli_stopped_final_state_run_writes_nothing(tmp_path, monkeypatch, capsys):
    def stop(self, circuit, shots=None, progress=None, memory=False):
        raise RunInterrupted("stopped before the final state was complete")

    monkeypatch.setattr(Simulator, "run", stop)
    out = tmp_path / "r.json"
    assert main(["run", str(GHZ), "--output", str(out)]) == 130
    err = capsys.readouterr().err
    assert err == ("ozsim: SIGINT: stopped before the final state was complete; nothing "
                   "written\n")
    assert not out.exists()


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_a_trajectory_run_and_writes_partial_counts(tmp_path, sig, code):
    exe = shutil.which("ozsim", path=str(Path(sys.executable).parent))
    assert exe, "the ozsim console script is not installed next to this Python"
    qasm, out = tmp_path / "slow.qasm", tmp_path / "r.json"
    qasm.write_text(_branching_circuit(14, 20))  # int8-auto: about a second a shot, minutes
    proc = subprocess.Popen([exe, "run", str(qasm), "--shots", "300", "--seed", "1", "--device",
                             "cpu", "--backend", "int8-auto", "--output", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(6)  # start-up (imports) takes about 2 s
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    name = signal.Signals(sig).name
    assert err.count("\n") == 1 and err.startswith(f"ozsim: {name}: stopped after ")
    assert '"partial": true' in err and "Traceback" not in err
    doc = json.loads(out.read_text())
    assert doc["partial"] is True and 0 <= doc["shots_completed"] < 300
    assert sum(doc["counts"].values()) == doc["shots_completed"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# -- 4. values checked where they enter -----------------------------------------------------------
@pytest.mark.parametrize(
    "body, line, gate, value",
    [
        ("qreg q[2];\nh q[1];\nrx(1e400) q[0];\n", 5, "rx", "inf"),
        ("qreg q[2];\n// rx(1e400) q[0];\nh q[1];\nu3(1, 2, 1e300*1e300) q[0];\n", 6, "u3", "inf"),
        ("qreg q[2];\nh q[1];\nrz(1e400-1e400) q;\n", 5, "rz", "nan"),
        ("qreg q[2];\nU(-1e400, 0, 0) q[0];\n", 4, "u", "-inf"),
    ],
)
def test_nonfinite_qasm_parameter_names_file_line_and_gate(tmp_path, body, line, gate, value,
                                                           capsys):
    f = tmp_path / "bad.qasm"
    f.write_text(HEADER + body)
    message = f"gate '{gate}' has a parameter that is not a finite number ({value})"
    with pytest.raises(QasmError, match=re.escape(f"bad.qasm:{line}: {message}")):
        Simulator(device="cpu").run(f)
    assert main(["run", str(f)]) == 2
    assert capsys.readouterr().err == f"ozsim: error: {f}:{line}: {message}\n"


def test_nonfinite_qasm3_parameter():
    text = 'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[2] q;\nh q[1];\nrx(1e400) q[0];\n'
    with pytest.raises(QasmError, match=r"<string>:5: gate 'rx' has a parameter that is not a "
                       r"finite number \(inf\)"):
        loads_qasm(text)


def test_nonfinite_qiskit_parameter_names_the_instruction():
    from qiskit import QuantumCircuit

    qc = QuantumCircuit(1)
    qc.h(0)
    qc.ry(float("nan"), 0)
    with pytest.raises(NonFiniteError, match=r"instruction 1 \(ry\) has a parameter that is not "
                       r"a finite number \(nan\)"):
        from_qiskit(qc)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"T": None}, TypeError, r"T must be a real number of bits >= 0, got NoneType None"),
        ({"T": "x"}, TypeError, r"T must be a real number of bits >= 0, got str 'x'"),
        ({"T": -1}, ValueError, r"T must be >= 0 bits and finite, got -1"),
        ({"T": float("inf")}, ValueError, r"T must be >= 0 bits and finite, got inf"),
        ({"T": float("nan")}, ValueError, r"T must be >= 0 bits and finite, got nan"),
        ({"seed": 1.5}, TypeError, r"seed must be an integer >= 0 or None, got float 1\.5"),
        ({"seed": True}, TypeError, r"seed must be an integer >= 0 or None, got bool True"),
        ({"seed": -1}, ValueError, r"seed must be an integer >= 0 or None, got -1"),
        ({"max_fused_qubits": 2.0}, TypeError,
         r"max_fused_qubits must be None or an integer >= 0, got float 2\.0"),
        ({"max_fused_qubits": -2}, ValueError,
         r"max_fused_qubits must be None or an integer >= 0, got -2"),
        ({"backend": None}, TypeError, r"backend must be a string such as 'int8-auto'"),
        ({"backend": "int8x99"}, ValueError, r"backend 'int8x99': the number of .* must be in"),
        ({"backend": "fp8"}, ValueError, r"unknown backend 'fp8'"),
        ({"device": "tpu"}, ValueError, r"device must be one of auto, cpu, gpu; got 'tpu'"),
        ({"device": None}, ValueError, r"device must be one of auto, cpu, gpu; got None"),
        ({"one_pass": 0}, TypeError, r"one_pass must be True or False, got 0"),
        ({"one_pass": False}, ValueError, r"one_pass=False .* needs a named backend"),
        ({"one_pass": False, "backend": "auto"}, ValueError, r"not backend='auto' or comm"),
    ],
)
def test_simulator_arguments_are_checked_at_construction(kwargs, error, message):
    with pytest.raises(error, match=message):
        Simulator(**kwargs)


def test_valid_simulator_arguments_are_accepted():
    Simulator(T=0, seed=np.int64(3), max_fused_qubits=np.int32(2), backend=" INT8X9 ")


@pytest.mark.parametrize(
    "shots, error, message",
    [
        (1.5, TypeError, r"shots must be an integer >= 0 or None, got float 1\.5"),
        ("10", TypeError, r"shots must be an integer >= 0 or None, got str '10'"),
        (True, TypeError, r"shots must be an integer >= 0 or None, got bool True"),
        (-1, ValueError, r"shots must be an integer >= 0 or None, got -1"),
    ],
)
def test_run_shots_are_checked(shots, error, message, monkeypatch):
    monkeypatch.setattr("ozsim.simulator._as_circuit", lambda c: pytest.fail("circuit read"))
    with pytest.raises(error, match=message):
        Simulator(device="cpu").run(GHZ, shots=shots)


def test_sample_counts_shots_are_checked():
    res = Simulator(device="cpu").run(Circuit(1))
    with pytest.raises(ValueError, match=r"shots must be >= 1, got 0"):
        res.sample_counts(0)
    with pytest.raises(TypeError, match=r"shots must be an integer >= 0 or None, got float"):
        res.sample_counts(2.5)


class _FakeOutOfMemory(MemoryError):
    """CuPy's OutOfMemoryError as its pool raises it (size, bytes in use, limit)."""

    def __init__(self, size, total, limit=0):
        super().__init__(f"Out of memory allocating {size:,} bytes (allocated so far: {total:,} "
                         "bytes).")
        self._size, self._total, self._limit = size, total, limit


def test_gpu_out_of_memory_becomes_insufficient_memory_naming_the_bytes():
    from types import SimpleNamespace

    from ozsim import InsufficientMemoryError
    from ozsim.simulator import _out_of_memory

    freed = []
    pool = SimpleNamespace(free_all_blocks=lambda: freed.append(True), free_bytes=lambda: 0)
    fake_cupy = SimpleNamespace(
        get_default_memory_pool=lambda: pool,
        cuda=SimpleNamespace(Device=lambda: SimpleNamespace(mem_info=(3 << 30, 80 << 30))))
    for exc in (_FakeOutOfMemory(1 << 30, 5 << 30, 6 << 30),
                MemoryError("Out of memory allocating 1,073,741,824 bytes (allocated so far: "
                            "5,368,709,120 bytes).")):
        err = _out_of_memory(exc, fake_cupy)
        assert isinstance(err, InsufficientMemoryError)
        assert err.needed_bytes == 6 << 30 and err.available_bytes == 3 << 30
        assert "allocating 1073741824 bytes failed with 5368709120 bytes in use" in str(err)
        assert "6.00 GiB needed, 3.00 GiB free" in str(err)
    assert "limit 6442450944 bytes" in str(_out_of_memory(_FakeOutOfMemory(1, 2, 6 << 30),
                                                          fake_cupy))
    assert len(freed) == 3
    plain = MemoryError("host")
    assert _out_of_memory(plain, np) is plain  # the CPU's own MemoryError is not rewritten


@pytest.mark.gpu
def test_gpu_runs_out_of_memory_mid_run_cleanly_and_the_simulator_goes_on():
    """CuPy's memory-pool limit lets the state's two buffers fit but not the GEMM path's
    workspace of an 8-qubit gate: a clean InsufficientMemoryError, then the same Simulator runs
    the circuit once the limit is lifted."""
    from conftest import cupy_or_skip

    from ozsim import InsufficientMemoryError, Simulator, gates

    cp = cupy_or_skip()
    circuit = gates.brickwork(20, depth=2, gate_qubits=8, seed=1)
    sim = Simulator(backend="int8-auto", device="gpu", max_fused_qubits=0)
    keep = cp.arange(1000)  # a caller's array that must stay usable
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    pool.set_limit(size=pool.used_bytes() + 40 * 2**20)  # two 16 MiB buffers and a little
    try:
        with pytest.raises(InsufficientMemoryError, match="bytes failed") as info:
            sim.run(circuit)
        assert info.value.needed_bytes > 40 * 2**20
    finally:
        pool.set_limit(size=0)
    assert int(keep.sum()) == 499500
    result = sim.run(circuit)
    assert np.isfinite(result.statevector).all()
    assert abs(np.linalg.norm(result.statevector) - 1) < 1e-12


# -- per-shot records (memory=True, --memory) ------------------------------------------------------
def test_memory_records_one_key_per_shot_reproducibly():
    from collections import Counter

    ghz = loads_qasm(HEADER + "qreg q[3];\ncreg c[3];\nh q[0];\ncx q[0], q[1];\ncx q[1], q[2];\n"
                     "measure q -> c;\n")
    runs = [Simulator(backend="zgemm", device="cpu", seed=5).run(ghz, shots=2000, memory=True)
            for _ in range(2)]
    res = runs[0]
    assert len(res.memory) == 2000 and Counter(res.memory) == Counter(res.counts)
    assert set(res.memory) == {"000", "111"} and runs[1].memory == res.memory
    first = res.memory[:1000]
    assert 400 < first.count("111") < 600  # shuffled: not all of one outcome first
    assert Simulator(device="cpu", seed=5).run(ghz, shots=10).memory is None  # only when asked
    traj = Simulator(backend="zgemm", device="cpu", seed=6).run(loads_qasm(RESET), shots=300,
                                                                 memory=True)
    assert len(traj.memory) == 300 and Counter(traj.memory) == Counter(traj.counts)


def test_memory_needs_shots_and_a_bool():
    with pytest.raises(ValueError, match="pass shots >= 1"):
        Simulator(device="cpu").run(GHZ, memory=True)
    with pytest.raises(ValueError, match="pass shots >= 1"):
        Simulator(device="cpu").run(GHZ, shots=0, memory=True)
    with pytest.raises(TypeError, match="memory must be True or False"):
        Simulator(device="cpu").run(GHZ, shots=5, memory="yes")


def test_memory_records_that_do_not_fit_fail_before_the_run(monkeypatch):
    from ozsim import InsufficientMemoryError

    monkeypatch.setattr(simulator_module, "available_memory_bytes", lambda xp: 10**6)
    monkeypatch.setattr(simulator_module, "StateVector",
                        lambda *a, **k: pytest.fail("the state was allocated"))
    with pytest.raises(InsufficientMemoryError, match=r"keeps 100000 per-shot records") as info:
        Simulator(device="cpu").run(GHZ, shots=100_000, memory=True)
    assert info.value.needed_bytes == 100_000 * (57 + 20)


def test_cli_memory_prints_and_writes_the_records(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["run", str(GHZ), "--device", "cpu", "--shots", "50", "--seed", "2",
                 "--memory", "--top", "3", "--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert re.search(r"memory \(first 3 of 50 shots\): [01]{20} [01]{20} [01]{20}\n", text)
    doc = json.loads(out.read_text())
    assert len(doc["memory"]) == 50 and set(doc["memory"]) <= set(doc["counts"])
    assert main(["run", str(GHZ), "--device", "cpu", "--memory"]) == 2  # no shots to record
    assert "pass shots >= 1" in capsys.readouterr().err


# -- a state whose two buffers do not fit: blocks that run in place -----------------------------
def test_in_place_limit_is_the_one_pass_range():
    from ozsim.auto import plan
    from ozsim.simulator import in_place_limit

    assert [in_place_limit(b, "gpu", 30) for b in ("zgemm", "int8-auto", "int8-crt-auto",
                                                    "int8x9", "int8-crt14")] == [6, 6, 6, 6, 6]
    assert in_place_limit("zgemm", "cpu", 30) == 0  # no one-pass kernels on the CPU
    assert in_place_limit("zgemm", "gpu", 3) == 2  # a block of all N qubits is a plain GEMM
    auto = plan("gpu", tag="no-table-with-this-tag")  # the registry's defaults
    d = in_place_limit(auto, "gpu", 30)
    assert d >= 4 and all(
        simulator_module.parse_backend_spec(auto.choose(30, e)[0]).scheme.one_pass("gpu", e)
        for e in range(1, d + 1))


@pytest.mark.gpu
def test_gpu_fusion_stays_in_place_when_two_buffers_do_not_fit(monkeypatch):
    """With memory for one state buffer only, automatic fusion caps its blocks at the backend's
    one-pass range (``in_place_limit``, here made 3 so that fusion would choose bigger blocks:
    the range itself is the test above): the run holds one buffer and equals the run fused at
    that limit."""
    from conftest import cupy_or_skip

    cupy_or_skip()
    from ozsim.gates import brickwork
    from ozsim.statevector import state_bytes

    circ = brickwork(16, 8, gate_qubits=2, seed=5)
    free = Simulator(backend="int8-crt-auto", T=0, device="gpu").run(circ)
    assert max(free.metadata["fusion"]["block_sizes"]) > 3  # the test needs bigger blocks
    monkeypatch.setattr(simulator_module, "in_place_limit", lambda *args, **kw: 3)
    monkeypatch.setattr(simulator_module, "available_memory_bytes",
                        lambda xp: int(1.5 * state_bytes(16)))
    res = Simulator(backend="int8-crt-auto", T=0, device="gpu").run(circ)
    md = res.metadata
    assert max(md["fusion"]["block_sizes"]) <= 3 and "do not fit" in md["fusion"]["chosen_by"]
    assert md["peak_memory_bytes"] == state_bytes(16)
    ref = Simulator(backend="int8-crt-auto", T=0, device="gpu", max_fused_qubits=3).run(circ)
    np.testing.assert_array_equal(res.statevector, ref.statevector)

"""Peak resident memory and time of ``ozsim run CIRCUIT --shots N`` against N.

Each run is its own subprocess (the ``ozsim`` console script next to this Python); its peak
resident set size comes from ``os.wait4`` (``ru_maxrss`` of that child alone). Sampling draws the
counts from the probability vector in one multinomial draw, so the peak should not grow with N.

    .venv/bin/python benchmarks/shots_memory.py                      # ghz_n20, N = 1e3, 1e6, 1e9
    .venv/bin/python benchmarks/shots_memory.py --shots 1000,1e12 --circuit circuits/qft_n16.qasm

Prints a table and writes ``benchmarks/results/shots_memory-cpu-<yyyy-mm-dd>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import result_path, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def measure(exe: str, circuit: Path, shots: int, device: str) -> dict:
    """One ``ozsim run``: peak RSS (bytes), wall seconds, exit status and the counts' summary."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        argv = [exe, "run", str(circuit), "--shots", str(shots), "--seed", "1", "--device",
                device, "--top", "2", "--output", str(out)]
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode(errors="replace").strip()
        proc.stderr.close()
        row = {"shots": shots, "exit_status": proc.returncode, "wall_s": round(wall, 3),
               "peak_rss_bytes": usage.ru_maxrss * 1024}  # Linux reports KiB
        if proc.returncode == 0:
            doc = json.loads(out.read_text())
            row["outcomes"] = len(doc["counts"])
            row["counted"] = sum(doc["counts"].values())
            row["simulate_s"] = round(doc["metadata"]["wall_time_s"], 3)
        else:
            row["error"] = err.splitlines()[-1] if err else ""
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--circuit", default=str(ROOT / "circuits" / "ghz_n20.qasm"))
    p.add_argument("--shots", default="1e3,1e6,1e9",
                   help="comma list of shot counts (1e9 style allowed; default 1e3,1e6,1e9)")
    p.add_argument("--device", default="cpu", choices=("cpu", "gpu", "auto"))
    p.add_argument("--json", default=None, help="where to write the results (default: "
                   "benchmarks/results/shots_memory-cpu-<date>.json)")
    args = p.parse_args(argv)
    exe = shutil.which("ozsim", path=str(Path(sys.executable).parent)) or shutil.which("ozsim")
    if exe is None:
        p.error("the ozsim console script is not installed (pip install -e .)")
    shots = [int(float(s)) for s in args.shots.split(",")]
    rows = [measure(exe, Path(args.circuit), n, args.device) for n in shots]
    print(f"`ozsim run {Path(args.circuit).name} --shots N --device {args.device}`, "
          f"one subprocess each\n")
    print("| shots | exit | peak RSS (MiB) | wall (s) | simulate + sample (s) | outcomes |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['shots']:.0e} | {r['exit_status']} | {r['peak_rss_bytes'] / 2**20:.0f} | "
              f"{r['wall_s']:.2f} | {r.get('simulate_s', float('nan')):.2f} | "
              f"{r.get('outcomes', '-')} |")
    peaks = [r["peak_rss_bytes"] for r in rows]
    spread = (max(peaks) - min(peaks)) / 2**20
    print(f"\npeak RSS spread over N: {spread:.0f} MiB")
    doc = {"benchmark": "shots_memory", "circuit": Path(args.circuit).name,
           "device": args.device, "python": platform.python_version(),
           "machine": platform.machine(), "cpus": os.cpu_count(), "rows": rows,
           "peak_rss_spread_bytes": max(peaks) - min(peaks)}
    path = write_json(args.json or result_path("shots_memory", "cpu"), doc)
    print(f"wrote {path}")
    return 0 if all(r["exit_status"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

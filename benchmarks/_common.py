"""Shared helpers of the benchmarks: where results go, which device ran them, GPU timing.

Every benchmark writes ``benchmarks/results/<benchmark>-<device>-<yyyy-mm-dd>.json``: the device
is a short tag (``h100``, ``h200``, ``cpu``) and the date is the day of the run, so a rerun on
another day or another card sits beside the old file instead of replacing it.
"""

from __future__ import annotations

import datetime
import importlib
import json
import re
import statistics
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def device_tag(gpu_name: str | None = None) -> str:
    """``"NVIDIA H100 80GB HBM3"`` -> ``"h100"``; no GPU name -> ``"cpu"``."""
    if not gpu_name:
        return "cpu"
    m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", gpu_name)
    if m:
        return m.group(1).lower()
    slug = re.sub(r"[^a-z0-9]+", "-", gpu_name.lower().replace("nvidia", "")).strip("-")
    return slug or "gpu"


def result_path(benchmark: str, device: str, date: str | None = None,
                directory: Path | str = RESULTS) -> Path:
    """``<directory>/<benchmark>-<device>-<date>.json`` (date: today by default)."""
    date = date or datetime.date.today().isoformat()
    return Path(directory) / f"{benchmark}-{device}-{date}.json"


def write_json(path: Path | str, doc) -> Path:
    """Write ``doc`` as indented JSON, creating the folder; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return path


# -- GPU ----------------------------------------------------------------------------------------
def cupy():
    import cupy as cp

    return cp


def gpu_name(device: int = 0) -> str:
    """The CUDA device's name as CuPy reports it."""
    name = cupy().cuda.runtime.getDeviceProperties(device)["name"]
    return name.decode() if isinstance(name, bytes) else name


def cpu_timed(fn, reps: int, warmup: int = 1) -> float:
    """Median seconds of ``fn()`` over ``reps`` runs after ``warmup`` (wall clock, CPU)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def timed(fn, reps: int, warmup: int = 1) -> float:
    """Median seconds of ``fn()`` over ``reps`` runs after ``warmup`` runs (CUDA events)."""
    cp = cupy()
    for _ in range(warmup):
        fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
    return statistics.median(times)


def gpu_helper(name: str):
    """A GPU helper of ozsim (``profile_stages``, ``padded_k``, ...), wherever it lives."""
    for module in ("ozsim.gemm._gpu", "ozsim.gemm.ozaki1.cuda"):
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        if hasattr(mod, name):
            return getattr(mod, name)
    raise ImportError(f"ozsim has no GPU helper {name!r} (is CuPy installed?)")


def last_stats(scheme: int) -> dict:
    """The working-memory report of the last GPU GEMM of scheme I (1) or II (2)."""
    module = "ozsim.gemm.ozaki1.cuda" if scheme == 1 else "ozsim.gemm.ozaki2.cuda"
    return dict(getattr(importlib.import_module(module), "last_stats", {}))


def free_gpu_memory() -> None:
    cupy().get_default_memory_pool().free_all_blocks()


"""Shared helpers of the accuracy benchmarks: machine description, JSON output, tables."""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def machine() -> dict:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import importlib.metadata as md

    def ver(pkg):
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return None

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "xprec": ver("xprec"),
        "ozsim": ver("ozsim"),
        "date": datetime.date.today().isoformat(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }


def result_path(benchmark: str, date: str | None = None) -> Path:
    """``results/<benchmark>-cpu-<date>.json`` (date: today by default)."""
    return RESULTS / f"{benchmark}-cpu-{date or datetime.date.today().isoformat()}.json"


def latest(benchmark: str) -> Path:
    """The newest ``results/<benchmark>-<device>-<date>.json``."""
    found = sorted(RESULTS.glob(f"{benchmark}-*-*.json"), key=lambda p: (p.stem[-10:], p.stem))
    if not found:
        raise FileNotFoundError(f"no results/{benchmark}-*.json: run {benchmark}.py first")
    return found[-1]


def write_json(benchmark: str, doc: dict, path: str | Path | None = None) -> Path:
    """Write ``doc`` to ``path``, by default :func:`result_path` of ``benchmark``."""
    path = Path(path) if path else result_path(benchmark)
    path.parent.mkdir(parents=True, exist_ok=True)

    def clean(x):
        if isinstance(x, float) and not math.isfinite(x):
            return str(x)
        if isinstance(x, dict):
            return {str(k): clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        if isinstance(x, np.generic):
            return clean(x.item())
        return x

    path.write_text(json.dumps(clean(doc), indent=1) + "\n")
    return path


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table, columns padded for reading as plain text."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]

    def line(cells):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    out = [line(headers), "| " + " | ".join("-" * w for w in widths) + " |"]
    out += [line(r) for r in rows]
    return "\n".join(out)


def e(x: float) -> str:
    return f"{x:.2e}" if isinstance(x, (int, float)) and math.isfinite(x) else str(x)


def rel_errors(c: np.ndarray, ref) -> np.ndarray:
    """``|c - r| / |r|`` per entry against a double-double :class:`~ozsim.reference.DDComplex`."""
    hi, lo = ref
    diff = (c - hi) - lo
    return np.abs(diff) / np.abs(hi)

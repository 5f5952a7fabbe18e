"""Plot mean relative error against the number of INT8 slices: ``error_vs_splits.png``.

Reads the newest ``results/fig6_gemm-*.json`` (run ``fig6_gemm.py`` first). Left: the sweep s = 3..18 at the
sweep's ``k``, one curve per ``phi``, native ZGEMM as a dashed line of the same colour, and
INT8-AUTO's choice at T = 0 (circle) and T = 1 (square). Right: the same at every ``k`` for
``phi = 1``, with int8x9/11/13 and INT8-AUTO against ZGEMM, as a function of k.

Usage:
    python benchmarks/accuracy/plot_error_vs_splits.py
"""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from _common import HERE, latest


def main():
    doc = json.loads(latest("fig6_gemm").read_text())
    sweep, results = doc["sweep"], doc["results"]
    k0 = doc["sweep_k"]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, phi in enumerate(doc["phis"]):
        c = colors[i % len(colors)]
        pts = sorted((r["num_splits"], r["mean_rel_error"]) for r in sweep if r["phi"] == phi)
        ax.semilogy([p[0] for p in pts], [p[1] for p in pts], "-", color=c, marker=".",
                    label=f"int8x{{s}}, phi={phi:g}")
        at_k = [r for r in results if r["phi"] == phi and r["k"] == k0]
        z = next(r for r in at_k if r["backend"] == "zgemm")
        ax.axhline(z["mean_rel_error"], color=c, ls="--", lw=1)
        for T, mk in ((0.0, "o"), (1.0, "s")):
            a = next(r for r in at_k if r["backend"] == "int8-auto" and r["T"] == T)
            if a["num_splits"] is not None:
                ax.plot(a["num_splits"], a["mean_rel_error"], mk, color=c, ms=9, mfc="none",
                        mew=1.8)
    ax.plot([], [], "k--", lw=1, label="native ZGEMM (same colour)")
    ax.plot([], [], "ko", mfc="none", label="INT8-AUTO T=0 (its s)")
    ax.plot([], [], "ks", mfc="none", label="INT8-AUTO T=1 (its s)")
    ax.set_xlabel("number of INT8 slices s")
    ax.set_ylabel("mean relative error vs double-double")
    ax.set_title(f"complex GEMM {doc['m']}x{k0} @ {k0}x{doc['n']}")
    ax.set_xticks(range(3, 19))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)

    phi = 1.0
    for j, (backend, T) in enumerate((("zgemm", None), ("int8x9", None), ("int8x11", None),
                                      ("int8x13", None), ("int8-auto", 0.0), ("int8-auto", 1.0))):
        rs = sorted((r["k"], r["mean_rel_error"]) for r in results
                    if r["phi"] == phi and r["backend"] == backend and r["T"] == T)
        name = backend if T is None else f"{backend} T={T:g}"
        if backend == "int8-auto":
            at = sorted((r["k"], r["num_splits"]) for r in results
                        if r["phi"] == phi and r["backend"] == backend and r["T"] == T)
            name += " (s = " + ", ".join(str(x[1]) for x in at) + ")"
        ax2.loglog([p[0] for p in rs], [p[1] for p in rs], marker="os^vxd"[j], ms=11 - j,
                   mfc="none", ls="--" if backend == "zgemm" else "-", label=name,
                   color=colors[j])
    ax2.set_xscale("log", base=2)
    ax2.set_xlabel("inner dimension k")
    ax2.set_ylabel("mean relative error vs double-double")
    ax2.set_title(f"phi = {phi:g}, m = n = {doc['m']} (curves with equal s coincide)")
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend(fontsize=8)
    fig.suptitle(f"ozsim emulated ZGEMM accuracy ({doc['machine']['date']}, CPU)")
    fig.tight_layout()
    out = HERE / "error_vs_splits.png"
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

"""The throughput-latency curve of a serving sweep (gpusim/models/serving.py): tokens per second
per GPU against time per output token, one line per deployment and context, each point labelled
with its batch; the 90% interval of the time per token as a horizontal bar."""
from __future__ import annotations

from pathlib import Path


def plot_serving(df, path: Path) -> Path | None:
    """Write the curve of the serving table ``df`` (rows of ``serving.serve``) to ``path``; None
    when no point ran."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ok = df[df["tpot_ms"] != ""].copy()
    if ok.empty:
        return None
    for c in ("tpot_ms", "tpot_lo_ms", "tpot_hi_ms", "tokens_per_s_per_gpu"):
        ok[c] = ok[c].astype(float)
    fig, ax = plt.subplots(figsize=(8, 5))
    keys = ["gpu", "tp", "weight_dtype", "kv_dtype", "context"]
    for key, g in ok.groupby(keys, sort=False):
        g = g.sort_values("batch")
        label = f"{key[0]} tp {key[1]} {key[2]}" + (f" kv {key[3]}" if key[3] != key[2] else "") + f", ctx {key[4]}"
        err = [g.tpot_ms - g.tpot_lo_ms, g.tpot_hi_ms - g.tpot_ms]
        ax.errorbar(g.tpot_ms, g.tokens_per_s_per_gpu, xerr=err, marker="o", capsize=3, label=label)
        for x, y, b in zip(g.tpot_ms, g.tokens_per_s_per_gpu, g.batch):
            ax.annotate(f"b{b}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("time per output token (ms; bar: 90% interval)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_title(f"{ok['model'].iloc[0]}: throughput against latency")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

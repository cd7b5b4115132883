"""Draw docs/img/pipeline.png, the picture of prmkit's pipeline in the README and the docs.

Run from the repository root: ``python docs/make_pipeline.py`` (needs matplotlib, the ``plot`` extra).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

OUT = Path(__file__).resolve().parent / "img" / "pipeline.png"

#: (x, y, title, detail): the stages, in the order a trace flows through them.
MAIN = [
    (0.0, 1.0, "problems", "arith env, GSM8K,\nMATH, agent tasks"),
    (1.0, 1.0, "generate", "policy samples N\n(torch, hf, vLLM)"),
    (2.0, 1.0, "label", "symbolic, Monte Carlo,\nbinary search, judge"),
    (3.0, 1.0, "train", "PRM and ORM\n(save_pretrained)"),
    (4.0, 1.0, "score", "batched, prefix-\ncaching scorer"),
]
USES = [
    (2.4, 0.0, "select / search", "best-of-N, vote,\nbeam, DVTS"),
    (3.4, 0.0, "RL rewards", "TRL, OpenRLHF,\nprmkit serve"),
    (4.4, 0.0, "monitor", "agent trajectories,\nrule / PRM / judge"),
    (5.4, 0.0, "evaluate", "ProcessBench, PRMBench,\nprobes"),
]
REPORT = (5.4, 1.0, "report + card", "verdict with intervals,\nprocess-supervision card")


def box(ax, x: float, y: float, title: str, detail: str, color: str) -> None:
    ax.add_patch(FancyBboxPatch((x - 0.45, y - 0.3), 0.9, 0.6, boxstyle="round,pad=0.02",
                                facecolor=color, edgecolor="#333333", linewidth=1.2))
    ax.text(x, y + 0.12, title, ha="center", va="center", fontsize=10, fontweight="bold")
    ax.text(x, y - 0.1, detail, ha="center", va="center", fontsize=7, color="#222222")


def arrow(ax, a: tuple[float, float], b: tuple[float, float]) -> None:
    ax.annotate("", xy=b, xytext=a, arrowprops={"arrowstyle": "->", "color": "#333333", "lw": 1.2})


def main() -> None:
    fig, ax = plt.subplots(figsize=(11, 3.4), dpi=110)
    for x, y, title, detail in MAIN:
        box(ax, x, y, title, detail, "#dbe9f6")
    for (x0, y0, *_), (x1, y1, *_) in zip(MAIN, MAIN[1:], strict=False):
        arrow(ax, (x0 + 0.43, y0), (x1 - 0.43, y1))
    for x, y, title, detail in USES:
        box(ax, x, y, title, detail, "#e3f1dd")
        arrow(ax, (4.0, 0.69), (x, y + 0.31))
    box(ax, *REPORT, "#fbe7c6")
    for x, y, *_ in USES:
        if x == REPORT[0]:
            arrow(ax, (x, y + 0.31), (REPORT[0], REPORT[1] - 0.31))
    arrow(ax, (4.43, 1.0), (REPORT[0] - 0.43, 1.0))
    ax.text(2.0, 1.45, "one record, the Trace, flows through every stage; each appends its provenance",
            ha="center", fontsize=9, style="italic")
    ax.set_xlim(-0.5, 5.9)
    ax.set_ylim(-0.4, 1.6)
    ax.axis("off")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUT, bbox_inches="tight")
    print(OUT)


if __name__ == "__main__":
    main()

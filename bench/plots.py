"""PNG charts for the benchmark and soak scripts, drawn with matplotlib's Agg backend (no
display needed). Each chart is a set of named lines over a shared x axis."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
# The backend is chosen before pyplot loads: no display here.
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

Series = Sequence[tuple[float, float]]
# Keyword arguments of a line (color, linestyle, ...), by its name.
Styles = Mapping[str, Mapping[str, str]]


def line_chart(
    path: Path,
    title: str,
    xlabel: str,
    ylabel: str,
    lines: Mapping[str, Series],
    *,
    step: bool = False,
    logx: bool = False,
    styles: Styles | None = None,
) -> Path:
    """One axes, a line per entry of `lines` (name -> (x, y) points), saved as `path`;
    `styles` sets a line's color or dashes (lines of one kind alike, runs apart)."""
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    for name, points in lines.items():
        xs = [x for x, _ in points]
        ys = [y for _, y in points]
        style: dict[str, Any] = dict((styles or {}).get(name, {}))
        if step:
            ax.step(xs, ys, where="post", label=name, **style)
        else:
            ax.plot(xs, ys, marker="o" if len(points) < 20 else None, label=name, **style)
    _finish(fig, ax, path, title, xlabel, ylabel, logx=logx)
    return path


def panels(
    path: Path,
    title: str,
    xlabel: str,
    charts: Sequence[tuple[str, Mapping[str, Series]]],
    *,
    from_zero: bool = False,
) -> Path:
    """Several charts stacked over one x axis: (y label, lines) each. `from_zero` starts
    every y axis at 0, so that a straight line through the origin reads as linear."""
    fig, axes = plt.subplots(len(charts), 1, figsize=(8, 2.6 * len(charts)), dpi=100, sharex=True)
    axes_list = list(axes) if len(charts) > 1 else [axes]
    for ax, (ylabel, lines) in zip(axes_list, charts, strict=True):
        for name, points in lines.items():
            ax.plot([x for x, _ in points], [y for _, y in points], marker=".", label=name)
        ax.set_ylabel(ylabel)
        if from_zero:
            # Headroom over the highest point, which autoscaling measured from the lowest.
            ax.set_ylim(0, ax.get_ylim()[1] * 1.05)
        ax.grid(True, alpha=0.3)
        if len(lines) > 1:
            ax.legend(fontsize="small")
    axes_list[0].set_title(title)
    axes_list[-1].set_xlabel(xlabel)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def _finish(
    fig: Figure, ax: Axes, path: Path, title: str, xlabel: str, ylabel: str, *, logx: bool
) -> None:
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)

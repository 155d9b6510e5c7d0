"""The figures of a sensitivity report (`fedbandits_analysis.report`): main
effects per axis (and the federated regret ratio), the interaction heatmap
of the two highest-ranked axes, and regret curves of selected cells. Each
figure is written atomically (a temporary file renamed into place) and
drawn in the style of `figures.py` (900 x 500 px, legend outside)."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from . import stats  # noqa: E402
from .effects import VARIANT, Axis, Study, fmt, mean_interval  # noqa: E402
from .figures import DPI, HEIGHT_PX, WIDTH_PX, _figure, _legend  # noqa: E402
from .figures import _save as save  # noqa: E402

YLABEL = "final cumulative regret per agent"
#: Characters per line of a title (wrapped, never clipped) and of an axis label.
TITLE_WIDTH = 62
LABEL_WIDTH = 42


def ylabel_of(scale: str, word: str = "regret per agent") -> str:
    """The effect plots' y label on `scale` (stats.py) of the final value
    `word` (Study.regret_word)."""
    return f"final {word}, {stats.center_name(scale)} (95% interval)"


def figure(title: str):
    """A report figure: `figures.py`'s, its title wrapped onto as many
    lines as it needs (a long job name or label is never clipped)."""
    fig, ax = _figure("")
    lines = textwrap.wrap(title, TITLE_WIDTH) or [""]
    ax.set_title("\n".join(lines), fontsize=10)
    fig.subplots_adjust(top=0.9 - 0.045 * (len(lines) - 1), left=0.12)
    return fig, ax


def ylabel(ax, text: str) -> None:
    """An axis label wrapped to fit the figure's height."""
    ax.set_ylabel(textwrap.fill(text, LABEL_WIDTH), fontsize=9)


def _positions(axis: Axis, values: list) -> list[float]:
    """x positions: the values themselves on a numeric axis, else the
    index in grid order (categories, true/false)."""
    if axis.numeric:
        return [float(v) for v in values]
    return [float(axis.values.index(v)) for v in values]


def _categorical_ticks(ax, axis: Axis) -> None:
    ax.set_xticks(range(len(axis.values)), [fmt(v) for v in axis.values])
    ax.set_xlim(-0.5, len(axis.values) - 0.5)


def _numeric_ticks(ax, axis: Axis) -> None:
    finite = [v for v in axis.values if math.isfinite(v)]
    if axis.log:
        ax.set_xscale("log")
    if len(finite) <= 12:
        ax.set_xticks(finite, [fmt(v) for v in finite])
        ax.minorticks_off()


def colors(study: Study) -> dict[str, str]:
    """One colour per algorithm (in grid order), the same in every figure."""
    order = study.cells.group_by("variant").agg(pl.col("cell_index").min()).sort("cell_index")["variant"]
    return {a: f"C{i % 10}" for i, a in enumerate(order)}


def effect_plot(
    axis: Axis,
    lines: pl.DataFrame,
    refs: pl.DataFrame,
    out: Path,
    title: str,
    palette: dict[str, str],
    y: str = "mean",
    label: str = YLABEL,
    log_y: bool = False,
) -> Path:
    """One line per algorithm of `y` (with lo/hi as 95% error bars) against
    the axis value; infinite values (dotted) and the cells the axis does not
    apply to (`refs`, dashed) as horizontal levels with their band, each in
    its algorithm's colour (`palette`); `log_y`: a log y axis (the ratio
    scale's geometric means and ratios)."""
    fig, ax = figure(title)
    algos = lines["variant"].unique(maintain_order=True).to_list()
    # A variant read per level of an axis it interacts with has one label
    # per stratum: each a colour of its own.
    palette = {**{a: f"C{(i + len(palette)) % 10}" for i, a in enumerate(algos)}, **palette}
    # Lines side by side on a categorical axis, all within +-0.25 of their
    # category (many strata would otherwise leave it).
    spread = 0.0 if axis.numeric else min(0.06, 0.5 / max(len(algos) - 1, 1))
    for i, algo in enumerate(algos):
        part = lines.filter(pl.col("variant") == algo)
        if axis.numeric:
            inf = part.filter(pl.col("value").is_infinite())
            for row in inf.iter_rows(named=True):
                level = ax.axhline(row[y], ls=":", lw=1.2, color=palette[algo], label=f"{algo}, {axis.name}=inf")
                if row["lo"] is not None and not math.isnan(row["lo"]):
                    ax.axhspan(row["lo"], row["hi"], color=level.get_color(), alpha=0.1, lw=0)
            part = part.filter(pl.col("value").is_finite())
        if "x" in part.columns:
            # The accounted epsilon: each point where its cells' privacy is.
            xs = part["x"].fill_null(float("nan")).to_numpy()
            for xv, yv, t in zip(xs, part[y].to_list(), part["value"].to_list(), strict=True):
                ax.annotate(f"{fmt(t)}", (xv, yv), fontsize=6, xytext=(3, 3), textcoords="offset points", color=palette[algo])
        else:
            xs = np.array(_positions(axis, part["value"].to_list())) + spread * (i - (len(algos) - 1) / 2)
        m = part[y].to_numpy()
        lo = part["lo"].fill_null(float("nan")).to_numpy()
        hi = part["hi"].fill_null(float("nan")).to_numpy()
        err = [np.nan_to_num(m - lo, nan=0.0), np.nan_to_num(hi - m, nan=0.0)]
        ax.errorbar(xs, m, yerr=err, marker="o", capsize=3, color=palette[algo], label=algo)
    for row in refs.iter_rows(named=True):
        fixed = row.get("fixed")
        what = f"{axis.name}={fmt(fixed)} only" if fixed is not None else f"no {axis.name}"
        level = ax.axhline(row[y], ls="--", lw=1.2, color=palette.get(row["variant"], "0.3"), label=f"{row['variant']} ({what})")
        if row["lo"] is not None and not math.isnan(row["lo"]):
            ax.axhspan(row["lo"], row["hi"], color=level.get_color(), alpha=0.12, lw=0)
    if "x" in lines.columns:
        positive = [v for v in lines["x"].to_list() if v is not None and math.isfinite(v) and v > 0]
        if positive and max(positive) / min(positive) > 20:
            ax.set_xscale("log")
        ax.set_xlabel(f"accounted {axis.name} (acct_epsilon); labels: target")
    else:
        (_numeric_ticks if axis.numeric else _categorical_ticks)(ax, axis)
        ax.set_xlabel(axis.name)
    values = [*lines[y].to_list(), *(refs[y].to_list() if refs.height else [])]
    if log_y and all(v is None or (math.isfinite(v) and v > 0) for v in values):
        ax.set_yscale("log")
    else:
        _log_if_wide(ax, values)
    ylabel(ax, label)
    _legend(ax)
    return save(fig, out)


def _band(lf: pl.LazyFrame, metric: str, scale: str = "additive") -> pl.DataFrame:
    """Per (cell, t) over repetitions, on `scale` (stats.py): the
    geometric mean with its Student-t band on the log scale (the
    checkpoints where every repetition's regret is positive), or the mean
    with a 95% percentile-bootstrap band (inside the support: never below
    the smallest repetition; none below 3 repetitions); columns cell_id,
    t, n, mean, lo, hi."""
    per = lf.group_by(["cell_id", "t"]).agg(n=pl.len(), low=pl.col(metric).min(), v=pl.col(metric).sort_by("repetition")).collect()
    levels: list[tuple[float | None, ...]]
    if scale == "ratio":
        per = per.filter(pl.col("low") > 0)
        levels = [stats.level_of(np.log(np.asarray(v, dtype=float)), "ratio")[:3] for v in per["v"].to_list()]
    else:
        levels = [(float(np.mean(v)), *mean_interval(v)) for v in per["v"].to_list()]
    return (
        per.drop("v", "low")
        .with_columns(
            mean=pl.Series([x[0] for x in levels], dtype=pl.Float64),
            lo=pl.Series([x[1] for x in levels], dtype=pl.Float64).fill_nan(None),
            hi=pl.Series([x[2] for x in levels], dtype=pl.Float64).fill_nan(None),
        )
        .sort(["cell_id", "t"])
    )


def curves(
    study: Study, algo: str | None, chosen: list[tuple[str, str]], out: Path, title: str | None = None, phases: dict | None = None
) -> Path:
    """Per-agent regret against t (the level and its 95% band over
    repetitions on the study's scale, `_band`) of
    the chosen cells of one algorithm (None: cells of several, each its
    algorithm's only one), read lazily (those cells only); each label
    with the cell's last-decade exponent and, from `phases` (cell id ->
    phases.linear_phases row), its long linear stretch."""
    ids = [c for c, _ in chosen]
    lf = study.lf.filter(pl.col("cell_id").is_in(ids)).select("cell_id", "repetition", "t", study.metric)
    s = _band(lf, study.metric, study.scale)
    labels = {r["cell_id"]: study.label(r) for r in study.cells.filter(pl.col("cell_id").is_in(ids)).iter_rows(named=True)}
    exps = {}
    if "regret_exponent" in study.final.columns:
        e = study.final.filter(pl.col("cell_id").is_in(ids)).group_by("cell_id").agg(pl.col("regret_exponent").mean())
        exps = {r["cell_id"]: r["regret_exponent"] for r in e.iter_rows(named=True)}
    if title is None:
        title = f"{study.job}: {algo}, regret of selected cells" if algo else f"{study.job}: algorithms with one cell"
    fig, ax = figure(title)
    spans = s.filter(pl.col("t") > 0)["t"]
    loglog = spans.len() > 0 and stats.scalar(spans.max()) / stats.scalar(spans.min()) >= 100 and stats.scalar(s["mean"].min()) > 0
    for i, (cell, role) in enumerate(chosen):
        part = s.filter(pl.col("cell_id") == cell)
        t = part["t"].to_numpy()
        name = labels[cell].removeprefix(algo).strip() if algo else labels[cell]
        label = f"{role}: {name}" if algo and role else name
        if loglog and exps.get(cell) is not None:
            label += f" (exponent {exps[cell]:.2f})"
        stretch = (phases or {}).get(cell)
        if stretch and stretch["long"]:
            label += f" (linear to t = {stretch['t_to']:,.0f})"
        (line,) = ax.plot(t, part["mean"].to_numpy(), color=f"C{i % 10}", lw=1.5, ls="-" if role != "corner" else "--", label=label)
        if stats.scalar(part["n"].min()) >= 3:
            ax.fill_between(t, part["lo"].to_numpy(), part["hi"].to_numpy(), color=line.get_color(), alpha=0.15, lw=0)
    ax.set_xscale("log")
    if loglog:
        ax.set_yscale("log")
    ax.set_xlabel("round t")
    what = "geometric mean, 95% t band" if study.scale == "ratio" else "mean, 95% bootstrap band"
    ylabel(ax, f"cumulative {study.regret_word()} ({what}" + (", log-log)" if loglog else ")"))
    _legend(ax)
    return save(fig, out)


def _log_if_wide(ax, values) -> None:
    """A log y axis when the plotted positive values span more than 20x."""
    v = [x for x in values if x is not None and math.isfinite(x) and x > 0]
    if v and min(v) > 0 and max(v) / min(v) > 20.0 and all(x > 0 for x in values if x is not None and math.isfinite(x)):
        ax.set_yscale("log")


def interaction_plot(inter, out: Path, title: str, metric_label: str = YLABEL) -> Path:
    """An interaction as two panels: the two-way levels (`inter.table`'s
    mean: geometric on the ratio scale) as a heatmap with their values,
    and a line of the first axis per level of the second."""
    a, b, t = inter.a, inter.b, inter.table
    av = [v for v in a.values if v in set(t[a.name].to_list())]
    bv = [v for v in b.values if v in set(t[b.name].to_list())]
    grid = np.full((len(bv), len(av)), np.nan)
    for r in t.iter_rows(named=True):
        grid[bv.index(r[b.name]), av.index(r[a.name])] = r["mean"]
    fig, (hm, ln) = plt.subplots(1, 2, figsize=(WIDTH_PX / DPI, HEIGHT_PX / DPI), dpi=DPI)
    fig.suptitle("\n".join(textwrap.wrap(title, 2 * TITLE_WIDTH)), fontsize=10)
    im = hm.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
    fig.colorbar(im, ax=hm, fraction=0.046, pad=0.04)
    hm.set_xticks(range(len(av)), [fmt(v) for v in av], fontsize=8)
    hm.set_yticks(range(len(bv)), [fmt(v) for v in bv], fontsize=8)
    hm.set_xlabel(a.name, fontsize=9)
    hm.set_ylabel(b.name, fontsize=9)
    mid = np.nanmean(grid)
    for (i, j), v in np.ndenumerate(grid):
        if not np.isnan(v) and grid.size <= 64:
            hm.text(j, i, f"{v:.4g}", ha="center", va="center", fontsize=7, color="white" if v < mid else "black")
    for k, level in enumerate(bv):
        xs = [float(v) if a.numeric else float(i) for i, v in enumerate(av)] if not a.numeric else [float(v) for v in av]
        ln.plot(xs, grid[k], marker="o", color=f"C{k % 10}", label=f"{b.name}={fmt(level)}")
    if a.numeric:
        if a.log:
            ln.set_xscale("log")
        ln.set_xticks([float(v) for v in av], [fmt(v) for v in av])
        ln.minorticks_off()
    else:
        ln.set_xticks(range(len(av)), [fmt(v) for v in av])
    _log_if_wide(ln, grid.flatten().tolist())
    ln.set_xlabel(a.name, fontsize=9)
    ln.set_ylabel(textwrap.fill(metric_label, LABEL_WIDTH), fontsize=9)
    ln.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    return save(fig, out)


def cost_plot(
    lines: pl.DataFrame,
    x: str,
    out: Path,
    title: str,
    xlabel: str,
    log_x: bool,
    palette: dict[str, str] | None = None,
    scale: str = "additive",
) -> Path:
    """The cost of privacy against the privacy axis, one line per variant
    with its 95% interval: on the ratio scale the paired ratio private /
    non-private (log axis, 1 = no cost), on the additive one the paired
    difference (0 = no cost); each point labelled with its target epsilon
    where x is the accounted one."""
    fig, ax = figure(title)
    for i, ((variant,), part) in enumerate(lines.group_by(["variant"], maintain_order=True)):
        part = part.sort(x)
        xs, m = part[x].to_numpy(), part["mean"].to_numpy()
        lo = part["lo"].fill_null(float("nan")).to_numpy()
        hi = part["hi"].fill_null(float("nan")).to_numpy()
        color = (palette or {}).get(variant, f"C{i % 10}")
        ax.errorbar(xs, m, yerr=[np.nan_to_num(m - lo), np.nan_to_num(hi - m)], marker="o", capsize=3, color=color, label=variant)
        if x != "value":
            for xv, yv, t in zip(xs, m, part["value"].to_list(), strict=True):
                ax.annotate(f"target {fmt(t)}", (xv, yv), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.axhline(1.0 if scale == "ratio" else 0.0, color="grey", lw=0.8)
    if log_x:
        ax.set_xscale("log")
    if scale == "ratio":
        ax.set_yscale("log")
    ax.set_xlabel(textwrap.fill(xlabel, 2 * LABEL_WIDTH))
    what = (
        "final regret, private over non-private (paired ratio, geometric mean)"
        if scale == "ratio"
        else "final regret per agent, private minus non-private (paired)"
    )
    ylabel(ax, f"cost of privacy: {what}")
    _legend(ax)
    return save(fig, out)


def communication_plot(study: Study, cells: pl.DataFrame, out: Path) -> Path:
    """Final regret (`level`: geometric mean on the ratio scale) against
    mean final messages, one point per cell in its variant's colour; the
    cells that send nothing as dashed levels. Log-log."""
    palette = colors(study)
    fig, ax = figure(f"{study.job}: final regret against communication, per cell")
    silent = cells.filter(pl.col("messages").fill_null(0) <= 0)
    talk = cells.filter(pl.col("messages") > 0)
    for (variant,), part in talk.group_by([VARIANT], maintain_order=True):
        ax.scatter(part["messages"].to_numpy(), part["level"].to_numpy(), color=palette[variant], label=variant, s=22)
    styles = ["--", ":", "-.", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1))]
    for (variant,), part in silent.group_by([VARIANT], maintain_order=True):
        for k, r in enumerate(part.iter_rows(named=True)):
            # Every line labelled: the cell's swept values tell them apart.
            label = study.label(r).removeprefix(variant).strip()
            ax.axhline(
                r["level"],
                ls=styles[k % len(styles)],
                lw=1.0,
                color=palette[variant],
                label=f"{variant}{' ' + label if label else ''} (no messages)",
            )
    if talk.height:
        ax.set_xscale("log")
    if all(v > 0 for v in cells["level"].to_list()):
        ax.set_yscale("log")
    ax.set_xlabel("messages sent by the end of the run (mean over repetitions)")
    ylabel(ax, f"final {study.regret_word()}, {stats.center_name(study.scale)}")
    _legend(ax)
    return save(fig, out)


def forest_plot(part: pl.DataFrame, strata: list[str], out: Path, title: str) -> Path:
    """One contrast's paired ratio per stratum (`compare.contrasts` rows)
    with its 95% interval, one row per stratum labelled with its values, on
    a log axis with x1 (no difference) marked; resolved rows filled."""
    n = part.height
    height = max(HEIGHT_PX, 140 + 22 * n)
    fig, ax = plt.subplots(figsize=(WIDTH_PX / DPI, height / DPI), dpi=DPI)
    ax.set_title("\n".join(textwrap.wrap(title, TITLE_WIDTH)), fontsize=10)
    labels, ys = [], []
    for i, r in enumerate(part.iter_rows(named=True)):
        y = n - 1 - i
        labels.append(", ".join(f"{c}={fmt(r[c])}" for c in strata if r.get(c) is not None) or "-")
        ys.append(y)
        if r["ratio"] is None or (isinstance(r["ratio"], float) and math.isnan(r["ratio"])):
            continue
        lo = r["lo"] if r["lo"] is not None and not math.isnan(r["lo"]) else r["ratio"]
        hi = r["hi"] if r["hi"] is not None and not math.isnan(r["hi"]) else r["ratio"]
        resolved = r["verdict"] in ("lower", "higher")
        color = "C0" if r["verdict"] == "lower" else "C3" if r["verdict"] == "higher" else "0.4"
        ax.errorbar(
            [r["ratio"]],
            [y],
            xerr=[[r["ratio"] - lo], [hi - r["ratio"]]],
            fmt="o",
            color=color,
            mfc=color if resolved else "white",
            capsize=3,
        )
    ax.axvline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_yticks(ys, labels, fontsize=7)
    ax.set_ylim(-0.7, n - 0.3)
    values = [
        v for v in [*part["lo"].to_list(), *part["hi"].to_list(), *part["ratio"].to_list()] if v is not None and math.isfinite(v) and v > 0
    ]
    if values:
        ax.set_xscale("log")
        low, high = min([*values, 1.0]), max([*values, 1.0])
        ax.set_xlim(low / 1.15, high * 1.15)
        ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"x{v:g}"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("paired ratio (95% interval); filled: resolved, blue below x1, red above", fontsize=9)
    fig.subplots_adjust(left=0.44, right=0.97, top=1 - 70 / height, bottom=60 / height)
    return save(fig, out)

"""The sections of a sensitivity report that compare rather than describe
(`fedbandits_analysis.report`): interactions within each variant, the cost
of privacy against its non-private counterparts, the privacy each cell
actually provides, and the axis effect plots put on it.
`contrasts.py` defines what is computed."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl

from . import report_plots as plots
from .contrasts import MAX_DRAWN, axes_within, interactions, privacy_cost
from .effects import VARIANT, Study, fmt, pooled

Block = tuple
#: Interactions listed in the table (the strongest first).
MAX_LISTED = 10


def _num(v, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:.{digits}g}" if isinstance(v, float) else str(v)


def _pm(mean, lo, hi) -> str:
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return f"{_num(mean)} (no interval: fewer than 3 repetitions)"
    return f"{_num(mean)} [{_num(lo, 3)}, {_num(hi, 3)}]"


def privacy_axis_mode(s: Study, requested: str | None) -> tuple[str, str]:
    """Which epsilon the effect plots put on their axis: `accounted`
    (acct_epsilon, what each cell provides) when requested or, by default,
    when every private cell has a figure; else `target`; and why."""
    private = s.final.filter(pl.col("target_epsilon").is_not_null()) if "target_epsilon" in s.final.columns else s.final.head(0)
    nulls = private.filter(pl.col("acct_epsilon").is_null())["cell_id"].n_unique() if private.height else 0
    if requested == "target":
        return "target", "requested (--privacy-axis target)"
    if nulls:
        why = f"{nulls} private cell(s) have no accounted figure (null acct_epsilon)"
        return "target", why + ("; --privacy-axis accounted is not possible" if requested == "accounted" else "")
    return ("accounted", "every private cell has an accounted figure") if private.height else ("target", "no private cell")


def accounted_x(s: Study, eff: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """`eff` (a main effect of epsilon) with `x`: the median accounted
    epsilon of the cells each point pools; and a note per point whose cells
    provide different figures (more than 1% apart)."""
    acc = (
        s.final.filter(pl.col("epsilon").is_not_null())
        .group_by([VARIANT, "epsilon"])
        .agg(x=pl.col("acct_epsilon").median(), lo=pl.col("acct_epsilon").min(), hi=pl.col("acct_epsilon").max())
        .rename({"epsilon": "value", "lo": "acct_lo", "hi": "acct_hi"})
    )
    out = eff.join(acc, on=[VARIANT, "value"], how="left", maintain_order="left")
    notes = [
        f"{r[VARIANT]} at target {fmt(r['value'])}: its cells provide {_num(r['acct_lo'])} to {_num(r['acct_hi'])} (drawn at the median)"
        for r in out.iter_rows(named=True)
        if r["acct_lo"] is not None and r["acct_hi"] is not None and r["acct_hi"] > 1.01 * r["acct_lo"]
    ]
    return out.drop("acct_lo", "acct_hi"), notes


def privacy_table(s: Study, columns: list[str]) -> list[Block]:
    """Each distinct (variant, privacy figures) once, with how many cells
    share it: a table no cap can cut short of a differing row."""
    listed = {c["cell_id"] for c in s.privacy.get("cells", [])}
    private = s.final.filter(pl.col("cell_id").is_in(list(listed))).unique("cell_id", keep="first")
    if private.height == 0:
        return []
    shown = [c for c in columns if private[c].null_count() < private.height]
    groups = private.group_by([VARIANT, *shown], maintain_order=True).agg(cells=pl.len(), first=pl.col("cell_index").min()).sort("first")
    rows = [[r[VARIANT], *[_num(r[c]) if not isinstance(r[c], bool) else str(r[c]).lower() for c in shown], str(r["cells"])] for r in groups.iter_rows(named=True)]
    return [
        (
            "p",
            f"{private.height} private cells, {groups.height} distinct (variant, figures): each row once, with the "
            "number of cells sharing it (the figures do not depend on the axes that leave privacy alone, e.g. m or B).",
        ),
        ("table", ["variant", *[f"`{c}`" for c in shown], "cells"], rows),
    ]


def interaction_blocks(s: Study, out: Path) -> list[Block]:
    """The interactions within each variant: the strongest listed with
    their intervals, the first few drawn."""
    blocks: list[Block] = [("h2", "Interactions within each variant")]
    found = interactions(s.final, s.axes, s.metric)
    if not found:
        return blocks + [("p", "No two axes vary together (a full cross of their values) within any variant: no interaction to compute.")]
    blocks.append(
        (
            "p",
            "Strength: the range of the mean interaction contrasts I_ab = m_ab - m_a. - m_.b + m_.. (computed within each "
            "repetition, the other axes pooled) in units of the variant's pooled within-cell sd; 0 when the effect of one "
            "axis is the same at every level of the other. The interval is paired over repetitions for the two extreme "
            "(a, b) pairs; chosen from the same data, it is optimistic for the strongest of many.",
        )
    )
    rows = []
    for i in found[:MAX_LISTED]:
        (ha, hb), (la, lb) = i.extremes
        rows.append(
            [
                i.variant,
                f"`{i.a.name}` x `{i.b.name}`",
                _pm(i.strength, i.lo, i.hi),
                f"{i.a.name}={fmt(ha)}, {i.b.name}={fmt(hb)} vs {i.a.name}={fmt(la)}, {i.b.name}={fmt(lb)}",
            ]
        )
    blocks.append(("table", ["variant", "axes", "strength [95% interval]", "extreme contrasts"], rows))
    if len(found) > MAX_LISTED:
        blocks.append(("p", f"{len(found) - MAX_LISTED} weaker pairs not listed."))
    for k, i in enumerate([f for f in found if not math.isnan(f.strength)][:MAX_DRAWN]):
        name = f"{s.job}_interaction_{k + 1}.png"
        title = f"{s.job}: {i.variant}, {i.a.name} x {i.b.name} (strength {_num(i.strength, 3)})"
        plots.interaction_plot(i, out / name, title)
        blocks.append(("img", name, f"{i.variant}: {i.a.name} x {i.b.name}"))
    return blocks


def _cost_table(s: Study, table: pl.DataFrame) -> Block:
    cells = {r["cell_id"]: r for r in s.cells.iter_rows(named=True)}
    figures = s.final.unique("cell_id", keep="first").select("cell_id", "target_epsilon", "acct_epsilon")
    fig = {r["cell_id"]: r for r in figures.iter_rows(named=True)}
    rows = []
    for r in table.iter_rows(named=True):
        f = fig.get(r["cell_id"], {})
        rows.append(
            [
                s.label(cells[r["cell_id"]]),
                _num(f.get("target_epsilon")),
                _num(f.get("acct_epsilon")),
                s.label(cells[r["counterpart"]]),
                _pm(r["diff"], r["diff_lo"], r["diff_hi"]),
                _pm(r["ratio"], r["lo"], r["hi"]),
                str(r["reps"]),
            ]
        )
    head = ["private cell", "target eps", "acct eps", "non-private counterpart", "cost (difference)", "ratio", "repetitions"]
    return ("table", head, rows)


def cost_blocks(s: Study, out: Path, mode: str) -> list[Block]:
    """The cost of privacy: each private cell against its non-private
    counterpart, the cost against epsilon, and its dependence on the
    other axes."""
    if not s.privacy.get("cells"):
        return []
    blocks: list[Block] = [("h2", "The cost of privacy")]
    table, rows, missing = privacy_cost(s)
    blocks.append(
        (
            "p",
            "Each private cell paired by repetition with its non-private counterpart (same environment and parameters "
            "but privacy; contrasts.py): the difference of final regret per agent (95% percentile-bootstrap interval "
            "over the paired repetitions) and the ratio of the means (paired delta-method interval).",
        )
    )
    if missing:
        blocks.append(("p", f"No non-private counterpart in this job for {len(missing)} private cell(s): " + "; ".join(missing[:10]) + ("; ..." if len(missing) > 10 else "")))
    if table.height == 0:
        return blocks
    blocks.append(_cost_table(s, table))
    if "epsilon" in rows.columns and rows["epsilon"].drop_nulls().n_unique() > 1:
        lines = pooled(rows, [VARIANT, "epsilon"], "cost").rename({"epsilon": "value"}).sort([VARIANT, "value"])
        x, xlabel = "value", "target epsilon"
        if mode == "accounted":
            acc = rows.group_by([VARIANT, "epsilon"]).agg(x=pl.col("acct_epsilon").median()).rename({"epsilon": "value"})
            lines = lines.join(acc, on=[VARIANT, "value"])
            x, xlabel = "x", "accounted epsilon (acct_epsilon), points labelled with their target"
        finite = [v for v in lines[x].to_list() if v is not None and math.isfinite(v) and v > 0]
        log_x = bool(finite) and max(finite) / min(finite) > 20
        name = f"{s.job}_privacy_cost.png"
        plots.cost_plot(lines, x, out / name, f"{s.job}: the cost of privacy", xlabel, log_x, plots.colors(s))
        blocks.append(("img", name, "cost of privacy vs epsilon"))
    blocks += _cost_dependence(s, rows)
    return blocks


def _cost_dependence(s: Study, rows: pl.DataFrame) -> list[Block]:
    """How the cost moves with each other axis (per variant, pooled within
    repetitions), and the strongest interaction of two axes on it."""
    others = [a for a in s.axes if a.name != "epsilon"]
    out: list[Block] = []
    table = []
    for (variant,), part in rows.group_by([VARIANT], maintain_order=True):
        for a in axes_within(part, others):
            eff = pooled(part.filter(pl.col(a.name).is_not_null()), [a.name], "cost")
            eff = eff.sort(a.name)
            text = "; ".join(f"{fmt(r[a.name])}: {_pm(r['mean'], r['lo'], r['hi'])}" for r in eff.iter_rows(named=True))
            table.append([variant, f"`{a.name}`", text])
    if table:
        out += [("p", "The cost of privacy against each other axis (mean over repetitions of the paired difference, other axes pooled):"), ("table", ["variant", "axis", "cost at each value [95% bootstrap interval]"], sorted(table))]
    found = interactions(rows, s.axes, "cost")
    if found and not math.isnan(found[0].strength):
        i = found[0]
        (ha, hb), (la, lb) = i.extremes
        out.append(
            (
                "p",
                f"Strongest interaction on the cost: {i.variant}, `{i.a.name}` x `{i.b.name}`, strength {_pm(i.strength, i.lo, i.hi)} "
                f"(extremes {i.a.name}={fmt(ha)}, {i.b.name}={fmt(hb)} vs {i.a.name}={fmt(la)}, {i.b.name}={fmt(lb)}).",
            )
        )
    return out

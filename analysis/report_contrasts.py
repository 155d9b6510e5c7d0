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
from . import stats
from .contrasts import FAMILY_LEVEL, MAX_DRAWN, axes_within, interactions, privacy_cost, searched_tables
from .effects import VARIANT, Study, fmt, pooled

Block = tuple
#: Interactions listed in the table (the strongest first).
MAX_LISTED = 10


def _num(v, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:.{digits}g}" if isinstance(v, float) else str(v)


def _ratio(value, lo, hi, scale: str) -> str:
    """A ratio with its interval: `x36.9 [16.1, 84.7]` on the ratio scale."""
    if scale != "ratio":
        return _pm(value, lo, hi)
    return stats.fmt_estimate(stats.Estimate.of(value, lo, hi), "ratio")


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
    """Each distinct (variant, axes the figures depend on, privacy figures)
    once, with how many cells share it: a table no cap can cut short of a
    differing row. An axis is a column where its value changes a figure
    with the variant and the other axes shown fixed (found in the data:
    sdp_vecsum's figures depend on m, ldp's do not)."""
    listed = {c["cell_id"] for c in s.privacy.get("cells", [])}
    private = s.final.filter(pl.col("cell_id").is_in(list(listed))).unique("cell_id", keep="first")
    if private.height == 0:
        return []
    shown = [c for c in columns if private[c].null_count() < private.height]
    axes = [a.name for a in s.axes if a.name in private.columns and private[a.name].drop_nulls().n_unique() > 1]
    keep = figure_axes(private, axes, shown)
    loose = [a for a in axes if a not in keep]
    groups = (
        private.group_by([VARIANT, *keep, *shown], maintain_order=True).agg(cells=pl.len(), first=pl.col("cell_index").min()).sort("first")
    )
    cols = [*keep, *shown]
    rows = [
        [r[VARIANT], *[_num(r[c]) if not isinstance(r[c], bool) else str(r[c]).lower() for c in cols], str(r["cells"])]
        for r in groups.iter_rows(named=True)
    ]
    same = f" The figures are the same at every value of {', '.join(f'`{a}`' for a in loose)} (within each row)." if loose else ""
    return [
        (
            "p",
            f"{private.height} private cells, {groups.height} distinct (variant, axes the figures depend on, figures): each "
            f"row once, with the number of cells sharing it.{same}",
        ),
        ("table", ["variant", *[f"`{c}`" for c in cols], "cells"], rows),
    ]


def figure_axes(private: pl.DataFrame, axes: list[str], figures: list[str]) -> list[str]:
    """The axes (of `axes`, in order) that the `figures` columns depend on
    within each variant: each axis is dropped, last first, where the
    variant and the axes kept still determine every figure."""
    if not figures:
        return []

    def determined(cols: list[str]) -> bool:
        n = private.group_by([VARIANT, *cols]).agg(n=pl.struct(figures).n_unique())
        return n["n"].max() == 1

    keep = list(axes)
    for a in reversed(axes):
        trial = [k for k in keep if k != a]
        if determined(trial):
            keep = trial
    return keep


def interaction_blocks(s: Study, out: Path, found: list | None = None) -> list[Block]:
    """The interactions within each variant (contrasts.py; `found`, when
    already computed): those detected at the family-wise level listed with
    their intervals and drawn (the first few), and how many pairs and
    sub-tables were searched."""
    blocks: list[Block] = [("h2", "Interactions within each variant")]
    found = interactions(s.final, s.axes, s.metric, s.scale) if found is None else found
    if not found:
        return blocks + [("p", "No two axes vary together (a full cross of their values) within any variant: no interaction to compute.")]
    searched = searched_tables(found)
    level = 1.0 - (1.0 - FAMILY_LEVEL) / max(searched, 1)
    unit = "ratio of ratios (x1: none)" if s.scale == "ratio" else "difference of differences in within-cell sds (0: none)"
    blocks.append(
        (
            "p",
            f"Searched: {len(found)} pair(s) of axes crossed within a variant, {searched} 2 x 2 sub-table(s) in all. "
            f"For each pair, the sub-table whose contrast D = [L(a_j, b_l) - L(a_i, b_l)] - [L(a_j, b_k) - L(a_i, b_k)] "
            f"(per repetition, the other axes pooled) is largest, as a {unit}, with a paired Student-t interval at the "
            f"Bonferroni level {100 * level:.4g}% (family-wise 95% over every sub-table searched). An interaction is "
            f"listed only where that interval excludes no effect. {stats.scale_note(s.scale)}",
        )
    )
    detected = [i for i in found if i.detected]
    if not detected:
        top = found[0]
        blocks.append(
            ("p", f"None detected: every pair's strongest contrast has an interval including no effect (largest: {_line(top, s.scale)}).")
        )
        return blocks
    rows = [
        [i.variant, f"`{i.a.name}` x `{i.b.name}`", _ratio(i.strength, i.lo, i.hi, s.scale), _effects(i, s.scale)]
        for i in detected[:MAX_LISTED]
    ]
    head = ["variant", "axes", f"strength [{100 * level:.4g}% interval]", "the step of the first axis at each end of the second"]
    blocks.append(("table", head, rows))
    rest = len(found) - len(detected)
    if len(detected) > MAX_LISTED or rest:
        blocks.append(("p", f"{max(len(detected) - MAX_LISTED, 0)} more detected not listed; {rest} pair(s) with no interaction detected."))
    for k, i in enumerate(detected[:MAX_DRAWN]):
        name = f"{s.job}_interaction_{k + 1}.png"
        kind = "ratio of ratios" if s.scale == "ratio" else "strength"
        title = f"{s.job}: {i.variant}, {i.a.name} x {i.b.name} ({kind} {_num(i.strength, 3)})"
        plots.interaction_plot(i, out / name, title, plots.ylabel_of(s.scale, s.regret_word()))
        blocks.append(("img", name, f"{i.variant}: {i.a.name} x {i.b.name}"))
    return blocks


def _effects(i, scale: str) -> str:
    """`m=2 -> 20: x2.87 at epsilon=0.5, x2.97 at epsilon=8`."""
    (a0, a1), (b0, b1) = i.extremes
    show = stats.fmt_ratio if scale == "ratio" else (lambda v: f"{v:+.4g}")
    return f"{i.a.name}={fmt(a0)} -> {fmt(a1)}: {show(i.effects[0])} at {i.b.name}={fmt(b0)}, {show(i.effects[1])} at {i.b.name}={fmt(b1)}"


def _line(i, scale: str) -> str:
    return f"{i.variant}, `{i.a.name}` x `{i.b.name}`: {_ratio(i.strength, i.lo, i.hi, scale)}; {_effects(i, scale)}"


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
                _ratio(r["ratio"], r["lo"], r["hi"], s.scale),
                _pm(r["diff"], r["diff_lo"], r["diff_hi"]),
                str(r["reps"]),
            ]
        )
    ratio = "ratio (geometric mean of paired ratios) [95% t]" if s.scale == "ratio" else "ratio of means [95% delta method]"
    head = [
        "private cell",
        "target eps",
        "acct eps",
        "non-private counterpart",
        ratio,
        "difference [95%: t below 10 repetitions, else bootstrap]",
        "repetitions",
    ]
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
            "but privacy; contrasts.py): the ratio of final regret per agent ("
            + (
                "the geometric mean of the per-repetition ratios, Student-t interval on the log scale"
                if s.scale == "ratio"
                else "the ratio of the means, paired delta-method interval"
            )
            + ") and the difference (95% interval over the paired repetitions: Student t below 10 repetitions, a "
            "percentile bootstrap from 10). " + stats.scale_note(s.scale),
        )
    )
    if missing:
        blocks.append(
            (
                "p",
                f"No non-private counterpart in this job for {len(missing)} private cell(s): "
                + "; ".join(missing[:10])
                + ("; ..." if len(missing) > 10 else ""),
            )
        )
    if table.height == 0:
        return blocks
    blocks.append(_cost_table(s, table))
    blocks += _other_algorithm_note(s, table)
    if "epsilon" in rows.columns and rows["epsilon"].drop_nulls().n_unique() > 1:
        lines = pooled(rows, [VARIANT, "epsilon"], *_cost_column(s)).rename({"epsilon": "value"}).sort([VARIANT, "value"])
        x, xlabel = "value", "target epsilon"
        if mode == "accounted":
            acc = rows.group_by([VARIANT, "epsilon"]).agg(x=pl.col("acct_epsilon").median()).rename({"epsilon": "value"})
            lines = lines.join(acc, on=[VARIANT, "value"])
            x, xlabel = "x", "accounted epsilon (acct_epsilon), points labelled with their target"
        finite = [v for v in lines[x].to_list() if v is not None and math.isfinite(v) and v > 0]
        log_x = bool(finite) and max(finite) / min(finite) > 20
        name = f"{s.job}_privacy_cost.png"
        plots.cost_plot(lines, x, out / name, f"{s.job}: the cost of privacy", xlabel, log_x, plots.colors(s), s.scale)
        blocks.append(("img", name, "cost of privacy vs epsilon"))
    blocks += _cost_dependence(s, rows)
    return blocks


def _other_algorithm_note(s: Study, table: pl.DataFrame) -> list[Block]:
    """A note where a private cell is compared with another algorithm:
    the cost then includes whatever else the two algorithms differ in."""
    algo = {r["cell_id"]: r["algorithm"] for r in s.cells.iter_rows(named=True)}
    pairs = sorted(
        {(algo[r["cell_id"]], algo[r["counterpart"]]) for r in table.iter_rows(named=True) if algo[r["cell_id"]] != algo[r["counterpart"]]}
    )
    if not pairs:
        return []
    named = ", ".join(f"{a} with {b}" for a, b in pairs)
    return [
        (
            "p",
            f"Compared with another algorithm: {named}. The cost then includes whatever else the two differ in (P-FCB's "
            "schedule and acceptance window against FCB's sharing every round), not only the noise. To tell the two "
            "apart, add `noise: [true, false]` to the grid: the private algorithm without its noise, every other part "
            "kept (for Fed_UCB, `epsilon: .inf` would also switch clipping and its width's privacy term off); the "
            "section 'Cost of the algorithm and cost of privacy' then splits the cost.",
        )
    ]


def _cost_column(s: Study) -> tuple[str, str]:
    """The per-repetition cost read on the study's scale: the paired ratio
    (its geometric mean) or the paired difference (its mean)."""
    return ("cost_ratio", "ratio") if s.scale == "ratio" else ("cost", "additive")


def _cost_dependence(s: Study, rows: pl.DataFrame) -> list[Block]:
    """How the cost moves with each other axis (per variant, pooled within
    repetitions), and any interaction of two axes on it detected at the
    family-wise level."""
    others = [a for a in s.axes if a.name != "epsilon"]
    column, scale = _cost_column(s)
    out: list[Block] = []
    table = []
    for (variant,), part in rows.group_by([VARIANT], maintain_order=True):
        for a in axes_within(part, others):
            eff = pooled(part.filter(pl.col(a.name).is_not_null()), [a.name], column, scale)
            eff = eff.sort(a.name)
            text = "; ".join(f"{fmt(r[a.name])}: {_ratio(r['mean'], r['lo'], r['hi'], scale)}" for r in eff.iter_rows(named=True))
            table.append([variant, f"`{a.name}`", text])
    what = "geometric mean over repetitions of the paired ratio" if scale == "ratio" else "mean over repetitions of the paired difference"
    if table:
        out += [
            ("p", f"The cost of privacy against each other axis ({what}, other axes pooled):"),
            ("table", ["variant", "axis", "cost at each value [95% interval]"], sorted(table)),
        ]
    found = interactions(rows, s.axes, column, scale)
    detected = [i for i in found if i.detected]
    if detected:
        out.append(
            ("p", f"Interaction on the cost (family-wise 95% over {searched_tables(found)} sub-tables): {_line(detected[0], scale)}.")
        )
    elif found:
        out.append(("p", f"No interaction of two axes on the cost detected ({searched_tables(found)} sub-tables searched)."))
    return out

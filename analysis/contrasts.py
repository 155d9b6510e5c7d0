"""The questions a sensitivity study asks beyond main effects
(`fedbandits_analysis.report`): which two axes interact within an
algorithm variant, and what privacy costs.

Definitions (the report quotes them beside its tables):
- **interaction** of axes `a` and `b` within a variant: for each repetition
  r, the two-way table of per-repetition means m_ab(r) (the other axes
  pooled, each combination counted once) and its interaction contrasts
  I_ab(r) = m_ab(r) - m_a.(r) - m_.b(r) + m_..(r) (zero for every pair
  when the effect of `a` is the same at every level of `b`). The
  **strength** is the range of the mean contrasts over the (a, b) pairs
  in units of the variant's pooled within-cell sd; its 95% interval is
  the paired (over repetitions) interval of the difference between the
  two extreme pairs' contrasts, in the same units. The extreme pairs are
  chosen from the same data, so the interval is optimistic for the
  largest of many pairs: read a strength whose interval is near 0 as
  none. Only pairs of axes that vary together within the variant (a full
  cross of their values) are considered.
- **cost of privacy** of a private cell: its final regret minus its
  non-private counterpart's, paired by repetition (repetition r of both
  shares its random numbers) with its percentile-bootstrap interval over
  repetitions, and the ratio of their means with the paired delta-method
  interval. The counterpart is a cell of the same
  environment whose algorithm is the private one's (with `private:
  false`) or the one the family registry names (`non_private`, e.g.
  Private-FedLinUCB -> FedLinUCB, Fed_UCB -> Gossip_UCB), and every
  parameter both set (other than `private`) has the same value; among
  several such cells (a parameter only the non-private one uses was
  swept, e.g. FedUCB's `lambda`), the first in grid order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import polars as pl

from .effects import VARIANT, Z95, Axis, Study, _paired_ratio, bootstrap_interval

#: At most this many interactions are drawn.
MAX_DRAWN = 3


@dataclass
class Interaction:
    """One pair of axes within one variant: the two-way means, the
    strength with its interval, and the extreme pairs."""

    variant: str
    a: Axis
    b: Axis
    table: pl.DataFrame
    strength: float
    lo: float
    hi: float
    extremes: tuple


def within_sd(final: pl.DataFrame, metric: str) -> float:
    """The pooled within-cell sd of `final`'s cells (dof-weighted)."""
    c = final.group_by("cell_id").agg(n=pl.len(), var=pl.col(metric).var()).filter(pl.col("n") > 1)
    dof = (c["n"] - 1).sum()
    return math.sqrt(((c["n"] - 1) * c["var"]).sum() / dof) if dof else float("nan")


def axes_within(final: pl.DataFrame, axes: list[Axis]) -> list[Axis]:
    """The axes that take two or more values among `final`'s rows."""
    return [a for a in axes if a.name in final.columns and final[a.name].drop_nulls().n_unique() > 1]


def interaction_of(part: pl.DataFrame, variant: str, a: Axis, b: Axis, metric: str) -> Interaction | None:
    """The interaction of `a` and `b` in `part` (one variant's rows), or
    None when the two do not cross (some pair of values has no cell)."""
    part = part.filter(pl.col(a.name).is_not_null() & pl.col(b.name).is_not_null())
    per = part.group_by([a.name, b.name, "repetition"]).agg(v=pl.col(metric).mean())
    na, nb = per[a.name].n_unique(), per[b.name].n_unique()
    if na < 2 or nb < 2 or per.select(a.name, b.name).unique().height < na * nb:
        return None
    ma = per.group_by([a.name, "repetition"]).agg(ma=pl.col("v").mean())
    mb = per.group_by([b.name, "repetition"]).agg(mb=pl.col("v").mean())
    m = per.group_by("repetition").agg(m=pl.col("v").mean())
    con = per.join(ma, on=[a.name, "repetition"]).join(mb, on=[b.name, "repetition"]).join(m, on="repetition")
    con = con.with_columns(i=pl.col("v") - pl.col("ma") - pl.col("mb") + pl.col("m"))
    mean_i = con.group_by([a.name, b.name]).agg(i=pl.col("i").mean()).sort("i")
    low, high = mean_i.row(0, named=True), mean_i.row(-1, named=True)
    pick = lambda r, name: con.filter((pl.col(a.name) == r[a.name]) & (pl.col(b.name) == r[b.name])).select("repetition", pl.col("i").alias(name))  # noqa: E731
    d = pick(high, "h").join(pick(low, "l"), on="repetition").select(pl.col("h") - pl.col("l")).to_series()
    sd = within_sd(part, metric)
    n = d.len()
    if math.isnan(sd) or sd == 0 or n < 3:
        strength, lo, hi = (high["i"] - low["i"]) / sd if sd and not math.isnan(sd) else float("nan"), float("nan"), float("nan")
    else:
        half = Z95 * (d.std() or 0.0) / math.sqrt(n)
        strength, lo, hi = d.mean() / sd, (d.mean() - half) / sd, (d.mean() + half) / sd
    table = part.group_by([a.name, b.name]).agg(mean=pl.col(metric).mean(), cells=pl.col("cell_id").n_unique())
    extremes = ((high[a.name], high[b.name]), (low[a.name], low[b.name]))
    return Interaction(variant, a, b, table, strength, lo, hi, extremes)


def interactions(final: pl.DataFrame, axes: list[Axis], metric: str) -> list[Interaction]:
    """Every crossed pair of axes within every variant, strongest first
    (undefined strengths last)."""
    out = []
    for (variant,), part in final.group_by([VARIANT], maintain_order=True):
        for a, b in combinations(axes_within(part, axes), 2):
            found = interaction_of(part, variant, a, b, metric)
            if found is not None:
                out.append(found)
    return sorted(out, key=lambda x: (math.isnan(x.strength), -x.strength if not math.isnan(x.strength) else 0.0))


def _is_private(study: Study) -> set[str]:
    return {c["cell_id"] for c in study.privacy.get("cells", [])}


def counterparts(study: Study) -> tuple[dict[str, str], list[str]]:
    """Each private cell's non-private counterpart (cell id -> cell id),
    and the private cells without one (their labels)."""
    private = _is_private(study)
    params = [p for p in study.params if p in study.final.columns]
    cells = study.final.unique("cell_id", keep="first")
    mapping = {a: n for f in study.families.values() for a, n in (f.get("non_private") or {}).items()}
    plain = [r for r in cells.iter_rows(named=True) if r["cell_id"] not in private]
    found, missing = {}, []
    for p in cells.filter(pl.col("cell_id").is_in(list(private))).sort("cell_index").iter_rows(named=True):
        algo = mapping.get(p["algorithm"], p["algorithm"])
        match = [
            c
            for c in plain
            if c["algorithm"] == algo
            and c["environment"] == p["environment"]
            and all(c[k] is None or p[k] is None or k == "private" or c[k] == p[k] for k in params)
        ]
        if match:
            found[p["cell_id"]] = min(match, key=lambda c: c["cell_index"])["cell_id"]
        else:
            missing.append(study.label(p))
    return found, missing


def privacy_cost(study: Study) -> tuple[pl.DataFrame, pl.DataFrame, list[str]]:
    """The cost of privacy (module doc): per private cell with a
    counterpart, (cell_id, counterpart, diff, diff_lo, diff_hi, ratio, lo,
    hi, reps); the per-repetition costs as rows of `final` (the private
    cell's columns, `cost` its regret minus the counterpart's) for the
    effects of the other axes on it; and the private cells without a
    counterpart."""
    pairs, missing = counterparts(study)
    if not pairs:
        return pl.DataFrame(), pl.DataFrame(), missing
    metric = study.metric
    link = pl.DataFrame({"cell_id": list(pairs), "counterpart": list(pairs.values())})
    mine = study.final.join(link, on="cell_id")
    theirs = study.final.select(pl.col("cell_id").alias("counterpart"), "repetition", pl.col(metric).alias("_base"))
    rows = mine.join(theirs, on=["counterpart", "repetition"]).with_columns(cost=pl.col(metric) - pl.col("_base"))
    paired = rows.select("cell_id", "counterpart", n=pl.col(metric), d=pl.col("_base"))
    ratio = _paired_ratio(paired, ["cell_id", "counterpart"]).select("cell_id", "counterpart", ratio="frr", lo="lo", hi="hi", reps="reps")
    diff = rows.group_by("cell_id").agg(diff=pl.col("cost").mean(), v=pl.col("cost").sort_by("repetition"))
    bounds = [bootstrap_interval(v) for v in diff["v"].to_list()]
    diff = diff.drop("v").with_columns(
        diff_lo=pl.Series([b[0] for b in bounds], dtype=pl.Float64), diff_hi=pl.Series([b[1] for b in bounds], dtype=pl.Float64)
    )
    table = ratio.join(diff.select("cell_id", "diff", "diff_lo", "diff_hi"), on="cell_id")
    order = study.cells.select("cell_id", "cell_index")
    table = table.join(order, on="cell_id").sort("cell_index").drop("cell_index")
    return table, rows.drop("_base"), missing

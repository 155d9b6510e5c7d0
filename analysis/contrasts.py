"""The questions a sensitivity study asks beyond main effects
(`fedbandits_analysis.report`): which two axes interact within an
algorithm variant, and what privacy costs.

Definitions (the report quotes them beside its tables; scales and
intervals as stats.py defines them):
- **interaction** of axes `a` and `b` within a variant: for each
  repetition r, the two-way table of per-repetition levels L_ab(r) (mean
  of the final values on the working scale, ln on the ratio scale, the
  other axes pooled) and, for every 2 x 2 sub-table (a_i < a_j, b_k <
  b_l), the contrast D(r) = [L(a_j, b_l) - L(a_i, b_l)] - [L(a_j, b_k) -
  L(a_i, b_k)]: how much the effect of a_i -> a_j changes from b_k to b_l.
  On the ratio scale exp(mean D) is a **ratio of ratios**: the benefit of
  more agents x2.87 at epsilon 0.5 and x2.97 at epsilon 8 is 1.03, no
  interaction, where the additive contrast of the same numbers is large.
  The strongest sub-table of a pair (largest |mean D|) is reported with a
  paired Student-t interval at the Bonferroni level 1 - 0.05 / N, N the
  number of sub-tables searched over every pair and variant of the job,
  so the chance that any reported interaction is noise is at most 5%. An
  interaction is **detected** where that interval excludes no effect (1,
  or 0 additive); only detected ones are listed as interactions. On the
  additive scale the strength is mean D in units of the variant's pooled
  within-cell sd. Only pairs of axes crossed within the variant (every
  pair of values has a cell) are considered.
- **cost of privacy** of a private cell: against its non-private
  counterpart, paired by repetition (repetition r of both shares its
  random numbers): on the ratio scale the geometric mean of the
  per-repetition ratios private / non-private with its Student-t interval;
  always also the difference of final regret with its interval over
  repetitions (Student t below 10 repetitions, else a percentile bootstrap:
  effects.mean_interval). The counterpart is a cell of the same
  environment whose algorithm is the private one's without noise
  (`private: false`, or epsilon = inf: P-FCB, Fed_UCB) where the study
  has one, else the one the family registry names (`non_private`, e.g.
  Private-FedLinUCB -> FedLinUCB, P-FCB -> FCB), and every parameter both
  set has the same value, the privacy and accounting ones (`private`,
  `epsilon`, `delta`, the registry's `variant_params`) aside; among
  several such cells (a parameter only the non-private one uses was
  swept, e.g. FedUCB's `lambda`), the first in grid order. Pairing P-FCB
  with FCB charges P-FCB's schedule and acceptance window to privacy: the
  report says which it compared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np
import polars as pl

from . import stats
from .effects import VARIANT, Axis, Study, fmt, mean_interval, per_repetition, ratio_of, variant_params_of

#: At most this many interactions are drawn.
MAX_DRAWN = 3
#: The family-wise level of the interactions reported (Bonferroni).
FAMILY_LEVEL = 0.95


@dataclass
class Interaction:
    """One pair of axes within one variant: the two-way levels (`table`:
    a, b, mean (geometric on the ratio scale), cells), the strongest 2 x 2
    sub-table's contrast with its interval (`strength`, `lo`, `hi`: a
    ratio of ratios, or a difference in within-cell sds), its values
    ((a_i, a_j), (b_k, b_l)), the effect of a_i -> a_j at b_k and at b_l
    (`effects`, on the reader's scale), the sub-tables of this pair
    (`tables`) and whether it is detected at the family-wise level."""

    variant: str
    a: Axis
    b: Axis
    table: pl.DataFrame
    strength: float
    lo: float
    hi: float
    extremes: tuple
    effects: tuple = (float("nan"), float("nan"))
    tables: int = 0
    detected: bool | None = None
    reps: int = 0
    #: The strongest sub-table's per-repetition contrasts (working scale)
    #: and the unit the additive strength is in (the within-cell sd).
    contrasts: np.ndarray | None = None
    unit: float = 1.0


def within_sd(final: pl.DataFrame, metric: str) -> float:
    """The pooled within-cell sd of `final`'s cells (dof-weighted)."""
    c = final.group_by("cell_id").agg(n=pl.len(), var=pl.col(metric).var()).filter(pl.col("n") > 1)
    dof = stats.scalar((c["n"] - 1).sum())
    return math.sqrt(stats.scalar(((c["n"] - 1) * c["var"]).sum()) / dof) if dof else float("nan")


def axes_within(final: pl.DataFrame, axes: list[Axis]) -> list[Axis]:
    """The axes that take two or more values among `final`'s rows."""
    return [a for a in axes if a.name in final.columns and final[a.name].drop_nulls().n_unique() > 1]


def _cube(per: pl.DataFrame, a: Axis, b: Axis) -> tuple[np.ndarray, list, list] | None:
    """The per-repetition levels as an array [repetition, a value, b value]
    over the repetitions every (a, b) pair has; None when the two do not
    cross."""
    av = [v for v in a.values if v in set(per[a.name].to_list())]
    bv = [v for v in b.values if v in set(per[b.name].to_list())]
    if len(av) < 2 or len(bv) < 2 or per.select(a.name, b.name).unique().height < len(av) * len(bv):
        return None
    reps = sorted(set(per["repetition"].to_list()))
    cube = np.full((len(reps), len(av), len(bv)), np.nan)
    ri = {r: i for i, r in enumerate(reps)}
    for r in per.iter_rows(named=True):
        cube[ri[r["repetition"]], av.index(r[a.name]), bv.index(r[b.name])] = r["v"]
    cube = cube[~np.isnan(cube).any(axis=(1, 2))]
    return cube, av, bv


def interaction_of(part: pl.DataFrame, variant: str, a: Axis, b: Axis, metric: str, scale: str = "ratio") -> Interaction | None:
    """The interaction of `a` and `b` in `part` (one variant's rows) at
    the pointwise 95% level (`interactions` sets the family-wise one), or
    None when the two do not cross."""
    part = part.filter(pl.col(a.name).is_not_null() & pl.col(b.name).is_not_null())
    per = per_repetition(part, [a.name, b.name], metric, scale)
    found = _cube(per, a, b)
    if found is None:
        return None
    cube, av, bv = found
    subs = [(i, j, k, n) for i, j in combinations(range(len(av)), 2) for k, n in combinations(range(len(bv)), 2)]
    d = np.stack([(cube[:, j, n] - cube[:, i, n]) - (cube[:, j, k] - cube[:, i, k]) for i, j, k, n in subs], axis=1)
    best = int(np.argmax(np.abs(d.mean(axis=0))))
    i, j, k, n = subs[best]
    table = part.group_by([a.name, b.name]).agg(mean=_center(metric, scale), cells=pl.col("cell_id").n_unique())
    step = lambda col: stats.back(float(np.mean(cube[:, j, col] - cube[:, i, col])), scale)  # noqa: E731
    out = Interaction(
        variant,
        a,
        b,
        table,
        float("nan"),
        float("nan"),
        float("nan"),
        ((av[i], av[j]), (bv[k], bv[n])),
        (step(k), step(n)),
        len(subs),
        None,
        cube.shape[0],
    )
    out.contrasts = d[:, best]
    out.unit = within_sd(part, metric) if scale == "additive" else 1.0
    _set_level(out, stats.LEVEL, scale)
    return out


def _center(metric: str, scale: str) -> pl.Expr:
    return pl.col(metric).log().mean().exp() if scale == "ratio" else pl.col(metric).mean()


def _set_level(found: Interaction, level: float, scale: str) -> None:
    """The strength's interval at `level` (and whether it is detected)."""
    d, sd = found.contrasts, found.unit
    m, lo, hi = stats.mean_interval(d, level)
    if scale == "ratio":
        found.strength, found.lo, found.hi = stats.back(m, scale), stats.back(lo, scale), stats.back(hi, scale)
    elif sd and not math.isnan(sd):
        found.strength, found.lo, found.hi = m / sd, lo / sd, hi / sd
    else:
        found.strength, found.lo, found.hi = float("nan"), float("nan"), float("nan")
    found.detected = None if math.isnan(lo) else bool(lo > 0 or hi < 0)


def interactions(final: pl.DataFrame, axes: list[Axis], metric: str, scale: str = "ratio") -> list[Interaction]:
    """Every crossed pair of axes within every variant, detected ones
    first, then by the size of the contrast (|ln| of a ratio of ratios, or
    |strength|); intervals at the family-wise level over every sub-table
    searched (module doc)."""
    out = []
    for (variant,), part in final.group_by([VARIANT], maintain_order=True):
        for a, b in combinations(axes_within(part, axes), 2):
            found = interaction_of(part, variant, a, b, metric, scale)
            if found is not None:
                out.append(found)
    searched = sum(f.tables for f in out)
    for f in out:
        _set_level(f, 1.0 - (1.0 - FAMILY_LEVEL) / max(searched, 1), scale)

    def size(f: Interaction) -> float:
        if math.isnan(f.strength):
            return -1.0
        return abs(math.log(f.strength)) if scale == "ratio" and f.strength > 0 else abs(f.strength)

    return sorted(out, key=lambda f: (not f.detected, -size(f), f.variant, f.a.name, f.b.name))


def searched_tables(found: list[Interaction]) -> int:
    """The 2 x 2 sub-tables the family-wise level divides by."""
    return sum(f.tables for f in found)


def is_private(study: Study) -> set[str]:
    """The ids of the cells the accountant lists (the private cells)."""
    return {c["cell_id"] for c in study.privacy.get("cells", [])}


#: Parameters only a private cell sets or that only say how much privacy:
#: never matched between a private cell and its counterpart.
PRIVACY_PARAMS = {"private", "epsilon", "delta"}


def counterparts(study: Study) -> tuple[dict[str, str], list[str]]:
    """Each private cell's non-private counterpart (cell id -> cell id),
    and the private cells without one (their labels). The counterpart is
    the same algorithm without noise where the study has it (`private:
    false`, or an infinite epsilon: P-FCB, Fed_UCB), else the algorithm
    the family registry names (`non_private`: Private-FedLinUCB ->
    FedLinUCB, P-FCB -> FCB, Fed_UCB -> Gossip_UCB); every other parameter
    both set equal, the accounting ones (`variant_params`) aside."""
    private = is_private(study)
    # The parameters that change how a cell is accounted (the registry's
    # variant parameters: private, protocol, calibration, ...) have no
    # meaning for a non-private cell: they are not matched.
    skip = set(variant_params_of(study.families)) | PRIVACY_PARAMS
    params = [p for p in study.params if p in study.final.columns and p not in skip]
    cells = study.final.unique("cell_id", keep="first")
    mapping = {a: n for f in study.families.values() for a, n in (f.get("non_private") or {}).items()}
    plain = [r for r in cells.iter_rows(named=True) if r["cell_id"] not in private]
    found, missing = {}, []
    for p in cells.filter(pl.col("cell_id").is_in(list(private))).sort("cell_index").iter_rows(named=True):
        for algo in dict.fromkeys([p["algorithm"], mapping.get(p["algorithm"], p["algorithm"])]):
            match = [
                c
                for c in plain
                if c["algorithm"] == algo
                and c["environment"] == p["environment"]
                and all(c[k] is None or p[k] is None or c[k] == p[k] for k in params)
            ]
            if match:
                found[p["cell_id"]] = min(match, key=lambda c: c["cell_index"])["cell_id"]
                break
        else:
            missing.append(study.label(p))
    return found, missing


def pair_ratios(study: Study, pairs: dict[str, str]) -> pl.DataFrame:
    """Per cell of `pairs`: its final regret over its partner's, paired by
    repetition on the study's scale (cell_id, frr, lo, hi, reps)."""
    if not pairs:
        return pl.DataFrame(schema={"cell_id": pl.String, "frr": pl.Float64, "lo": pl.Float64, "hi": pl.Float64, "reps": pl.UInt32})
    link = pl.DataFrame({"cell_id": list(pairs), "partner": list(pairs.values())})
    mine = study.final.join(link, on="cell_id").select("cell_id", "partner", "repetition", n=pl.col(study.metric))
    theirs = study.final.select(pl.col("cell_id").alias("partner"), "repetition", d=pl.col(study.metric))
    paired = mine.join(theirs, on=["partner", "repetition"])
    return ratio_of(study, paired, ["cell_id"]).select("cell_id", "frr", "lo", "hi", "reps")


def privacy_cost(study: Study) -> tuple[pl.DataFrame, pl.DataFrame, list[str]]:
    """The cost of privacy (module doc): per private cell with a
    counterpart, (cell_id, counterpart, diff, diff_lo, diff_hi, ratio, lo,
    hi, reps); the per-repetition costs as rows of `final` (the private
    cell's columns, `cost` its regret minus the counterpart's, `cost_ratio`
    its regret over the counterpart's) for the
    effects of the other axes on it; and the private cells without a
    counterpart."""
    pairs, missing = counterparts(study)
    if not pairs:
        return pl.DataFrame(), pl.DataFrame(), missing
    metric = study.metric
    link = pl.DataFrame({"cell_id": list(pairs), "counterpart": list(pairs.values())})
    mine = study.final.join(link, on="cell_id")
    theirs = study.final.select(pl.col("cell_id").alias("counterpart"), "repetition", pl.col(metric).alias("_base"))
    rows = mine.join(theirs, on=["counterpart", "repetition"]).with_columns(
        cost=pl.col(metric) - pl.col("_base"), cost_ratio=pl.col(metric) / pl.col("_base")
    )
    ratio = pair_ratios(study, pairs).join(link, on="cell_id").select("cell_id", "counterpart", ratio="frr", lo="lo", hi="hi", reps="reps")
    diff = rows.group_by("cell_id").agg(diff=pl.col("cost").mean(), v=pl.col("cost").sort_by("repetition"))
    bounds = [mean_interval(v) for v in diff["v"].to_list()]
    diff = diff.drop("v").with_columns(
        diff_lo=pl.Series([b[0] for b in bounds], dtype=pl.Float64), diff_hi=pl.Series([b[1] for b in bounds], dtype=pl.Float64)
    )
    table = ratio.join(diff.select("cell_id", "diff", "diff_lo", "diff_hi"), on="cell_id")
    order = study.cells.select("cell_id", "cell_index")
    table = table.join(order, on="cell_id").sort("cell_index").drop("cell_index")
    return table, rows.drop("_base"), missing


def strata_for(found: list[Interaction], axis: Axis) -> dict[str, list[str]]:
    """Per variant, the axes `axis` interacts with there (detected at the
    family-wise level): the main effect of `axis` is read per level of
    them, never pooled over them."""
    out: dict[str, list[str]] = {}
    for f in found:
        if not f.detected or axis.name not in (f.a.name, f.b.name):
            continue
        other = f.b.name if f.a.name == axis.name else f.a.name
        out.setdefault(f.variant, [])
        if other not in out[f.variant]:
            out[f.variant].append(other)
    return out


def stratified(study: Study, axis: Axis, found: list[Interaction]) -> Study:
    """`study` with each variant in which `axis` interacts with other axes
    (`strata_for`) split into one variant per level of those axes
    (`feducb_decentralized (private) [graph=ring, m=16]`), so that the main
    effect, its ranking and the federated regret ratio of `axis` read each
    stratum apart."""
    strata = {v: n for v, n in strata_for(found, axis).items() if v != study.baseline}
    if not strata:
        return study
    order = {a.name: i for i, a in enumerate(study.axes)}

    def label(row: dict) -> str:
        names = sorted(strata.get(row[VARIANT], []), key=lambda n: order.get(n, 99))
        if not names:
            return row[VARIANT]
        return f"{row[VARIANT]} [" + ", ".join(f"{n}={fmt_value(row.get(n))}" for n in names) + "]"

    cells = study.final.unique("cell_id", keep="first")
    names = pl.DataFrame(
        {"cell_id": cells["cell_id"], "_v": [label(r) for r in cells.iter_rows(named=True)]}, schema={"cell_id": pl.String, "_v": pl.String}
    )

    def relabel(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.join(names, on="cell_id", how="left").with_columns(pl.col("_v").alias(VARIANT)).drop("_v")

    return replace(study, final=relabel(study.final), cells=relabel(study.cells))


def fmt_value(v) -> str:
    """A stratum's value as the job writes it (`-` where a cell has none)."""
    return "-" if v is None else fmt(v)

"""The four papers' claims, and ours, as checks on a job's results.

Each `Claim` belongs to one paper figure (the job name's base,
`dubey_fig1a` for `dubey_fig1a_small` / `_vm` / the full job) and reads
that job's final values at any scale. Its verdict is one of three, kept
apart:

- `reproduced`: every comparison the claim makes is resolved in the
  claimed direction (a 95% Student-t interval of the paired difference,
  paired by repetition: the cells of a job share their random numbers per
  repetition, `fedbandits_analysis.stats`), or a stated number lies within
  the claim's stated tolerance;
- `not reproduced`: some comparison is resolved against it, is not
  resolved, or a number lies outside the tolerance (the paper's number
  stands beside ours in REPRODUCTION.md);
- `not visible at this scale`: the job cannot show it (the horizon is below
  what the claim needs, or the cell it compares is not in the job): the
  reason is given.

Tolerances are ours and stated in each claim's text, fixed from the
paper's wording ("approximately", "essentially quadratic"), not fitted to
our results. `analysis/tests/test_claims.py` pins every claim's verdict on
the `_small` jobs; `fedbandits_analysis.reproduction` writes the verdicts
at every scale into REPRODUCTION.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from .stats import mean_interval, scalar

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
NOT_VISIBLE = "not visible at this scale"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, NOT_VISIBLE)

#: The per-round regret of a FedUCB policy that does not learn on
#: `linear_gap`: it plays a suboptimal action, whose mean reward is U[0.5,
#: 0.6] against the best's U[0.7, 0.8], a gap of 0.2 on average
#: (ALGORITHMS.md, Dubey & Pentland's setting).
LINEAR_GAP_LEVEL = 0.2


@dataclass(frozen=True)
class Outcome:
    """A claim's verdict on one job's results and what we measured."""

    verdict: str
    ours: str


@dataclass(frozen=True)
class Claim:
    """One claim of a paper figure: `text` says what is checked (with its
    tolerance), `source` "paper" (a quote or our reading of its figure) or
    "ours" (a finding of this report), `paper` the number the paper states
    ("not stated" where it states none), `check` the test on the job's
    final values (one row per cell and repetition)."""

    figure: str
    key: str
    text: str
    source: str
    paper: str
    check: Callable[[pl.DataFrame], Outcome]


def finals(lf: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """One row per cell and repetition: the values at the last checkpoint."""
    df = lf.collect() if isinstance(lf, pl.LazyFrame) else lf
    last = df.group_by(["cell_id", "repetition"]).agg(pl.col("t").max().alias("t_last"))
    return df.join(last, on=["cell_id", "repetition"]).filter(pl.col("t") == pl.col("t_last")).drop("t_last")


def select(df: pl.DataFrame, **where) -> pl.DataFrame:
    """The rows where every column of `where` has its value (None: null; inf: infinite)."""
    for k, v in where.items():
        if v is None:
            df = df.filter(pl.col(k).is_null())
        elif isinstance(v, float) and math.isinf(v):
            df = df.filter(pl.col(k).is_infinite())
        else:
            df = df.filter(pl.col(k) == v)
    return df


def _by_rep(df: pl.DataFrame, value: str) -> dict[int, float]:
    return dict(zip(df["repetition"].to_list(), df[value].to_list(), strict=True))


@dataclass(frozen=True)
class Less:
    """A paired comparison a < b of one value between two selections."""

    a: str
    b: str
    mean: float
    lo: float
    hi: float
    n: int

    @property
    def holds(self) -> bool | None:
        """True: resolved a < b; False: resolved a > b; None: not resolved."""
        if math.isnan(self.lo):
            return None
        if self.lo > 0:
            return True
        if self.hi < 0:
            return False
        return None

    def __str__(self) -> str:
        word = {True: "<", False: ">", None: "~"}[self.holds]
        return f"{self.a} {word} {self.b} (b - a = {_g(self.mean)} [{_g(self.lo)}, {_g(self.hi)}], n = {self.n})"


def _g(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4g}"


def less(df: pl.DataFrame, a: dict, b: dict, names: tuple[str, str], value: str = "agent_regret") -> Less | None:
    """Paired a < b over the repetitions both selections have; None when
    either selection is empty or holds more than one cell."""
    sa, sb = select(df, **a), select(df, **b)
    if sa["cell_id"].n_unique() > 1 or sb["cell_id"].n_unique() > 1:
        return None  # an axis the claim does not read: pairing would mix cells
    xa, xb = _by_rep(sa, value), _by_rep(sb, value)
    reps = sorted(set(xa) & set(xb))
    if not reps:
        return None
    d = np.array([xb[r] - xa[r] for r in reps], dtype=float)
    m, lo, hi = mean_interval(d)
    return Less(names[0], names[1], m, lo, hi, len(reps))


def all_less(parts: list[Less | None], what: str) -> Outcome:
    """`reproduced` when every comparison is resolved in its direction;
    `not visible` when a cell is missing."""
    if not parts or any(p is None for p in parts):
        return Outcome(NOT_VISIBLE, f"the job has no {what} (or several: an axis the claim does not read)")
    found = [p for p in parts if p is not None]
    if any(p.n < 2 for p in found):
        signs = "; ".join(f"{p.a} {'<' if p.mean > 0 else '>='} {p.b} (b - a = {_g(p.mean)})" for p in found)
        return Outcome(NOT_VISIBLE, f"one repetition: no interval resolves a comparison (point values: {signs})")
    ok = all(p.holds is True for p in found)
    return Outcome(REPRODUCED if ok else NOT_REPRODUCED, "; ".join(str(p) for p in found))


def horizon(df: pl.DataFrame) -> int:
    """The job's horizon (its largest)."""
    return int(scalar(df["horizon"].max()))


def levels(df: pl.DataFrame, column: str, **where) -> list:
    """The sorted distinct non-null values of `column` among the rows `where` selects."""
    return sorted(v for v in select(df, **where)[column].unique().to_list() if v is not None)


def mean_of(df: pl.DataFrame, value: str = "agent_regret", **where) -> float:
    """The mean of `value` over the rows `where` selects (nan if none)."""
    s = select(df, **where)[value]
    return scalar(s.mean()) if s.len() else float("nan")


def needs_horizon(df: pl.DataFrame, t: int, why: str) -> Outcome | None:
    """`not visible` when the horizon is below `t`, else None."""
    if horizon(df) < t:
        return Outcome(NOT_VISIBLE, f"T = {horizon(df):.3g} < {t:.0e}: {why}")
    return None


def within_factor(ours: float, paper: float, factor: float) -> bool:
    """Whether `ours` lies within x/÷ `factor` of `paper` (both positive)."""
    return ours > 0 and paper > 0 and 1 / factor <= ours / paper <= factor


def by_figure(claims: list[Claim]) -> dict[str, list[Claim]]:
    """The claims grouped by paper figure, in order."""
    out: dict[str, list[Claim]] = {}
    for c in claims:
        out.setdefault(c.figure, []).append(c)
    return out


def evaluate(claim: Claim, df: pl.DataFrame) -> Outcome:
    """The claim's outcome on a job's final values (`finals`)."""
    return claim.check(df)


def all_claims() -> list[Claim]:
    """Every claim of the four papers, in report order."""
    from . import claims_papers

    return claims_papers.CLAIMS

"""Where a regret curve grows linearly (`fedbandits_analysis.report`'s stall
check over the whole curve).

`regret_exponent` reads only the last decade of the horizon: a private
FedUCB whose first sync comes at t = 2.5e5 of 10^7 grows linearly for
five decades and then learns, and its last-decade exponent is small. This
module finds, per cell, as the engine's run summary does
(`algo::curve::linear_stretch`), the **longest linear stretch**: the longest run of
checkpoints whose local slope of ln regret against ln t is at least 0.9
(`LINEAR_GROWTH_EXPONENT`), with the rounds it spans.

- The cell's curve is the geometric mean over its repetitions at each
  checkpoint (the mean of ln regret), from the first checkpoint where
  every repetition's regret is positive.
- The local slope at checkpoint t_i is the secant to the first checkpoint
  at or beyond t_i x 10^(1/4) (a quarter decade): integer checkpoints at
  small t and one noisy round do not cut a stretch.
- A stretch from t_a to t_b spans log10(t_b / t_a) decades. It is
  **long** where it spans 2 decades or more and ends at or beyond
  sqrt(T): regret grew linearly over at least half the horizon's decades
  (an ordinary warm-up, linear for the first tens of rounds, is not).
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from .load import LINEAR_GROWTH_EXPONENT

#: The local slope is taken over at least this factor in t (10^(1/4), the
#: engine's `algo::curve::STRETCH_WINDOW`).
WINDOW = 1.778279410038923
#: A long stretch spans at least this many decades ...
LONG_DECADES = 2.0


def linear_stretch(ts, lnr) -> tuple[float, float] | None:
    """The longest stretch (t_from, t_to) of a curve (checkpoints `ts`
    ascending, `lnr` its ln regret) where the local slope (module doc) is
    at least LINEAR_GROWTH_EXPONENT; None where there is none."""
    t = np.asarray(ts, dtype=float)
    g = np.asarray(lnr, dtype=float)
    lt = np.log(t)
    n = t.size
    best, start = None, None
    for i in range(n):
        j = int(np.searchsorted(t, t[i] * WINDOW - 1e-9))
        if j >= n:
            j = n - 1
        ok = j > i and (g[j] - g[i]) / (lt[j] - lt[i]) >= LINEAR_GROWTH_EXPONENT
        if ok:
            if start is None:
                start = i
            span = (t[start], t[j])
            if best is None or lt[j] - lt[start] > math.log(best[1]) - math.log(best[0]):
                best = span
        else:
            start = None
    return (float(best[0]), float(best[1])) if best else None


def _curves(points: pl.LazyFrame, lf: pl.LazyFrame, value: str) -> pl.DataFrame:
    """One row per cell: its checkpoints `t` ascending, the per-checkpoint
    `value` of `points` (cell_id, t, n, value) where every repetition of
    the cell is counted (n equal to the cell's repetitions at its t), and
    its horizon."""
    reps = lf.group_by(["cell_id", "t"]).agg(all=pl.len(), horizon=pl.col("horizon").first())
    return (
        points.join(reps, on=["cell_id", "t"])
        .filter(pl.col("n") == pl.col("all"))
        .sort(["cell_id", "t"])
        .group_by("cell_id", maintain_order=True)
        .agg(pl.col("t"), pl.col(value), pl.col("horizon").first())
        .collect()
    )


def linear_phases(lf: pl.LazyFrame, metric: str = "agent_regret") -> pl.DataFrame:
    """Per cell: its longest linear stretch (`t_from`, `t_to`, `decades`;
    null where there is none) and whether it is long (module doc)."""
    curves = _curves(lf.filter(pl.col(metric) > 0).group_by(["cell_id", "t"]).agg(n=pl.len(), lnr=pl.col(metric).log().mean()), lf, "lnr")
    rows = []
    for r in curves.iter_rows(named=True):
        found = linear_stretch(r["t"], r["lnr"]) if len(r["t"]) > 1 else None
        if found:
            t0, t1 = found
            decades = math.log10(t1 / t0)
            long = decades >= LONG_DECADES and t1 >= math.sqrt(r["horizon"])
            rows.append({"cell_id": r["cell_id"], "t_from": t0, "t_to": t1, "decades": decades, "long": long})
        else:
            rows.append({"cell_id": r["cell_id"], "t_from": None, "t_to": None, "decades": None, "long": False})
    schema = {"cell_id": pl.String, "t_from": pl.Float64, "t_to": pl.Float64, "decades": pl.Float64, "long": pl.Boolean}
    return pl.DataFrame(rows, schema=schema)


def describe(row: dict) -> str:
    """A stretch as `linear t = 1-7,318 (3.9 decades)`, or `none`."""
    if row.get("t_from") is None:
        return "none"
    return f"linear t = {row['t_from']:,.0f}-{row['t_to']:,.0f} ({row['decades']:.1f} decades)"


#: A flagged cell whose per-round regret over the last decade is at least
#: this share of its first level never started learning, whatever it does
#: next (random play); at NEVER_STARTED or more while it still moves, it is
#: still exploring (Fed_UCB under a wide private width at epsilon = 0.5:
#: 0.117 per round at t = 100, 0.116 to 0.113 over the decades after, 0.099
#: over the last, at T = 10^6: 0.84 of its first level). Heuristics, set on
#: a gossip study at T = 10^6 and the planted curves
#: of tests/test_report_families.py.
UNMOVED = 0.9
NEVER_STARTED = 0.8
#: Per-round regret that changes by less than this share between the last
#: two decades has settled (local_ucb on its locally best arm: 0.0894,
#: 0.0892, 0.0892 per round over the last three decades, 0.87 of its first
#: level).
SETTLED = 0.05


def _window(ts, rs, a: float, b: float) -> float | None:
    """Per-round regret between the last checkpoints at or before a and b."""
    i = max((k for k, t in enumerate(ts) if t <= a), default=None)
    j = max((k for k, t in enumerate(ts) if t <= b), default=None)
    if i is None or j is None or ts[j] <= ts[i]:
        return None
    return (rs[j] - rs[i]) / (ts[j] - ts[i])


def verdict(first: float | None, prev: float | None, late: float | None) -> str | None:
    """What a cell whose last decade grows linearly did (module constants):
    "never started" (its per-round regret over the last decade still at
    its first level: UNMOVED of it or more, or NEVER_STARTED or more while
    it still changes), "stalled after learning" (below its first level and
    settled: unchanged within SETTLED over the last two decades), or "still
    learning" (below its first level and still falling: the horizon ends
    mid-way)."""
    if not first or first <= 0 or late is None:
        return None
    settled = prev is not None and prev > 0 and abs(late - prev) <= SETTLED * prev
    if late >= UNMOVED * first or (late >= NEVER_STARTED * first and not settled):
        return "never started"
    return "stalled after learning" if settled else "still learning"


def per_round_levels(lf: pl.LazyFrame, cells: list[str], metric: str = "agent_regret") -> pl.DataFrame:
    """Per cell (of `cells`), from its mean curve over repetitions: `early`,
    its first per-round regret R(t0) / t0 at the first checkpoint t0 >=
    min(100, T / 100) (a level the warm-up's noise does not swing); `prev`
    and `late`, the per-round regret over the decade before the last and
    over the last decade; and `verdict` (`verdict`)."""
    mine = lf.filter(pl.col("cell_id").is_in(cells))
    curves = _curves(mine.group_by(["cell_id", "t"]).agg(n=pl.len(), r=pl.col(metric).mean()), mine, "r")
    rows = []
    for c in curves.iter_rows(named=True):
        ts, rs, horizon = c["t"], c["r"], c["horizon"]
        start = min(100.0, horizon / 100.0)
        i0 = next((i for i, t in enumerate(ts) if t >= start and t > 0), None)
        early = rs[i0] / ts[i0] if i0 is not None else None
        late = _window(ts, rs, horizon / 10, horizon)
        prev = _window(ts, rs, horizon / 100, horizon / 10)
        rows.append({"cell_id": c["cell_id"], "early": early, "prev": prev, "late": late, "verdict": verdict(early, prev, late)})
    schema = {"cell_id": pl.String, "early": pl.Float64, "prev": pl.Float64, "late": pl.Float64, "verdict": pl.String}
    return pl.DataFrame(rows, schema=schema)

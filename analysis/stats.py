"""The statistics every section of a report reads (`fedbandits_analysis.report`):
the scale a study is read on, Student-t intervals of a mean and of a paired
contrast, and the scale's words for tables and plots.

**Scale.** Regret effects in these algorithms are multiplicative (regret
~ epsilon^-1/2, ~ sqrt(M), ~ d): an axis that halves regret halves it at
every level of the others, so an additive contrast of two such axes reads a
product as an interaction, and one hard problem instance (theta* is drawn
per repetition and shared by every cell of it) dominates arithmetic means.
The default `ratio` scale therefore reads final regret through its
logarithm: a level is a geometric mean, a contrast a ratio, an interaction a
ratio of ratios. `additive` (the report's `--scale additive`) keeps
arithmetic means and differences.

**Pairing.** Repetition r of every cell shares its random numbers
(common random numbers: linear_sphere's theta* is one per repetition), so a
contrast of two cells is taken within each repetition and its interval is
over the per-repetition contrasts. Where repetitions were independent
across cells this is still a valid (less efficient) interval.

**Intervals.** Student t over repetitions: mean +- t_{1-a/2, n-1} sd /
sqrt(n), back-transformed (exp) on the ratio scale, so a ratio's interval
is never negative. scipy gives the quantile (`scipy.stats.t.ppf`); fewer
than 2 repetitions give no interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np
from scipy import stats as sst


def scalar(x: object) -> float:
    """A polars scalar (`Series.max()`, `.mean()`, `.item()`) as a float;
    NaN for a null (an empty or all-null series)."""
    return float("nan") if x is None else float(cast("float", x))


#: The two scales a report can read a study on (module doc).
SCALES = ("ratio", "additive")
#: Level of every interval (two-sided).
LEVEL = 0.95


def t_quantile(level: float, n: int) -> float:
    """The two-sided Student-t quantile t_{1-(1-level)/2, n-1}; nan below
    2 observations."""
    if n < 2:
        return float("nan")
    return float(sst.t.ppf(1.0 - (1.0 - level) / 2.0, n - 1))


@dataclass(frozen=True)
class Estimate:
    """A mean over repetitions on the working scale with its interval,
    already back-transformed: `value` is a ratio (ratio scale) or a
    difference / level (additive); `lo`, `hi` nan without an interval;
    `n` the repetitions; `resolved` whether the interval excludes the null
    value (1 for a ratio, 0 for a difference)."""

    value: float
    lo: float
    hi: float
    n: int
    resolved: bool | None

    @classmethod
    def of(cls, value: float, lo: float | None, hi: float | None, n: int = 0) -> Estimate:
        """An estimate from a table's columns (a null bound: no interval)."""
        nan = float("nan")
        return cls(value, nan if lo is None else lo, nan if hi is None else hi, n, None)

    @property
    def has_interval(self) -> bool:
        return not (math.isnan(self.lo) or math.isnan(self.hi))


def mean_interval(x, level: float = LEVEL) -> tuple[float, float, float]:
    """(mean, lo, hi) of the values `x` with the Student-t interval (nan
    ends below 2 values; equal ends when every value is the same)."""
    x = np.asarray(x, dtype=float)
    n = x.size
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    m = float(x.mean())
    if n < 2:
        return m, float("nan"), float("nan")
    half = t_quantile(level, n) * float(x.std(ddof=1)) / math.sqrt(n)
    return m, m - half, m + half


def forward(x, scale: str):
    """Values onto the working scale: ln on the ratio scale."""
    x = np.asarray(x, dtype=float)
    return np.log(x) if scale == "ratio" else x


def back(v: float, scale: str) -> float:
    """A working-scale value back to the reader's: exp on the ratio scale."""
    return math.exp(v) if scale == "ratio" and not math.isnan(v) else v


def contrast(d, scale: str, level: float = LEVEL) -> Estimate:
    """The paired contrast of per-repetition working-scale differences `d`
    (b - a within each repetition): a ratio b / a (geometric) on the ratio
    scale, a difference b - a on the additive one."""
    m, lo, hi = mean_interval(d, level)
    n = int(np.asarray(d).size)
    if math.isnan(lo):
        resolved = None
    else:
        resolved = bool(lo > 0 or hi < 0)
    return Estimate(back(m, scale), back(lo, scale), back(hi, scale), n, resolved)


def level_of(v, scale: str, level: float = LEVEL) -> tuple[float, float, float, float]:
    """A level from its per-repetition working-scale values `v`: (center,
    lo, hi, median), back-transformed (the geometric mean and its interval
    on the ratio scale)."""
    m, lo, hi = mean_interval(v, level)
    med = float(np.median(v)) if len(v) else float("nan")
    return back(m, scale), back(lo, scale), back(hi, scale), back(med, scale)


def positive(values) -> bool:
    """Whether every value is finite and positive (the ratio scale needs
    it: a log of 0 is not a regret level)."""
    x = np.asarray(values, dtype=float)
    return bool(x.size) and bool(np.all(np.isfinite(x) & (x > 0)))


def center_name(scale: str) -> str:
    """What a level is on `scale`, for table heads and axis labels."""
    return "geometric mean" if scale == "ratio" else "mean"


def scale_note(scale: str) -> str:
    """One sentence a table or figure carries to state its scale."""
    if scale == "ratio":
        return (
            "Ratio scale: levels are geometric means over repetitions, contrasts are ratios paired by repetition "
            "(x1 = no effect), 95% Student-t intervals on the log scale."
        )
    return "Additive scale: levels are arithmetic means over repetitions, contrasts are differences paired by repetition (0 = no effect)."


def fmt_ratio(r: float) -> str:
    """A ratio as `x2.87` (`x0.25` for a fall)."""
    if r is None or math.isnan(r):
        return "n/a"
    return f"x{r:.3g}"


def fmt_estimate(e: Estimate, scale: str) -> str:
    """A contrast with its interval: `x0.25 [0.2, 0.31]` or `-12.3 [-15, -9.1]`."""
    head = fmt_ratio(e.value) if scale == "ratio" else f"{e.value:.4g}"
    if not e.has_interval:
        return head + " (no interval: fewer than 2 repetitions)"
    return f"{head} [{e.lo:.3g}, {e.hi:.3g}]"

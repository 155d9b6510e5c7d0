"""The statistics of a sensitivity report (`fedbandits_analysis.report`):
one job's swept axes, its cells' final regret, the main effect of each
axis per algorithm, the axes ranked by effect size, two-axis interactions,
the cells worth drawing as curves, and the warnings.

Definitions (the report quotes them beside its tables):
- **final value**: a repetition's metric at t = horizon (per-agent regret,
  `agent_regret`, for every family).
- **main effect** of axis `a` for algorithm `g` at value `v`: for each
  repetition r, the mean over `g`'s cells with `a = v` (the other axes
  pooled, each of their combinations counted once) of the final values of
  repetition r; then the mean over repetitions with a 95% percentile
  bootstrap interval over repetitions (2,000 resamples, fixed seed; none
  below 3 repetitions): it respects the support (regret is non-negative)
  where mean +- 1.96 sd / sqrt(R) does not. Pooling inside a repetition first keeps the
  interval honest when repetitions share random numbers across cells
  (linear_sphere's theta* is common to every cell of a repetition).
- **effect size** of `a` for `g`: (largest - smallest main-effect mean) /
  the pooled within-cell standard deviation of `g`'s cells (the square
  root of their degrees-of-freedom-weighted mean variance): how many
  repetition-to-repetition standard deviations of one cell the axis moves
  final regret across its range. An axis's score is its largest effect size
  over the algorithms it applies to, and axes are ranked by score. Chosen
  over variance explained because it reads in the units a user plans
  repetitions in and does not shrink when another axis is strong.
- **flat** axis: for every algorithm it applies to, the 95% intervals of
  every two neighbouring values overlap. Overlap of two 95% intervals is a
  conservative test (with equal standard errors it means p > 0.006 for the
  difference), so "flat" reads "no effect at this many repetitions", not
  "no effect". The ranking also counts the neighbouring steps a paired
  comparison resolves (`paired_steps`: the per-repetition difference,
  valid because repetition r of every cell shares its random numbers),
  which sees consistent effects smaller than the spread between
  repetitions.
- **federated regret ratio** (families whose registry names a baseline,
  e.g. combinatorial's `non_federated`): an algorithm's main-effect mean
  at `v` over the baseline's at `v` (over the baseline's overall mean when
  the axis does not apply to the baseline, as epsilon to a non-private
  one). Repetition r of every cell shares its problem instance, so the
  ratio's interval is the delta method over repetition pairs, with the
  covariance of numerator and denominator (paired; with independent
  repetitions the covariance is near 0 and it is the unpaired interval).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import yaml

from .load import LINEAR_GROWTH_EXPONENT, checked_files, incomplete_runs, scan

#: The accountant's and the job's privacy columns (README, "Privacy columns").
PRIVACY_COLUMNS = (
    "target_epsilon",
    "target_delta",
    "acct_epsilon",
    "acct_mu",
    "acct_epsilon_sums",
    "acct_epsilon_zcdp",
    "acct_rho_zcdp",
    "acct_epsilon_pure",
    "acct_epsilon_basic",
    "acct_delta_basic",
    "paper_claimed_epsilon",
    "acct_noise_multiplier",
    "acct_releases_per_observation",
    "schedule_private",
)
#: Counters that should be zero in a healthy run (warned when not).
FLAG_COLUMNS = ("cholesky_failures", "beta_clamps", "clipped_observations")
#: Fewer repetitions per cell than this is warned.
MIN_REPETITIONS = 10
#: Values spanning more than this factor are drawn on a log axis.
LOG_SPAN = 20.0
Z95 = 1.959963984540054
#: At most this many grid-corner cells per algorithm are drawn as curves.
MAX_CORNERS = 6


@dataclass
class Axis:
    """A swept parameter: its values in grid order (ascending for numbers),
    whether they are numbers, and whether to draw them on a log axis."""

    name: str
    values: list
    numeric: bool
    log: bool


@dataclass
class Study:
    """One job's results, reduced to what the report needs."""

    job: str
    meta: dict[str, str]
    files: list[Path]
    incomplete: str | None
    rows: int
    final: pl.DataFrame
    cells: pl.DataFrame
    axes: list[Axis]
    family: str | None
    baseline: str | None
    lf: pl.LazyFrame
    privacy: dict = field(default_factory=dict)
    #: The family registry the engine wrote (`fedbandits.families`).
    families: dict = field(default_factory=dict)
    metric: str = "agent_regret"
    #: Every parameter column (swept or not).
    params: list = field(default_factory=list)

    def label(self, cell: dict) -> str:
        """A cell as `variant axis=value ...` (its swept values only)."""
        parts = [cell[VARIANT]]
        for a in self.axes:
            v = cell.get(a.name)
            if v is not None:
                parts.append(f"{a.name}={fmt(v)}")
        return " ".join(parts)


def fmt(v) -> str:
    """A parameter value as the job file would write it."""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return "inf" if math.isinf(v) else f"{v:g}"
    return str(v)


#: The column naming a cell's algorithm variant (the unit of comparison).
VARIANT = "variant"


def fams_of(meta: dict[str, str]) -> dict:
    """The family registry a file carries (`fedbandits.families`)."""
    return json.loads(meta.get("families", "{}") or "{}")


def variant_params_of(fams: dict) -> list[str]:
    """The parameters that change what an algorithm is (`variant_params`
    of every family in the registry), e.g. `private`."""
    return sorted({p for f in fams.values() for p in f.get("variant_params", [])})


def with_variants(final: pl.DataFrame, fams: dict) -> pl.DataFrame:
    """`final` with the column `variant`: the algorithm, and in parentheses
    the values of its variant parameters that tell its cells apart
    (`private: false` always reads "non-private"; `private: true` reads
    "private" where the algorithm also has non-private cells), e.g.
    `private_fedlinucb (non-private)`."""
    params = [p for p in variant_params_of(fams) if p in final.columns]
    if not params:
        return final.with_columns(pl.col("algorithm").alias(VARIANT))
    combos = final.select("algorithm", *params).unique()
    rows = []
    for row in combos.iter_rows(named=True):
        mine = combos.filter(pl.col("algorithm") == row["algorithm"])
        parts = []
        for p in params:
            v = row[p]
            if v is None:
                continue
            varies = mine[p].drop_nulls().n_unique() > 1
            if p == "private":
                if v is False:
                    parts.append("non-private")
                elif varies:
                    parts.append("private")
            elif varies:
                parts.append(f"{p}={fmt(v)}")
        rows.append({**row, VARIANT: row["algorithm"] + (f" ({', '.join(parts)})" if parts else "")})
    labels = pl.DataFrame(rows, schema={**combos.schema, VARIANT: pl.String})
    return final.join(labels, on=["algorithm", *params], how="left", nulls_equal=True)


def _metadata(f: Path) -> dict[str, str]:
    md = pq.read_metadata(f).metadata or {}
    return {k.decode()[len("fedbandits.") :]: v.decode() for k, v in md.items() if k.startswith(b"fedbandits.")}


def grid_keys(job_yaml: str) -> list[str]:
    """The grid axes the job file declares (`grid:` keys, in order), and
    `environment` when it lists several; [] when the text does not parse."""
    try:
        doc = yaml.safe_load(job_yaml)
    except yaml.YAMLError:
        return []
    if not isinstance(doc, dict):
        return []
    keys = [str(k) for k in (doc.get("grid") or {})] if isinstance(doc.get("grid"), dict) else []
    env = doc.get("environment")
    if isinstance(env, list) and len(env) > 1:
        keys.append("environment")
    return keys


def _param_columns(schema: list[str]) -> list[str]:
    """The parameter columns: those between `horizon` and `repetition`."""
    return schema[schema.index("horizon") + 1 : schema.index("repetition")]


def _partition(values: list) -> list[int]:
    """Each value's index of first appearance: equal lists for two columns
    that split the rows alike."""
    first: dict = {}
    return [first.setdefault(v, len(first)) for v in values]


def _aliases_dropped(cells: pl.DataFrame, cols: list[str]) -> list[str]:
    """`cols` without those that split the cells exactly as an earlier one
    does (a default derived from another parameter, as s_bound from d)."""
    kept: list[str] = []
    for c in cols:
        part = _partition(cells[c].to_list())
        if all(_partition(cells[k].to_list()) != part for k in kept):
            kept.append(c)
    return kept


def swept_axes(cells: pl.DataFrame, declared: list[str], params: list[str]) -> list[Axis]:
    """The axes: the declared grid keys that take several values among the
    cells (all varying parameter columns, less aliases, when the job text
    declares none, as in files of another tool)."""
    varying = [c for c in ["environment", *params] if c in cells.columns and cells[c].drop_nulls().n_unique() > 1]
    names = [k for k in declared if k in varying] if declared else _aliases_dropped(cells, varying)
    axes = []
    for name in names:
        col = cells.select(name, "cell_index").drop_nulls(name)
        numeric = col.schema[name].is_numeric()
        if numeric:
            values = sorted(col[name].unique().to_list())
        else:
            values = col.group_by(name).agg(pl.col("cell_index").min()).sort("cell_index")[name].to_list()
        finite = [v for v in values if numeric and math.isfinite(v)]
        log = bool(finite) and min(finite) > 0 and max(finite) / min(finite) > LOG_SPAN
        axes.append(Axis(name, values, numeric, log))
    return axes


def _cell_table(final: pl.DataFrame, metric: str, keys: list[str]) -> pl.DataFrame:
    flags = [c for c in FLAG_COLUMNS if c in final.columns]
    growth = {}
    if "regret_exponent" in final.columns:
        growth = {
            "linear_growth": (pl.col("regret_exponent") >= LINEAR_GROWTH_EXPONENT).sum(),
            "max_exponent": pl.col("regret_exponent").max(),
        }
    return (
        final.group_by(keys)
        .agg(
            n=pl.len(),
            mean=pl.col(metric).mean(),
            sd=pl.col(metric).std(),
            **{f: pl.col(f).cast(pl.Float64).mean() for f in flags},
            **growth,
        )
        .sort("cell_index")
    )


def load_studies(path: str | Path) -> list[Study]:
    """Every job under `path` (a job's results directory, a root of several,
    or a file), read lazily: the final rows only, with incomplete runs read
    as they are and their reason kept for the warnings."""
    files, _ = checked_files(path, allow_partial=True)
    problems = incomplete_runs(path)
    lf = scan(path, allow_partial=True)
    schema = lf.collect_schema().names()
    params = _param_columns(schema)
    by_job: dict[str, list[Path]] = {}
    for f in files:
        by_job.setdefault(_metadata(f).get("job_name", f.parent.name), []).append(f)
    studies = []
    for job, fs in sorted(by_job.items()):
        studies.append(_study(lf.filter(pl.col("job") == job), job, fs, problems, schema, params))
    return studies


def _study(lf, job, files, problems, schema, params) -> Study:
    meta = _metadata(files[0])
    keep = [c for c in schema if c not in ("group_regret", "messages", "sync_rounds")]
    final = lf.filter(pl.col("t") == pl.col("horizon")).select(keep).collect()
    rows = lf.select(pl.len()).collect().item()
    final = with_variants(final, fams_of(meta))
    keys = ["cell_id", "cell_index", "algorithm", VARIANT, "environment", *params]
    cell_keys = final.select(keys).unique()
    variant_params = variant_params_of(fams_of(meta))
    axes = swept_axes(cell_keys, [k for k in grid_keys(meta.get("job_yaml", "")) if k not in variant_params], [p for p in params if p not in variant_params])
    cells = _cell_table(
        final,
        "agent_regret",
        ["cell_id", "cell_index", "algorithm", VARIANT, "environment", *[a.name for a in axes if a.name != "environment"]],
    )
    fams = fams_of(meta)
    algos = set(cells["algorithm"].to_list())
    family = next((n for n, f in fams.items() if algos & set(f.get("algorithms", []))), None)
    baseline = fams.get(family, {}).get("baseline") if family else None
    if baseline not in set(cells[VARIANT].to_list()) or len(algos) < 2:
        baseline = None
    reason = next((why for d, why in problems.items() if d in {f.parent for f in files} or d in files), None)
    privacy = json.loads(meta.get("privacy", "{}"))
    return Study(job, meta, files, reason, rows, final, cells, axes, family, baseline, lf, privacy, fams, params=params)


#: Resamples of the bootstrap intervals of a mean over repetitions.
BOOTSTRAP = 2000
#: Fewer repetitions than this get no interval (said instead of drawn).
MIN_INTERVAL_REPS = 3


def bootstrap_interval(values) -> tuple[float | None, float | None]:
    """The 95% percentile-bootstrap interval of the mean of `values` (one
    per repetition; resampled with a fixed seed, so a report is
    reproducible). Chosen over mean +- 1.96 se because it stays inside the
    support: regret is non-negative and so is every bound here, where the
    normal interval of two skewed repetitions reached -20,000. None below
    MIN_INTERVAL_REPS repetitions."""
    x = np.asarray(values, dtype=float)
    if x.size < MIN_INTERVAL_REPS:
        return None, None
    rng = np.random.default_rng(20261126)
    means = x[rng.integers(0, x.size, size=(BOOTSTRAP, x.size))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def pooled(final: pl.DataFrame, by: list[str], metric: str) -> pl.DataFrame:
    """Per `by` group: the mean over repetitions of the per-repetition mean
    over the group's cells, with sd, reps, se, the bootstrap interval lo,
    hi (null below 3 repetitions) and the cells pooled."""
    per_rep = final.group_by([*by, "repetition"]).agg(v=pl.col(metric).mean())
    stats = per_rep.group_by(by).agg(mean=pl.col("v").mean(), sd=pl.col("v").std(), reps=pl.len(), _v=pl.col("v").sort_by("repetition"))
    bounds = [bootstrap_interval(v) for v in stats["_v"].to_list()]
    stats = stats.drop("_v").with_columns(
        se=pl.col("sd") / pl.col("reps").sqrt(),
        lo=pl.Series([b[0] for b in bounds], dtype=pl.Float64),
        hi=pl.Series([b[1] for b in bounds], dtype=pl.Float64),
    )
    ncells = final.group_by(by).agg(cells=pl.col("cell_id").n_unique())
    return stats.join(ncells, on=by, nulls_equal=True)


def _varies_within(study: Study, axis: Axis) -> set[str]:
    """The variants whose cells take two or more values of `axis`."""
    sub = study.final.filter(pl.col(axis.name).is_not_null())
    counts = sub.group_by(VARIANT).agg(n=pl.col(axis.name).n_unique())
    return set(counts.filter(pl.col("n") > 1)[VARIANT].to_list())


def main_effect(study: Study, axis: Axis) -> pl.DataFrame:
    """The main effect of `axis` per variant it varies within: variant,
    value, mean, sd, reps, se, lo, hi, cells; in the axis's value order."""
    sub = study.final.filter(pl.col(axis.name).is_not_null() & pl.col(VARIANT).is_in(list(_varies_within(study, axis))))
    eff = pooled(sub, [VARIANT, axis.name], study.metric)
    order = pl.DataFrame({axis.name: axis.values, "_order": range(len(axis.values))}, schema_overrides={axis.name: sub.schema[axis.name]})
    return eff.join(order, on=axis.name).sort([VARIANT, "_order"]).drop("_order").rename({axis.name: "value"})


def reference_levels(study: Study, axis: Axis) -> pl.DataFrame:
    """The variants `axis` does not vary within (null in their cells, or
    one value: `fixed`), each pooled over its cells: the levels the axis's
    lines are compared with."""
    varies = list(_varies_within(study, axis))
    rest = study.final.filter(~pl.col(VARIANT).is_in(varies))
    fixed = rest.group_by(VARIANT).agg(fixed=pl.col(axis.name).drop_nulls().first())
    # Sorted: a group-by's order is not stable from run to run.
    return pooled(rest, [VARIANT], study.metric).join(fixed, on=VARIANT).sort(VARIANT)


def within_sd(study: Study, algorithm: str, axis: Axis) -> float:
    """The pooled within-cell sd of `algorithm`'s cells `axis` applies to."""
    c = study.cells.filter((pl.col(VARIANT) == algorithm) & pl.col(axis.name).is_not_null() & (pl.col("n") > 1))
    dof = (c["n"] - 1).sum()
    return math.sqrt(((c["n"] - 1) * c["sd"] ** 2).sum() / dof) if dof else float("nan")


def _overlap_everywhere(part: pl.DataFrame) -> bool | None:
    """Whether the 95% intervals of every two neighbouring values overlap;
    None when an interval is undefined (fewer than 3 repetitions)."""
    lo, hi = part["lo"].to_list(), part["hi"].to_list()
    if any(v is None or math.isnan(v) for v in lo + hi):
        return None
    return all(lo[i + 1] <= hi[i] and lo[i] <= hi[i + 1] for i in range(len(lo) - 1))


def paired_steps(study: Study, axis: Axis) -> pl.DataFrame:
    """Neighbouring values of `axis` compared within repetitions: per
    algorithm and step (value i to i + 1), the mean over repetitions of the
    difference of the per-repetition pooled means, its 95% interval, and
    whether the interval excludes 0. Cells share random numbers within a
    repetition, so this resolves consistent differences that the
    repetition-to-repetition spread hides from the unpaired intervals."""
    sub = study.final.filter(pl.col(axis.name).is_not_null())
    per_rep = sub.group_by([VARIANT, axis.name, "repetition"]).agg(v=pl.col(study.metric).mean())
    rows = []
    for (algo,), part in per_rep.group_by([VARIANT], maintain_order=True):
        used = [v for v in axis.values if v in set(part[axis.name].to_list())]
        for a, b in zip(used, used[1:]):
            lo = part.filter(pl.col(axis.name) == a).select("repetition", va="v")
            hi = part.filter(pl.col(axis.name) == b).select("repetition", vb="v")
            d = hi.join(lo, on="repetition").select(pl.col("vb") - pl.col("va"))
            n, mean, sd = d.height, d.to_series().mean(), d.to_series().std()
            half = Z95 * sd / math.sqrt(n) if n > 1 and sd is not None else float("nan")
            rows.append({VARIANT: algo, "from": fmt(a), "to": fmt(b), "diff": mean, "half": half, "resolved": bool(abs(mean) > half)})
    schema = {VARIANT: pl.String, "from": pl.String, "to": pl.String, "diff": pl.Float64, "half": pl.Float64, "resolved": pl.Boolean}
    return pl.DataFrame(rows, schema=schema)


def ranking(study: Study, effects: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per (axis, variant it varies within), highest score first:
    axis, variant, values, score (effect size), range of means (regret
    units), whether the axis is flat for that variant (None: undetermined,
    an interval is undefined with one repetition), and how many
    neighbouring steps the paired comparison resolves ("k of n")."""
    rows = []
    nan = float("nan")
    for axis in study.axes:
        steps = paired_steps(study, axis)
        for (variant,), part in effects[axis.name].group_by([VARIANT], maintain_order=True):
            if part.height < 2:
                continue
            rng = part["mean"].max() - part["mean"].min()
            sw = within_sd(study, variant, axis)
            # No within-cell sd (one repetition per cell): no effect size.
            size = nan if math.isnan(sw) else rng / sw if sw > 0 else 0.0 if rng == 0 else float("inf")
            mine = steps.filter(pl.col(VARIANT) == variant)
            rows.append(
                {
                    "axis": axis.name,
                    VARIANT: variant,
                    "values": part.height,
                    "score": size,
                    "range": rng,
                    "flat": _overlap_everywhere(part),
                    "paired": f"{mine['resolved'].sum()} of {mine.height}",
                }
            )
    schema = {
        "axis": pl.String,
        VARIANT: pl.String,
        "values": pl.Int64,
        "score": pl.Float64,
        "range": pl.Float64,
        "flat": pl.Boolean,
        "paired": pl.String,
    }
    df = pl.DataFrame(rows, schema=schema)
    # No score (one repetition per cell) ranks last, by the range of means.
    df = df.with_columns(pl.col("score").fill_nan(None), pl.col("range").fill_nan(None))
    return df.sort(["score", "range"], descending=True, nulls_last=True) if df.height else df


def _paired_ratio(paired: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """mean(n) / mean(d) per `by` group of per-repetition pairs (n, d),
    with the delta-method interval that counts their covariance."""
    stats = paired.group_by(by).agg(
        mn=pl.col("n").mean(), md=pl.col("d").mean(), vn=pl.col("n").var(), vd=pl.col("d").var(), c=pl.cov("n", "d"), reps=pl.len()
    )
    frr = pl.col("mn") / pl.col("md")
    var = (pl.col("vn") - 2 * frr * pl.col("c") + frr**2 * pl.col("vd")).clip(lower_bound=0.0)
    out = stats.with_columns(frr=frr, frr_se=(var / pl.col("reps")).sqrt() / pl.col("md"))
    return out.with_columns(lo=pl.col("frr") - Z95 * pl.col("frr_se"), hi=pl.col("frr") + Z95 * pl.col("frr_se"))


def frr_reference(study: Study, axis: Axis) -> pl.DataFrame:
    """The federated regret ratio of the non-baseline algorithms `axis`
    does not apply to, each pooled over its cells (against the baseline's
    overall mean): the levels the ratio's lines are compared with."""
    final, metric = study.final, study.metric
    rest = final.filter((pl.col(VARIANT) != study.baseline) & pl.col(axis.name).is_null())
    num = rest.group_by([VARIANT, "repetition"]).agg(n=pl.col(metric).mean())
    den = final.filter(pl.col(VARIANT) == study.baseline).group_by("repetition").agg(d=pl.col(metric).mean())
    out = _paired_ratio(num.join(den, on="repetition"), [VARIANT])
    cells = rest.group_by(VARIANT).agg(cells=pl.col("cell_id").n_unique())
    return out.join(cells, on=VARIANT).sort(VARIANT).select(VARIANT, "frr", "lo", "hi", "reps", "cells")


def frr_effect(study: Study, axis: Axis, effect: pl.DataFrame) -> pl.DataFrame | None:
    """The federated regret ratio against `axis` per non-baseline algorithm
    (module doc), or None when the family has no baseline in these results.
    Columns: algorithm, value, frr, frr_se, lo, hi, reps, cells."""
    if study.baseline is None:
        return None
    final, a, metric = study.final, axis.name, study.metric
    applies = final.filter((pl.col(VARIANT) == study.baseline) & pl.col(a).is_not_null()).height > 0
    num = (
        final.filter((pl.col(VARIANT) != study.baseline) & pl.col(a).is_not_null())
        .group_by([VARIANT, a, "repetition"])
        .agg(n=pl.col(metric).mean())
    )
    keys = [a, "repetition"] if applies else ["repetition"]
    den = final.filter(pl.col(VARIANT) == study.baseline).group_by(keys).agg(d=pl.col(metric).mean())
    out = _paired_ratio(num.join(den, on=keys), [VARIANT, a]).rename({a: "value"})
    cells = effect.select(VARIANT, "value", "cells")
    ordered = cells.join(out, on=[VARIANT, "value"], how="inner", maintain_order="left")
    return ordered.select(VARIANT, "value", "frr", "frr_se", "lo", "hi", "reps", "cells")


def interaction(study: Study, a: Axis, b: Axis) -> dict[str, pl.DataFrame]:
    """Per algorithm both axes apply to (with two values or more each): the
    mean final value per (a, b) pair, the other axes pooled; columns a, b,
    mean, cells."""
    out = {}
    sub = study.final.filter(pl.col(a.name).is_not_null() & pl.col(b.name).is_not_null())
    for (algo,), part in sub.group_by([VARIANT], maintain_order=True):
        if part[a.name].n_unique() < 2 or part[b.name].n_unique() < 2:
            continue
        out[algo] = part.group_by([a.name, b.name]).agg(mean=pl.col(study.metric).mean(), cells=pl.col("cell_id").n_unique())
    return dict(sorted(out.items()))


def curve_cells(study: Study) -> dict[str, list[tuple[str, str]]]:
    """Per algorithm, the cells to draw as curves, each with its role: the
    best and the worst (lowest and highest mean final value) and those at
    the grid's corners (every swept value it uses at one end of its axis),
    at most MAX_CORNERS of them, in grid order."""
    out: dict[str, list[tuple[str, str]]] = {}
    for (algo,), part in study.cells.group_by([VARIANT], maintain_order=True):
        part = part.sort("cell_index")
        chosen = [(part.sort("mean")["cell_id"][0], "best")]
        if part.height > 1:
            chosen.append((part.sort("mean")["cell_id"][-1], "worst"))
        ends = {}
        for a in study.axes:
            used = set(part[a.name].drop_nulls().to_list()) if a.name in part.columns else set()
            # An infinite value (epsilon = inf: no privacy) is a level of
            # its own, not a corner of the range.
            vals = [v for v in a.values if v in used and not (a.numeric and math.isinf(v))]
            if len(vals) > 1:
                ends[a.name] = {vals[0], vals[-1]}
        corners = [r["cell_id"] for r in part.iter_rows(named=True) if ends and all(r[k] in e for k, e in ends.items())]
        taken = {c for c, _ in chosen}
        chosen += [(c, "corner") for c in corners if c not in taken][:MAX_CORNERS]
        out[algo] = chosen
    return dict(sorted(out.items()))


def warnings(study: Study, ranked: pl.DataFrame) -> list[str]:
    """What a reader must know before trusting the figures: an incomplete
    run, cells whose environment is misspecified for their algorithm, cells
    with a repetition whose regret grows linearly, cells with few
    repetitions, non-zero health counters, flat axes."""
    out = []
    if study.incomplete:
        out.append(f"Incomplete results (read as they are): {study.incomplete}")
    out += model_warnings(study) + growth_warnings(study)
    few = study.cells.filter(pl.col("n") < MIN_REPETITIONS)
    if few.height:
        examples = "; ".join(f"{study.label(r)} ({r['n']})" for r in few.head(3).iter_rows(named=True))
        out.append(
            f"{few.height} of {study.cells.height} cells have fewer than {MIN_REPETITIONS} repetitions "
            f"(min {few['n'].min()}): their intervals are rough. E.g. {examples}"
        )
    for col in FLAG_COLUMNS:
        if col not in study.cells.columns:
            continue
        hit = study.cells.filter(pl.col(col) > 0)
        if hit.height:
            examples = "; ".join(f"{study.label(r)}: {r[col]:.4g}" for r in hit.sort(col, descending=True).head(3).iter_rows(named=True))
            out.append(
                f"`{col}` is non-zero in {hit.height} of {study.cells.height} cells (mean per repetition at t = T; largest: {examples})"
            )
    reps = study.cells["n"].min() if study.cells.height else 0
    for row in ranked.filter(pl.col("flat")).iter_rows(named=True):
        note = (
            f"Axis `{row['axis']}` shows no effect for {row[VARIANT]} at this many repetitions ({reps} per cell at least): "
            f"the 95% intervals of every two neighbouring values overlap"
        )
        if not row["paired"].startswith("0 "):
            note += (
                f". Paired by repetition, {row['paired']} neighbouring steps differ (cells share random numbers within a "
                f"repetition): a consistent effect smaller than the spread between repetitions"
            )
        out.append(note)
    return out


#: Cells named in full in a warning (the rest counted).
MAX_WARNED_CELLS = 20


def _cell_list(study: Study, rows: list[dict], note) -> str:
    shown = "; ".join(f"{study.label(r)} ({note(r)})" for r in rows[:MAX_WARNED_CELLS])
    more = len(rows) - MAX_WARNED_CELLS
    return shown + (f"; and {more} more" if more > 0 else "")


def growth_warnings(study: Study) -> list[str]:
    """Cells with a repetition whose `regret_exponent` (the slope of log
    regret against log t over the last decade of the horizon) is at least
    0.9: learning has stalled there, and the cell's mean regret grows with
    the horizon."""
    if "linear_growth" not in study.cells.columns:
        return []
    hit = study.cells.filter(pl.col("linear_growth") > 0)
    if not hit.height:
        return []
    rows = list(hit.sort("cell_index").iter_rows(named=True))
    cells = _cell_list(study, rows, lambda r: f"{r['linear_growth']} of {r['n']} repetitions, largest exponent {r['max_exponent']:.2f}")
    text = (
        f"Regret grows linearly over the last decade of the horizon (`regret_exponent` >= {LINEAR_GROWTH_EXPONENT}) "
        f"in {hit.height} of {study.cells.height} cells: {cells}. A repetition there has stopped learning; its cell's "
        f"mean and sd say more about that repetition than about the algorithm"
    )
    return [text]


def model_warnings(study: Study) -> list[str]:
    """Cells whose environment the engine found misspecified for their
    algorithm's model (`fedbandits.model`, written since semantics 10):
    the key, why and the fix."""
    model = json.loads(study.meta.get("model", "{}") or "{}")
    cells = model.get("cells", [])
    if not cells:
        return []
    rows = {r["cell_id"]: r for r in study.cells.iter_rows(named=True)}
    by_why: dict[tuple, list[str]] = {}
    for c in cells:
        label = study.label(rows[c["cell_id"]]) if c["cell_id"] in rows else c["label"]
        by_why.setdefault((c["key"], c["why"], c["fix"]), []).append(label)
    out = []
    for (key, why, fix), labels in by_why.items():
        shown = "; ".join(labels[:MAX_WARNED_CELLS]) + (
            f"; and {len(labels) - MAX_WARNED_CELLS} more" if len(labels) > MAX_WARNED_CELLS else ""
        )
        out.append(
            f"Misspecified environment in {len(labels)} cell(s) (`{key}`): {why}. Regret can grow linearly at long "
            f"horizons. Fix: {fix}. Cells: {shown}"
        )
    return out

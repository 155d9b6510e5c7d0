"""The statistics of a sensitivity report (`fedbandits_analysis.report`):
one job's swept axes, its cells' final regret, the main effect of each
axis per algorithm variant, the axes ranked, the federated regret ratio,
and the cells worth drawing as curves. `stats.py` defines the scales and
intervals; `contrasts.py` the interactions and the cost of privacy;
`report_warnings.py` the warnings.

Definitions (the report quotes them beside its tables):
- **final value**: a repetition's regret per agent at t = horizon, the
  family registry's `growth_regret` over m (`regret_of`): `agent_regret`;
  for the combinatorial family `regret_after_exploration` / m, its
  exploration phase (the same for every algorithm, about 98% of the total)
  reported apart.
- **scale** (stats.py): `ratio` by default, where every final value is
  positive: levels are geometric means, contrasts ratios; `additive` on
  request (`--scale additive`) or where a final value is 0.
- **per-repetition level** of variant `g` at value `v` of axis `a`: the
  mean, on the working scale (ln on the ratio scale), of the final values
  of repetition r over `g`'s cells with `a = v` (the other axes pooled,
  each of their combinations counted once).
- **main effect**: the level's mean over repetitions back-transformed (a
  geometric mean on the ratio scale) with its 95% interval (Student t on
  the working scale; on the additive scale from 10 repetitions a
  percentile bootstrap, 2,000 resamples with a fixed seed, which keeps a
  mean of skewed regrets inside the support, and Student t below 10, where
  the bootstrap's few distinct resamples make it too narrow:
  `mean_interval`), and the median over repetitions beside it.
- **paired contrast** of two values of an axis: the per-repetition levels'
  difference on the working scale, taken within each repetition
  (repetition r of every cell shares its random numbers: linear_sphere's
  theta* is common to every cell of a repetition), with its Student-t
  interval: a ratio (x4: four times the regret) on the ratio scale.
- **flat** axis for a variant: every two of its values' paired contrast
  has an interval that includes no effect (1, or 0 additive). This is the
  headline verdict: consistent effects smaller than the spread between
  repetitions (one hard theta* dominating the means) are seen.
- **score** of an axis for a variant: on the ratio scale its fold range,
  the largest over the smallest main-effect level (x4 moves regret
  fourfold across the grid); on the additive scale the range of levels
  in units of the variant's pooled within-cell sd. Axes are ranked
  resolved first (not flat), then by score.
- **federated regret ratio** (families whose registry names a baseline:
  linear `independent`, combinatorial `non_federated`): an algorithm's
  level at `v` over the baseline's at `v` (the baseline's overall level
  when the axis does not apply to it, as epsilon to a non-private one),
  paired by repetition: on the ratio scale the geometric mean of the
  per-repetition ratios with its Student-t interval; on the additive scale
  the ratio of means with the delta-method standard error counting their
  covariance, its interval taken on the log scale (never negative).
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

from . import stats
from .load import LINEAR_GROWTH_EXPONENT, checked_files, incomplete_runs, scan

#: The accountant's and the job's privacy columns (analysis/PRIVACY.md).
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
    #: The scale the study is read on (stats.SCALES) and why.
    scale: str = "ratio"
    scale_why: str = "the default"

    def regret_word(self) -> str:
        """What the final value is, in words: `regret per agent`, or after
        the exploration phase where the family reads that (module doc)."""
        algos = set(self.final["algorithm"].to_list()) if "algorithm" in self.final.columns else set()
        kinds = {f.get("growth_regret", "group_regret") for f in self.families.values() if algos & set(f.get("algorithms", []))}
        if self.metric != REGRET or kinds <= {"group_regret"}:
            return "regret per agent"
        if kinds == {"regret_after_exploration"}:
            return "regret per agent after exploration"
        return "regret per agent (combinatorial: after exploration)"

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
    """The parameter columns: `horizon` (a grid axis when a job sweeps it)
    and those between it and `repetition`."""
    return schema[schema.index("horizon") : schema.index("repetition")]


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
    """One row per cell: repetitions `n`, `mean`, `sd`, `median` of the
    final value, the health counters' means, the linear-growth count, and
    (where the columns exist) `clipped_share`, the clipped observations
    over the observations made (m agents x horizon rounds), and the mean
    final `sync_rounds` and `messages`."""
    flags = [c for c in FLAG_COLUMNS if c in final.columns]
    extra = {}
    if "regret_exponent" in final.columns:
        extra["linear_growth"] = (pl.col("regret_exponent") >= LINEAR_GROWTH_EXPONENT).sum()
        extra["max_exponent"] = pl.col("regret_exponent").max()
    if "clipped_observations" in final.columns and "m" in final.columns:
        observations = pl.col("m").cast(pl.Float64) * pl.col("horizon").cast(pl.Float64)
        extra["clipped_share"] = (pl.col("clipped_observations").cast(pl.Float64) / observations).mean()
    for c in ("sync_rounds", "messages"):
        if c in final.columns:
            extra[c] = pl.col(c).cast(pl.Float64).mean()
    return (
        final.group_by(keys)
        .agg(
            n=pl.len(),
            mean=pl.col(metric).mean(),
            sd=pl.col(metric).std(),
            median=pl.col(metric).median(),
            **{f: pl.col(f).cast(pl.Float64).mean() for f in flags},
            **extra,
        )
        .sort("cell_index")
    )


def load_studies(path: str | Path, scale: str = "ratio") -> list[Study]:
    """Every job under `path` (a job's results directory, a root of several,
    or a file), read lazily: the final rows only, with incomplete runs read
    as they are and their reason kept for the warnings; each read on
    `scale` (stats.SCALES) where its values allow."""
    if scale not in stats.SCALES:
        raise ValueError(f"scale must be one of {', '.join(stats.SCALES)}, not {scale!r}")
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
        studies.append(_study(lf.filter(pl.col("job") == job), job, fs, problems, schema, params, scale))
    return studies


#: The column every section reads: each row's family's regret per agent
#: (`regret_of`).
REGRET = "regret_per_agent"


def regret_of(fams: dict, schema: list[str]) -> pl.Expr:
    """Each row's family's regret per agent: the family registry's
    `growth_regret` over m (`group_regret` / m is `agent_regret`; the
    combinatorial family's `regret_after_exploration` / m counts the rounds
    after its exploration phase, which costs every algorithm alike and is
    about 98% of its total regret)."""
    expr = pl.col("agent_regret")
    for f in fams.values():
        column = f.get("growth_regret", "group_regret")
        if column != "group_regret" and column in schema and f.get("algorithms"):
            per_agent = pl.col(column) / pl.col("m").cast(pl.Float64)
            expr = pl.when(pl.col("algorithm").is_in(f["algorithms"])).then(per_agent).otherwise(expr)
    return expr.alias(REGRET)


def regret_names(fams: dict, algorithms: set) -> list[str]:
    """What the report's final value is for these algorithms' families,
    as `column` descriptions."""
    out = []
    for name, f in sorted(fams.items()):
        if not algorithms & set(f.get("algorithms", [])):
            continue
        column = f.get("growth_regret", "group_regret")
        if column == "group_regret":
            out.append(f"{name}: `agent_regret` (cumulative regret per agent)")
        else:
            out.append(f"{name}: `{column}` / m (regret per agent after the exploration phase; the exploration cost apart)")
    return out


def _study(lf, job, files, problems, schema, params, scale) -> Study:
    meta = _metadata(files[0])
    lf = lf.with_columns(regret_of(fams_of(meta), schema))
    keep = [c for c in schema if c != "group_regret"] + [REGRET]
    final = lf.filter(pl.col("t") == pl.col("horizon")).select(keep).collect()
    rows = lf.select(pl.len()).collect().item()
    final = with_variants(final, fams_of(meta))
    keys = ["cell_id", "cell_index", "algorithm", VARIANT, "environment", *params]
    cell_keys = final.select(keys).unique()
    variant_params = variant_params_of(fams_of(meta))
    axes = swept_axes(
        cell_keys,
        [k for k in grid_keys(meta.get("job_yaml", "")) if k not in variant_params],
        [p for p in params if p not in variant_params],
    )
    cell_cols = [a.name for a in axes if a.name != "environment"]
    cells = _cell_table(final, REGRET, ["cell_id", "cell_index", "algorithm", VARIANT, "environment", *cell_cols])
    fams = fams_of(meta)
    algos = set(cells["algorithm"].to_list())
    family = next((n for n, f in fams.items() if algos & set(f.get("algorithms", []))), None)
    baseline = fams.get(family, {}).get("baseline") if family else None
    if baseline not in set(cells[VARIANT].to_list()) or len(algos) < 2:
        baseline = None
    reason = next((why for d, why in problems.items() if d in {f.parent for f in files} or d in files), None)
    privacy = json.loads(meta.get("privacy", "{}"))
    why = "the default" if scale == "ratio" else "requested (--scale additive)"
    if scale == "ratio" and not stats.positive(final[REGRET]):
        bad = final.filter(~(pl.col(REGRET) > 0)).height
        scale, why = "additive", f"{bad} final value(s) are 0 or below, which the ratio scale cannot read"
    return Study(
        job,
        meta,
        files,
        reason,
        rows,
        final,
        cells,
        axes,
        family,
        baseline,
        lf,
        privacy,
        fams,
        metric=REGRET,
        params=params,
        scale=scale,
        scale_why=why,
    )


#: Resamples of the bootstrap intervals of a mean over repetitions.
BOOTSTRAP = 2000
#: Fewer repetitions than this get no bootstrap interval (said instead of drawn).
MIN_INTERVAL_REPS = 3


def bootstrap_interval(values) -> tuple[float | None, float | None]:
    """The 95% percentile-bootstrap interval of the mean of `values` (one
    per repetition; resampled with a fixed seed, so a report is
    reproducible). Chosen over mean +- 1.96 se on the additive scale
    because it stays inside the support: regret is non-negative and so is
    every bound here, where the normal interval of two skewed repetitions
    reached -20,000. None below MIN_INTERVAL_REPS repetitions."""
    x = np.asarray(values, dtype=float)
    if x.size < MIN_INTERVAL_REPS:
        return None, None
    rng = np.random.default_rng(20261126)
    means = x[rng.integers(0, x.size, size=(BOOTSTRAP, x.size))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


#: Below this many repetitions a mean's interval is Student t, not a
#: percentile bootstrap: with 4 paired repetitions the bootstrap's 256
#: resamples give an interval too narrow (it excludes 0 where t does not).
MIN_BOOTSTRAP_REPS = 10


def mean_interval(values) -> tuple[float | None, float | None]:
    """The 95% interval of the mean of `values` (one per repetition): a
    Student-t interval below MIN_BOOTSTRAP_REPS repetitions, the percentile
    bootstrap (`bootstrap_interval`) from there on; None below
    MIN_INTERVAL_REPS repetitions."""
    x = np.asarray(values, dtype=float)
    if x.size < MIN_INTERVAL_REPS:
        return None, None
    if x.size < MIN_BOOTSTRAP_REPS:
        _, lo, hi = stats.mean_interval(x)
        return float(lo), float(hi)
    return bootstrap_interval(x)


def working(metric: str, scale: str) -> pl.Expr:
    """`metric` on the working scale: ln on the ratio scale."""
    return pl.col(metric).log() if scale == "ratio" else pl.col(metric)


def per_repetition(final: pl.DataFrame, by: list[str], metric: str, scale: str) -> pl.DataFrame:
    """Per (`by`, repetition): `v`, the mean of `metric` on the working
    scale over the group's cells in that repetition."""
    return final.group_by([*by, "repetition"]).agg(v=working(metric, scale).mean())


def pooled(final: pl.DataFrame, by: list[str], metric: str, scale: str = "additive") -> pl.DataFrame:
    """Per `by` group, over repetitions of the per-repetition levels: mean
    (a geometric mean on the ratio scale), lo, hi (95%: Student t on the
    log scale; bootstrap on the additive one, null below 3 repetitions),
    median, sd and se (working scale), reps, and the cells pooled."""
    per_rep = per_repetition(final, by, metric, scale)
    stats_ = per_rep.group_by(by).agg(sd=pl.col("v").std(), reps=pl.len(), _v=pl.col("v").sort_by("repetition"))
    rows = []
    for v in stats_["_v"].to_list():
        lo: float | None
        hi: float | None
        if scale == "ratio":
            center, lo, hi, med = stats.level_of(v, scale)
            lo, hi = (None, None) if math.isnan(lo) else (lo, hi)
        else:
            center, med = float(np.mean(v)), float(np.median(v))
            lo, hi = mean_interval(v)
        rows.append((center, lo, hi, med))
    stats_ = stats_.drop("_v").with_columns(
        mean=pl.Series([r[0] for r in rows], dtype=pl.Float64),
        lo=pl.Series([r[1] for r in rows], dtype=pl.Float64),
        hi=pl.Series([r[2] for r in rows], dtype=pl.Float64),
        median=pl.Series([r[3] for r in rows], dtype=pl.Float64),
        se=pl.col("sd") / pl.col("reps").sqrt(),
    )
    ncells = final.group_by(by).agg(cells=pl.col("cell_id").n_unique())
    return stats_.join(ncells, on=by, nulls_equal=True)


def _varies_within(study: Study, axis: Axis) -> set[str]:
    """The variants whose cells take two or more values of `axis`."""
    sub = study.final.filter(pl.col(axis.name).is_not_null())
    counts = sub.group_by(VARIANT).agg(n=pl.col(axis.name).n_unique())
    return set(counts.filter(pl.col("n") > 1)[VARIANT].to_list())


def main_effect(study: Study, axis: Axis) -> pl.DataFrame:
    """The main effect of `axis` per variant it varies within: variant,
    value, mean (a geometric mean on the ratio scale), lo, hi, median, sd,
    reps, se, cells; in the axis's value order."""
    sub = study.final.filter(pl.col(axis.name).is_not_null() & pl.col(VARIANT).is_in(list(_varies_within(study, axis))))
    eff = pooled(sub, [VARIANT, axis.name], study.metric, study.scale)
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
    return pooled(rest, [VARIANT], study.metric, study.scale).join(fixed, on=VARIANT).sort(VARIANT)


def within_sd(study: Study, algorithm: str, axis: Axis) -> float:
    """The pooled within-cell sd of `algorithm`'s cells `axis` applies to."""
    c = study.cells.filter((pl.col(VARIANT) == algorithm) & pl.col(axis.name).is_not_null() & (pl.col("n") > 1))
    dof = stats.scalar((c["n"] - 1).sum())
    return math.sqrt(stats.scalar(((c["n"] - 1) * c["sd"] ** 2).sum()) / dof) if dof else float("nan")


def level_contrasts(part: pl.DataFrame, column: str, values: list, scale: str) -> dict[tuple, stats.Estimate]:
    """Every two values a < b (in `values`' order) of `column` in `part`
    (per-repetition levels `v`): the paired contrast b against a."""
    by_value = {v: part.filter(pl.col(column) == v).select("repetition", "v") for v in values}
    out = {}
    for i, a in enumerate(values):
        for b in values[i + 1 :]:
            d = by_value[b].join(by_value[a], on="repetition", suffix="_a").select(pl.col("v") - pl.col("v_a")).to_series()
            out[(a, b)] = stats.contrast(d.to_numpy(), scale)
    return out


def _levels(study: Study, axis: Axis) -> pl.DataFrame:
    sub = study.final.filter(pl.col(axis.name).is_not_null())
    return per_repetition(sub, [VARIANT, axis.name], study.metric, study.scale)


def paired_steps(study: Study, axis: Axis) -> pl.DataFrame:
    """Neighbouring values of `axis` compared within repetitions: per
    variant and step (value i to i + 1), the paired contrast (a ratio on
    the ratio scale) with its 95% interval and whether it resolves an
    effect (the interval excludes 1, or 0 additive)."""
    rows = []
    for (variant,), part in _levels(study, axis).group_by([VARIANT], maintain_order=True):
        used = [v for v in axis.values if v in set(part[axis.name].to_list())]
        found = level_contrasts(part, axis.name, used, study.scale)
        for a, b in zip(used, used[1:], strict=False):
            e = found[(a, b)]
            rows.append(
                {VARIANT: variant, "from": fmt(a), "to": fmt(b), "contrast": e.value, "lo": e.lo, "hi": e.hi, "resolved": e.resolved}
            )
    schema = {
        VARIANT: pl.String,
        "from": pl.String,
        "to": pl.String,
        "contrast": pl.Float64,
        "lo": pl.Float64,
        "hi": pl.Float64,
        "resolved": pl.Boolean,
    }
    return pl.DataFrame(rows, schema=schema).sort([VARIANT], maintain_order=True)


def _flat(found: dict) -> bool | None:
    """Flat: no two values resolved apart; None when no contrast has an
    interval (one repetition per cell)."""
    verdicts = [e.resolved for e in found.values() if e.resolved is not None]
    return None if not verdicts else not any(verdicts)


RANKING_SCHEMA = {
    "axis": pl.String,
    VARIANT: pl.String,
    "values": pl.Int64,
    "score": pl.Float64,
    "range": pl.Float64,
    "extreme": pl.Float64,
    "extreme_lo": pl.Float64,
    "extreme_hi": pl.Float64,
    "extreme_pair": pl.String,
    "flat": pl.Boolean,
    "paired": pl.String,
}


def ranking(study: Study, effects: dict[str, pl.DataFrame], studies: dict | None = None) -> pl.DataFrame:
    """One row per (axis, variant it varies within): axis, variant, values,
    score (module doc: fold range on the ratio scale, range in within-cell
    sds on the additive one), range (of the levels, regret units), the
    paired contrast of the highest level against the lowest (`extreme`,
    with its interval and `extreme_pair`), flat (None: undetermined, no
    interval with one repetition), and the neighbouring steps the paired
    contrast resolves ("k of n"). Resolved axes first, then by score.
    `studies`: per axis, the study read in strata (contrasts.stratified)."""
    rows = []
    for axis in study.axes:
        st = (studies or {}).get(axis.name, study)
        levels = _levels(st, axis)
        for (variant,), part in effects[axis.name].group_by([VARIANT], maintain_order=True):
            if part.height < 2:
                continue
            mine = levels.filter(pl.col(VARIANT) == variant)
            used = part["value"].to_list()
            found = level_contrasts(mine, axis.name, used, study.scale)
            centers = part["mean"].to_list()
            low, high = used[int(np.argmin(centers))], used[int(np.argmax(centers))]
            if low == high:  # every level equal (the axis leaves the variant alone)
                low, high = used[0], used[-1]
            pair = (low, high) if used.index(low) < used.index(high) else (high, low)
            ext = found[pair]
            if pair[0] != low:  # the contrast high against low
                ext = stats.Estimate(*_inverse(ext, study.scale), ext.n, ext.resolved)
            rng = max(centers) - min(centers)
            rows.append(
                {
                    "axis": axis.name,
                    VARIANT: variant,
                    "values": part.height,
                    "score": _score(st, variant, axis, centers, rng),
                    "range": rng,
                    "extreme": ext.value,
                    "extreme_lo": ext.lo,
                    "extreme_hi": ext.hi,
                    "extreme_pair": f"{axis.name}={fmt(high)} / {axis.name}={fmt(low)}",
                    "flat": _flat(found),
                    "paired": f"{sum(bool(found[(a, b)].resolved) for a, b in zip(used, used[1:], strict=False))} of {len(used) - 1}",
                }
            )
    df = pl.DataFrame(rows, schema=RANKING_SCHEMA)
    if not df.height:
        return df
    df = df.with_columns(pl.col("score").fill_nan(None), pl.col("range").fill_nan(None))
    verdict = pl.when(pl.col("flat").is_null()).then(1).when(pl.col("flat")).then(2).otherwise(0)
    return df.with_columns(_v=verdict).sort(["_v", "score", "range"], descending=[False, True, True], nulls_last=True).drop("_v")


def _inverse(e: stats.Estimate, scale: str) -> tuple[float, float, float]:
    """A contrast b against a as a against b."""
    if scale == "ratio":
        return 1.0 / e.value, 1.0 / e.hi, 1.0 / e.lo
    return -e.value, -e.hi, -e.lo


def _score(study: Study, variant: str, axis: Axis, centers: list, rng: float) -> float:
    if study.scale == "ratio":
        return max(centers) / min(centers)
    sw = within_sd(study, variant, axis)
    # No within-cell sd (one repetition per cell): no effect size.
    return float("nan") if math.isnan(sw) else rng / sw if sw > 0 else 0.0 if rng == 0 else float("inf")


def _paired_ratio(paired: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """mean(n) / mean(d) per `by` group of per-repetition pairs (n, d),
    with the delta-method interval that counts their covariance (the
    additive scale's ratio)."""
    stats_ = paired.group_by(by).agg(
        mn=pl.col("n").mean(), md=pl.col("d").mean(), vn=pl.col("n").var(), vd=pl.col("d").var(), c=pl.cov("n", "d"), reps=pl.len()
    )
    frr = pl.col("mn") / pl.col("md")
    var = (pl.col("vn") - 2 * frr * pl.col("c") + frr**2 * pl.col("vd")).clip(lower_bound=0.0)
    out = stats_.with_columns(frr=frr, frr_se=(var / pl.col("reps")).sqrt() / pl.col("md"))
    # The interval on the log scale (se of ln r = se of r / r): a ratio of
    # positive regrets never gets a negative bound.
    half = Z95 * pl.col("frr_se") / pl.col("frr")
    return out.with_columns(lo=pl.col("frr") * (-half).exp(), hi=pl.col("frr") * half.exp())


def paired_log_ratio(paired: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """The geometric mean of the per-repetition ratios n / d per `by`
    group with its Student-t interval (the ratio scale's ratio; never
    negative): frr, frr_se (of ln), lo, hi, reps."""
    groups = paired.with_columns(l=pl.col("n").log() - pl.col("d").log()).group_by(by).agg(_l=pl.col("l"), reps=pl.len())
    ests = [stats.contrast(np.asarray(v, dtype=float), "ratio") for v in groups["_l"].to_list()]
    se = [float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) > 1 else float("nan") for v in groups["_l"].to_list()]
    return groups.drop("_l").with_columns(
        frr=pl.Series([e.value for e in ests], dtype=pl.Float64),
        frr_se=pl.Series(se, dtype=pl.Float64),
        lo=pl.Series([e.lo for e in ests], dtype=pl.Float64).fill_nan(None),
        hi=pl.Series([e.hi for e in ests], dtype=pl.Float64).fill_nan(None),
    )


def ratio_of(study: Study, paired: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """The ratio n / d of per-repetition pairs on the study's scale."""
    return paired_log_ratio(paired, by) if study.scale == "ratio" else _paired_ratio(paired, by)


def frr_reference(study: Study, axis: Axis) -> pl.DataFrame:
    """The federated regret ratio of the non-baseline algorithms `axis`
    does not apply to, each pooled over its cells (against the baseline's
    overall level): the levels the ratio's lines are compared with."""
    final = study.final
    rest = final.filter((pl.col(VARIANT) != study.baseline) & pl.col(axis.name).is_null())
    num = _rep_level(study, rest, [VARIANT], "n")
    den = _rep_level(study, final.filter(pl.col(VARIANT) == study.baseline), [], "d")
    out = ratio_of(study, num.join(den, on="repetition"), [VARIANT])
    cells = rest.group_by(VARIANT).agg(cells=pl.col("cell_id").n_unique())
    return out.join(cells, on=VARIANT).sort(VARIANT).select(VARIANT, "frr", "lo", "hi", "reps", "cells")


def _rep_level(study: Study, rows: pl.DataFrame, by: list[str], name: str) -> pl.DataFrame:
    """Per (`by`, repetition): the level of `rows` as a regret (the
    geometric mean of its cells on the ratio scale, the mean on the
    additive one), named `name`."""
    lv = per_repetition(rows, by, study.metric, study.scale)
    return lv.with_columns((pl.col("v").exp() if study.scale == "ratio" else pl.col("v")).alias(name)).drop("v")


def frr_effect(study: Study, axis: Axis, effect: pl.DataFrame) -> pl.DataFrame | None:
    """The federated regret ratio against `axis` per non-baseline variant
    (module doc), or None when the family has no baseline in these
    results. Columns: variant, value, frr, frr_se, lo, hi, reps, cells."""
    if study.baseline is None:
        return None
    final, a = study.final, axis.name
    applies = final.filter((pl.col(VARIANT) == study.baseline) & pl.col(a).is_not_null()).height > 0
    num = _rep_level(study, final.filter((pl.col(VARIANT) != study.baseline) & pl.col(a).is_not_null()), [VARIANT, a], "n")
    keys = [a] if applies else []
    den = _rep_level(study, final.filter(pl.col(VARIANT) == study.baseline), keys, "d")
    out = ratio_of(study, num.join(den, on=[*keys, "repetition"]), [VARIANT, a]).rename({a: "value"})
    cells = effect.select(VARIANT, "value", "cells")
    ordered = cells.join(out, on=[VARIANT, "value"], how="inner", maintain_order="left")
    return ordered.select(VARIANT, "value", "frr", "frr_se", "lo", "hi", "reps", "cells")


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

"""Algorithms compared with each other, cell by cell: the question a study
was built to ask (`fedbandits_analysis.report`'s first section), and a
private algorithm's cost split into its noise, its other private parts and
the rest of the algorithm.

Definitions (the report quotes them beside its tables; scales and
intervals as stats.py defines them):
- **stratum columns**: the job's swept axes (its `grid:` keys that vary,
  `horizon` and `environment` included) and the variant parameters that
  take two or more values among its cells (`private`, `noise`, `clip`,
  ...), in the job's order.
- **contrast** `A / B` of two sides (an algorithm, or one algorithm at one
  value of a variant parameter): every cell a of A is paired with every
  cell b of B of the same environment that agrees with it on each stratum
  column both set (a column a side does not read, as `graph` for
  centralized FedUCB or `epsilon` for `independent`, matches any value);
  the pair's **stratum** is the union of their values. Per stratum, the
  paired ratio of final values, repetition r of a against repetition r of
  b (common random numbers): on the ratio scale the geometric mean of the
  per-repetition ratios with its 95% Student-t interval, on the additive
  one the ratio of means with its delta-method interval. Nothing is pooled
  over strata.
- **which contrasts**: those the job declares (`compare:`, in its order),
  or without a declaration every pair of algorithms of one family but its
  baseline, in the job's order (later / earlier); then every algorithm
  against its family's baseline (linear `independent`, gossip
  `local_ucb`, combinatorial `non_federated`); and within one algorithm
  every pair
  of values of a variant parameter other than `private` and `noise` (the
  cost of privacy has a section of its own).
- **cost of the algorithm and cost of privacy** of a private cell p (its
  noise drawn): its **noise-free twin** n is the same cell with `noise:
  false` (every other parameter equal; both share their random numbers),
  or, for the algorithms the registry lists (`noiseless_at_inf`: P-FCB),
  its cell at `epsilon: .inf`; its **non-private sibling** c is the same
  algorithm with `private: false`, or the algorithm the registry names
  (`non_private`: P-FCB -> FCB, Fed_UCB -> Gossip_UCB), matched on the
  stratum columns. Then p / c (total) = p / n (the noise: the cost of
  privacy) x n / c (the cost of the algorithm); where the registry lists
  further parts of the private algorithm (`parts`: Fed_UCB's `c_priv: 0`,
  `clip: false`) and the study has the cells, n / c splits again, one part
  at a time in the registry's order, the rest being what remains of the
  algorithm. On the ratio scale the parts multiply to the total.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import polars as pl

from . import stats
from .effects import Study, fmt, grid_keys, ratio_of, variant_params_of

#: Variant parameters whose contrasts are the cost of privacy's, not this
#: section's.
PRIVACY_VARIANTS = ("private", "noise")


@dataclass
class Side:
    """One side of a contrast: an algorithm, optionally fixed at values of
    its variant parameters."""

    algorithm: str
    fixed: dict = field(default_factory=dict)

    def label(self) -> str:
        """`p_fcb` or `private_fedlinucb (protocol=sdp_vecsum)`."""
        if not self.fixed:
            return self.algorithm
        return f"{self.algorithm} ({', '.join(f'{k}={fmt(v)}' for k, v in self.fixed.items())})"

    def holds(self, cell: dict) -> bool:
        """Whether `cell` belongs to this side."""
        return cell["algorithm"] == self.algorithm and all(cell.get(k) == v for k, v in self.fixed.items())


@dataclass
class Spec:
    """A contrast to compute: numerator / denominator, why it is formed
    (`declared`, `baseline`, `algorithms`, `variant`), and the columns not
    matched (the variant parameter it varies)."""

    num: Side
    den: Side
    kind: str
    free: tuple = ()

    def name(self) -> str:
        """`feducb_decentralized / feducb_centralized`."""
        return f"{self.num.label()} / {self.den.label()}"


def cell_rows(study: Study) -> list[dict]:
    """One dict per cell (its first final row: every parameter column), in
    grid order."""
    return list(study.final.unique("cell_id", keep="first").sort("cell_index").iter_rows(named=True))


def stratum_columns(study: Study) -> list[str]:
    """The stratum columns (module doc), in the job's order: its grid keys
    that vary, then the varying variant parameters it does not list."""
    cells = study.final.unique("cell_id", keep="first")

    def varies(c: str) -> bool:
        return c in cells.columns and cells[c].drop_nulls().n_unique() > 1

    declared = [k for k in grid_keys(study.meta.get("job_yaml", "")) if varies(k)]
    others = [a.name for a in study.axes] + [p for p in variant_params_of(study.families) if varies(p)]
    return list(dict.fromkeys([*declared, *others]))


def family_of(study: Study, algorithm: str) -> str | None:
    """The registry's family of `algorithm`."""
    return next((n for n, f in study.families.items() if algorithm in f.get("algorithms", [])), None)


def declared(study: Study) -> list[tuple[str, str]]:
    """The job's `compare:` pairs (the files' `fedbandits.compare`, else
    the job text's own key)."""
    raw = study.meta.get("compare")
    try:
        pairs = json.loads(raw) if raw else None
    except json.JSONDecodeError:
        pairs = None
    if pairs is None:
        import yaml

        try:
            doc = yaml.safe_load(study.meta.get("job_yaml", "")) or {}
        except yaml.YAMLError:
            doc = {}
        pairs = doc.get("compare") if isinstance(doc, dict) else None
    return [(str(p[0]), str(p[1])) for p in pairs or [] if isinstance(p, list | tuple) and len(p) == 2]


def specs(study: Study) -> list[Spec]:
    """The contrasts of the study (module doc: which contrasts), in the
    order the report shows them; those whose algorithms are not both in
    the study are dropped."""
    cells = cell_rows(study)
    algos = list(dict.fromkeys(c["algorithm"] for c in cells))
    out: list[Spec] = []

    def add(spec: Spec) -> None:
        key = (spec.num.label(), spec.den.label())
        if all((s.num.label(), s.den.label()) != key for s in out):
            out.append(spec)

    asked = declared(study)
    for a, b in asked:
        if a in algos and b in algos:
            add(Spec(Side(a), Side(b), "declared"))
    if not asked:
        for i, a in enumerate(algos):
            for b in algos[:i]:
                if family_of(study, a) == family_of(study, b) and _baseline(study, a) not in (a, b):
                    add(Spec(Side(a), Side(b), "algorithms"))
    for a in algos:
        base = _baseline(study, a)
        if base and base != a and base in algos:
            add(Spec(Side(a), Side(base), "baseline"))
    for spec in _variant_specs(study, cells, algos):
        add(spec)
    return out


def _baseline(study: Study, algorithm: str) -> str | None:
    """The registry's baseline of `algorithm`'s family."""
    return study.families.get(family_of(study, algorithm) or "", {}).get("baseline")


def _variant_specs(study: Study, cells: list[dict], algos: list[str]) -> list[Spec]:
    """Within each algorithm, every two values (later / earlier) of each
    variant parameter but the privacy ones."""
    out = []
    for a in algos:
        mine = [c for c in cells if c["algorithm"] == a]
        for p in variant_params_of(study.families):
            if p in PRIVACY_VARIANTS:
                continue
            values = list(dict.fromkeys(c.get(p) for c in mine if c.get(p) is not None))
            for i, v in enumerate(values):
                for u in values[:i]:
                    out.append(Spec(Side(a, {p: v}), Side(a, {p: u}), "variant", (p,)))
    return out


def agree(a: dict, b: dict, columns: list[str]) -> bool:
    """Whether two cells of one environment agree on every column of
    `columns` both set (a column one of them does not read matches any
    value)."""
    return a["environment"] == b["environment"] and all(a.get(k) is None or b.get(k) is None or a[k] == b[k] for k in columns)


def pairs_of(spec: Spec, cells: list[dict], strata: list[str]) -> list[tuple[dict, dict, dict]]:
    """The (numerator cell, denominator cell, stratum) pairs of `spec`
    (module doc), in the numerator's grid order."""
    columns = [c for c in strata if c not in spec.free]
    num = [c for c in cells if spec.num.holds(c)]
    den = [c for c in cells if spec.den.holds(c)]
    out = []
    for a in num:
        for b in den:
            if a["cell_id"] != b["cell_id"] and agree(a, b, columns):
                stratum = {k: a[k] if a.get(k) is not None else b.get(k) for k in columns}
                out.append((a, b, {k: v for k, v in stratum.items() if v is not None}))
    return out


def paired(study: Study, links: list[tuple[int, str, str]]) -> pl.DataFrame:
    """Per link (key, numerator cell, denominator cell): the paired ratio
    of their final values over the repetitions both have (key, frr, lo,
    hi, reps; stats.py's scales)."""
    schema = {"key": pl.Int64, "frr": pl.Float64, "lo": pl.Float64, "hi": pl.Float64, "reps": pl.UInt32}
    if not links:
        return pl.DataFrame(schema=schema)
    link = pl.DataFrame({"key": [k for k, _, _ in links], "a": [a for _, a, _ in links], "b": [b for _, _, b in links]})
    value = study.final.select("cell_id", "repetition", pl.col(study.metric).alias("v"))
    rows = (
        link.join(value.rename({"cell_id": "a", "v": "n"}), on="a")
        .join(value.rename({"cell_id": "b", "v": "d"}), on=["b", "repetition"])
        .select("key", "repetition", "n", "d")
    )
    out = ratio_of(study, rows, ["key"])
    return out.select("key", "frr", "lo", "hi", pl.col("reps").cast(pl.UInt32)).sort("key")


def _verdict(lo, hi) -> str:
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return "no interval"
    return "lower" if hi < 1 else "higher" if lo > 1 else "no resolved difference"


def contrasts(study: Study) -> pl.DataFrame:
    """Every contrast of `specs` per stratum: contrast, kind, numerator,
    denominator, num_cell, den_cell, one column per stratum column (its
    value, null where the stratum has none), ratio, lo, hi, repetitions,
    verdict (`lower`, `higher`, `no resolved difference`: the interval
    against 1), metric; in the report's order."""
    cells = cell_rows(study)
    strata = stratum_columns(study)
    rows: list[dict] = []
    links: list = []
    for spec in specs(study):
        for a, b, stratum in pairs_of(spec, cells, strata):
            links.append((len(rows), a["cell_id"], b["cell_id"]))
            rows.append(
                {
                    "contrast": spec.name(),
                    "kind": spec.kind,
                    "numerator": spec.num.label(),
                    "denominator": spec.den.label(),
                    "num_cell": a["cell_id"],
                    "den_cell": b["cell_id"],
                    **{f"@{k}": stratum.get(k) for k in strata},
                }
            )
    base = {
        "contrast": pl.String,
        "kind": pl.String,
        "numerator": pl.String,
        "denominator": pl.String,
        "num_cell": pl.String,
        "den_cell": pl.String,
    }
    schema: dict = {**base, **{f"@{k}": study.final.schema[k] for k in strata}}
    frame = pl.DataFrame(rows, schema=schema, strict=False).with_row_index("key").with_columns(pl.col("key").cast(pl.Int64))
    found = paired(study, links)
    frame = frame.join(found, on="key", how="left").sort("key").drop("key")
    verdicts = [_verdict(lo, hi) for lo, hi in zip(frame["lo"].to_list(), frame["hi"].to_list(), strict=True)]
    frame = frame.rename({"frr": "ratio", "reps": "repetitions", **{f"@{k}": k for k in strata}})
    return frame.with_columns(verdict=pl.Series(verdicts, dtype=pl.String), metric=pl.lit(study.regret_word()))


def strata_of(frame: pl.DataFrame, study: Study) -> list[str]:
    """The stratum columns a contrast's rows take two or more values of,
    or one value where the other side does not read it."""
    return [c for c in stratum_columns(study) if c in frame.columns and frame[c].drop_nulls().n_unique() > 0]


def summary(part: pl.DataFrame, strata: list[str]) -> dict:
    """One contrast's headline: strata, the smallest and largest ratio,
    counts of resolved lower / higher, and per stratum column that varies,
    each level's smallest and largest ratio (`by`: column -> [(value, min,
    max, geometric mean)])."""
    r = part.filter(pl.col("ratio").is_not_null())
    by = {}
    for c in strata:
        values = r[c].drop_nulls().unique(maintain_order=True).to_list()
        if len(values) < 2:
            continue
        levels = []
        for v in values:
            x = r.filter(pl.col(c) == v)["ratio"]
            positive = [y for y in x.to_list() if y > 0]
            geo = math.exp(sum(math.log(y) for y in positive) / len(positive)) if positive else float("nan")
            levels.append((v, x.min(), x.max(), geo))
        by[c] = levels
    return {
        "strata": part.height,
        "min": r["ratio"].min() if r.height else None,
        "max": r["ratio"].max() if r.height else None,
        "lower": int((r["verdict"] == "lower").sum()),
        "higher": int((r["verdict"] == "higher").sum()),
        "by": by,
    }


def worse_than_baseline(frame: pl.DataFrame) -> pl.DataFrame:
    """The baseline contrasts whose interval lies above 1: a federated cell
    worse than not federating at the same stratum."""
    return frame.filter((pl.col("kind") == "baseline") & (pl.col("verdict") == "higher"))


def is_estimate(x) -> bool:
    """Whether a ratio is a number (not null or nan)."""
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def fmt_ratio_ci(ratio, lo, hi) -> str:
    """`x0.5 [0.48, 0.52]` (or `x0.5` without an interval)."""
    if not is_estimate(ratio):
        return "n/a"
    return stats.fmt_estimate(stats.Estimate.of(ratio, lo, hi), "ratio")

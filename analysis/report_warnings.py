"""The warnings of a sensitivity report (`fedbandits_analysis.report`):
what a reader must know before trusting its figures. An incomplete run,
misspecified environments, cells whose regret grows linearly over the last
decade or over a long stretch of the curve (`phases.py`), few repetitions,
health counters that fired (clipping as a share of the observations), a
private cell that clips more than its non-private counterpart, and the
axes whose every paired contrast includes no effect ("flat")."""

from __future__ import annotations

import json

import polars as pl

from . import stats
from .effects import FLAG_COLUMNS, MIN_REPETITIONS, VARIANT, Study
from .load import LINEAR_GROWTH_EXPONENT

#: Cells named in full in a warning (the rest counted).
MAX_WARNED_CELLS = 20


def warnings(study: Study, ranked: pl.DataFrame, extra: list[str] | None = None) -> list[str]:
    """Every warning of the module doc, in reading order; `extra`: those
    other sections computed (long linear phases, clipping gaps)."""
    out = []
    if study.incomplete:
        out.append(f"Incomplete results (read as they are): {study.incomplete}")
    out += model_warnings(study) + growth_warnings(study) + list(extra or [])
    few = study.cells.filter(pl.col("n") < MIN_REPETITIONS)
    if few.height:
        examples = "; ".join(f"{study.label(r)} ({r['n']})" for r in few.head(3).iter_rows(named=True))
        out.append(
            f"{few.height} of {study.cells.height} cells have fewer than {MIN_REPETITIONS} repetitions "
            f"(min {few['n'].min()}): their intervals are rough. E.g. {examples}"
        )
    out += counter_warnings(study)
    out += flat_warnings(study, ranked)
    return out


def counter_warnings(study: Study) -> list[str]:
    """Health counters that are non-zero: Cholesky failures and beta
    clamps as means per repetition, clipping as the share of observations
    clipped (clipped / (m x horizon))."""
    out = []
    for col in FLAG_COLUMNS:
        if col not in study.cells.columns:
            continue
        hit = study.cells.filter(pl.col(col) > 0)
        if not hit.height:
            continue
        if col == "clipped_observations" and "clipped_share" in hit.columns:
            top = hit.sort("clipped_share", descending=True).head(3)
            examples = "; ".join(f"{study.label(r)}: {_share(r['clipped_share'])}" for r in top.iter_rows(named=True))
            out.append(
                f"Observations are clipped in {hit.height} of {study.cells.height} cells (share of the m x T "
                f"observations; largest: {examples}): clipped rewards bias the estimates, see the clipping table"
            )
            continue
        examples = "; ".join(f"{study.label(r)}: {r[col]:.4g}" for r in hit.sort(col, descending=True).head(3).iter_rows(named=True))
        out.append(f"`{col}` is non-zero in {hit.height} of {study.cells.height} cells (mean per repetition at t = T; largest: {examples})")
    return out


def _share(x) -> str:
    return "n/a" if x is None else f"{100 * x:.3g}%"


def flat_warnings(study: Study, ranked: pl.DataFrame) -> list[str]:
    """Each (axis, variant) that is flat: no two values resolved apart
    by the paired contrast."""
    out = []
    reps = study.cells["n"].min() if study.cells.height else 0
    null = "1" if study.scale == "ratio" else "0"
    for row in ranked.filter(pl.col("flat")).iter_rows(named=True):
        ext = stats.Estimate(row["extreme"], row["extreme_lo"], row["extreme_hi"], reps, False)
        out.append(
            f"Axis `{row['axis']}` shows no effect for {row[VARIANT]} at this many repetitions ({reps} per cell at least): "
            f"paired by repetition, every two of its values' contrast has a 95% interval including {null} "
            f"(highest against lowest level, {row['extreme_pair']}: {stats.fmt_estimate(ext, study.scale)})"
        )
    return out


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

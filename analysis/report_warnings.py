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
from .effects import FLAG_COLUMNS, MIN_REPETITIONS, VARIANT, Study, fmt
from .load import LINEAR_GROWTH_EXPONENT
from .phases import per_round_levels

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
                f"observations; largest: {examples}): clipped rewards bias the estimates (Family metrics)"
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


def _reps(hit: int, n: int) -> str:
    """`all 4 repetitions`, `one of 4 repetitions`, `2 of 4 repetitions`."""
    if hit == n:
        return f"all {n} repetitions" if n > 1 else "its one repetition"
    return f"one of {n} repetitions" if hit == 1 else f"{hit} of {n} repetitions"


def widths_of(study: Study, row: dict) -> str:
    """The cell's parameters that widen its algorithm's confidence (the
    family registry's `widths`) with their values: `c_priv=4, epsilon=0.5`."""
    names = next((w.get(row["algorithm"], []) for w in (f.get("widths", {}) for f in study.families.values()) if row["algorithm"] in w), [])
    cell = study.final.filter(pl.col("cell_id") == row["cell_id"]).head(1)
    shown = [f"{n}={fmt(cell[n][0])}" for n in names if n in cell.columns and cell.height and cell[n][0] is not None]
    return ", ".join(shown)


def growth_warnings(study: Study) -> list[str]:
    """Cells with a repetition whose `regret_exponent` (the slope of log
    regret against log t over the last decade of the horizon) is at least
    0.9, each told apart (phases.verdict): **never started** (per-round
    regret over the last decade still at its first level: a confidence
    width too wide for the horizon, whose parameters the warning names with
    the cell's values), **stalled after learning** (settled below it, on a
    wrong action) or **still learning** (falling as the horizon ends); with
    how many repetitions are flagged (all:
    the cell's level describes the algorithm there; some: those
    repetitions)."""
    if "linear_growth" not in study.cells.columns:
        return []
    hit = study.cells.filter(pl.col("linear_growth") > 0)
    if not hit.height:
        return []
    levels = {r["cell_id"]: r for r in per_round_levels(study.lf, hit["cell_id"].to_list(), study.metric).iter_rows(named=True)}
    by_verdict: dict[str, list[str]] = {}
    for r in hit.sort("cell_index").iter_rows(named=True):
        lv = levels.get(r["cell_id"], {})
        verdict = lv.get("verdict") or "growing linearly"
        rates = (
            f"; per-round regret {lv['early']:.3g} at first, "
            + (f"{lv['prev']:.3g} over the decade before the last, " if lv.get("prev") is not None else "")
            + f"{lv['late']:.3g} over the last"
            if lv.get("late") is not None and lv.get("early") is not None
            else ""
        )
        widths = widths_of(study, r) if verdict == "never started" else ""
        by_verdict.setdefault(verdict, []).append(
            f"{study.label(r)} ({_reps(r['linear_growth'], r['n'])}, largest exponent {r['max_exponent']:.2f}{rates}"
            + (f"; its width grows with {widths}" if widths else "")
            + ")"
        )
    out = []
    why = {
        "never started": "still explores at the horizon: its confidence width is too wide for this many rounds "
        "(widen the horizon or narrow the width: the parameters named)",
        "stalled after learning": "learned, then settled on a wrong action: its per-round regret is the same over the "
        "last two decades and its regret grows linearly",
        "still learning": "is still learning as the horizon ends (its per-round regret falls over the last two decades): "
        "a longer horizon would show where it settles",
        "growing linearly": "grows linearly (too few checkpoints to tell whether it ever learned)",
    }
    for verdict, cells in by_verdict.items():
        shown = "; ".join(cells[:MAX_WARNED_CELLS]) + (
            f"; and {len(cells) - MAX_WARNED_CELLS} more" if len(cells) > MAX_WARNED_CELLS else ""
        )
        out.append(
            f"Regret grows linearly over the last decade (`regret_exponent` >= {LINEAR_GROWTH_EXPONENT}), "
            f"{verdict} in {len(cells)} of {study.cells.height} cells: the cell {why[verdict]}. Where all repetitions "
            f"are flagged, the cell's level describes the algorithm at these settings; where some are, those "
            f"repetitions dominate its mean. {shown}"
        )
    return out


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

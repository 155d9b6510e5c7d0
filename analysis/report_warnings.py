"""The warnings of a sensitivity report (`fedbandits_analysis.report`):
what a reader must know before trusting its figures. An incomplete run,
misspecified environments, cells whose regret grows linearly over the last
decade or over a long stretch of the curve (`phases.py`), cells that sync
fewer than floor(log2 T) times, federated cells worse than their family's
baseline, few repetitions, health counters that fired, a private cell that
clips more than its non-private counterpart, and the axes whose every
paired contrast includes no effect ("flat").

Each warning is one line (a `Warned`: a string) naming its cause and how
many cells have it; where it concerns cells, they are in its table. A
cell's causes are only those it has (`causes`): its privacy noise where it
is private, a late or missing first sync where its algorithm syncs, its
confidence width where its algorithm has one (the registry's `widths`)."""

from __future__ import annotations

import json
import math

import polars as pl

from . import stats
from .effects import FLAG_COLUMNS, MIN_REPETITIONS, VARIANT, Study, fmt
from .load import LINEAR_GROWTH_EXPONENT
from .phases import describe, per_round_levels, verdict

#: Cells named in a warning's table (the rest counted).
MAX_WARNED_CELLS = 40
#: Cells of one variant whose per-round regret over the last decade, as a
#: share of their first level, lies within this of each other's read one
#: pattern and get one verdict (no split at a threshold between 0.89 and
#: 0.9).
SAME_PATTERN = 0.05


class Warned(str):
    """A warning: its one line (the string itself) and, where it concerns
    cells, their table (`table`: head, rows)."""

    table: tuple[list[str], list[list[str]]] | None

    def __new__(cls, text: str, table: tuple[list[str], list[list[str]]] | None = None) -> Warned:
        obj = super().__new__(cls, text)
        obj.table = table
        return obj

    def full(self) -> str:
        """The line and its table's rows as one text (for searching)."""
        if not self.table:
            return str(self)
        return str(self) + " " + " ".join(" | ".join(r) for r in self.table[1])


def warnings(study: Study, ranked: pl.DataFrame, extra: list[Warned] | list[str] | None = None) -> list[Warned]:
    """Every warning of the module doc, in reading order; `extra`: those
    other sections computed (long linear phases, syncs, baselines, clipping
    gaps)."""
    out: list[Warned] = []
    if study.incomplete:
        out.append(Warned(f"Incomplete results (read as they are): {study.incomplete}"))
    out += model_warnings(study) + growth_warnings(study) + [w if isinstance(w, Warned) else Warned(w) for w in extra or []]
    few = study.cells.filter(pl.col("n") < MIN_REPETITIONS)
    if few.height:
        examples = "; ".join(f"{study.label(r)} ({r['n']})" for r in few.head(3).iter_rows(named=True))
        out.append(
            Warned(
                f"{few.height} of {study.cells.height} cells have fewer than {MIN_REPETITIONS} repetitions "
                f"(min {int(stats.scalar(few['n'].min()))}): their intervals are rough. E.g. {examples}"
            )
        )
    out += [Warned(w) for w in counter_warnings(study) + flat_warnings(study, ranked)]
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
    reps = int(stats.scalar(study.cells["n"].min())) if study.cells.height else 0
    null = "1" if study.scale == "ratio" else "0"
    for row in ranked.filter(pl.col("flat")).iter_rows(named=True):
        ext = stats.Estimate(row["extreme"], row["extreme_lo"], row["extreme_hi"], reps, False)
        out.append(
            f"Axis `{row['axis']}` shows no effect for {row[VARIANT]} at this many repetitions ({reps} per cell at least): "
            f"paired by repetition, every two of its values' contrast has a 95% interval including {null} "
            f"(highest against lowest level, {row['extreme_pair']}: {stats.fmt_estimate(ext, study.scale)})"
        )
    return out


def _capped(rows: list[list[str]]) -> list[list[str]]:
    """A warning's rows, at most MAX_WARNED_CELLS, the rest counted in a
    last row."""
    if len(rows) <= MAX_WARNED_CELLS:
        return rows
    more = len(rows) - MAX_WARNED_CELLS
    return rows[:MAX_WARNED_CELLS] + [[f"... and {more} more"] + [""] * (len(rows[0]) - 1)]


def _reps(hit: int, n: int) -> str:
    """`all 4`, `1 of 4`."""
    return f"all {n}" if hit == n else f"{hit} of {n}"


def widths_of(study: Study, row: dict) -> str:
    """The cell's parameters that widen its algorithm's confidence (the
    family registry's `widths`) with their values: `c_priv=4, epsilon=0.5`."""
    widths = (f.get("widths", {}) for f in study.families.values())
    names: list[str] = next((w.get(row["algorithm"], []) for w in widths if row["algorithm"] in w), [])
    cell = study.final.filter(pl.col("cell_id") == row["cell_id"]).head(1)
    shown = [f"{n}={fmt(cell[n][0])}" for n in names if n in cell.columns and cell.height and cell[n][0] is not None]
    return ", ".join(shown)


def first_syncs(study: Study) -> dict[str, dict]:
    """Per cell: `first_sync` (median over repetitions of the first
    checkpoint with sync_rounds > 0; null where none synced), `never`
    (the repetitions that never synced) and `syncs` (mean final sync
    rounds)."""
    if "sync_rounds" not in study.lf.collect_schema().names():
        return {}
    per = (
        study.lf.group_by(["cell_id", "repetition"])
        .agg(first=pl.col("t").filter(pl.col("sync_rounds") > 0).min(), last=pl.col("sync_rounds").max())
        .group_by("cell_id")
        .agg(first_sync=pl.col("first").median(), never=pl.col("first").is_null().sum(), syncs=pl.col("last").cast(pl.Float64).mean())
        .collect()
    )
    return {r["cell_id"]: r for r in per.iter_rows(named=True)}


def syncing_algorithms(study: Study, syncs: dict[str, dict]) -> set[str]:
    """The algorithms that sync in some cell of the study (the others, as
    `independent`, never communicate by design)."""
    algo = {r["cell_id"]: r["algorithm"] for r in study.cells.iter_rows(named=True)}
    return {algo[c] for c, r in syncs.items() if c in algo and (r["syncs"] or 0) > 0}


def causes(study: Study, row: dict, syncs: dict[str, dict], syncing: set[str]) -> str:
    """What can keep this cell from learning, among what it has: its
    privacy noise (a private cell), a first sync late in the run or none
    (an algorithm that syncs), its confidence width (an algorithm with a
    registered width); or none of these."""
    listed = {c["cell_id"] for c in study.privacy.get("cells", [])}
    found = []
    cell = study.final.filter(pl.col("cell_id") == row["cell_id"]).head(1)
    value = lambda c: cell[c][0] if c in cell.columns and cell.height else None  # noqa: E731
    if row["cell_id"] in listed and value("noise") is not False:
        found.append(f"privacy noise (epsilon={fmt(value('epsilon'))})" if value("epsilon") is not None else "privacy noise")
    s = syncs.get(row["cell_id"])
    if row["algorithm"] in syncing and s is not None:
        horizon = value("horizon") or 0
        what = "a private schedule's" if value("schedule_private") is True and row["cell_id"] in listed else "its"
        if s["first_sync"] is None:
            found.append(f"{what} first sync never came")
        elif horizon and s["first_sync"] >= math.sqrt(horizon):
            found.append(f"{what} first sync late (median t <= {s['first_sync']:,.0f})")
    widths = widths_of(study, row)
    if widths:
        found.append(f"its confidence width ({widths})")
    return "; ".join(found) if found else "none of the causes the report checks (privacy, a late or missing sync, a width)"


def _stable(levels: dict[str, dict], hit: pl.DataFrame) -> dict[str, str]:
    """Each flagged cell's verdict, one per pattern: cells whose
    last-decade per-round regret (as a share of their first level) lies
    within SAME_PATTERN of another's (chained) read one pattern and get the
    verdict of their mean shares, whatever their variant."""
    out = {c: (levels.get(c) or {}).get("verdict") or "growing linearly" for c in hit["cell_id"].to_list()}
    shares = []
    for c in hit["cell_id"].to_list():
        lv = levels.get(c) or {}
        if lv.get("early") and lv.get("late") is not None:
            prev = lv["prev"] / lv["early"] if lv.get("prev") is not None else None
            shares.append((lv["late"] / lv["early"], prev, c))
    shares.sort(key=lambda x: x[0])
    group: list = []
    for item in [*shares, None]:
        if item is not None and (not group or item[0] - group[-1][0] <= SAME_PATTERN):
            group.append(item)
            continue
        if len(group) > 1:
            late = sum(g[0] for g in group) / len(group)
            prevs = [g[1] for g in group if g[1] is not None]
            one = verdict(1.0, sum(prevs) / len(prevs) if len(prevs) == len(group) else None, late)
            for g in group:
                out[g[2]] = one or out[g[2]]
        group = [item] if item is not None else []
    return out


#: What each verdict means, for its line.
VERDICTS = {
    "never started": "its per-round regret over the last decade is still at its first level",
    "stalled after learning": "it learned, then settled: its per-round regret is the same over the last two decades "
    "and its regret grows linearly (a wrong action kept)",
    "still learning": "its per-round regret still falls over the last two decades: a longer horizon would show where it settles",
    "growing linearly": "too few checkpoints to tell whether it ever learned",
}


def growth_warnings(study: Study) -> list[Warned]:
    """Cells with a repetition whose `regret_exponent` (the slope of log
    regret against log t over the last decade) is at least 0.9: one line
    per verdict (phases.verdict, one per pattern: `_stable`), its cells in
    a table with their per-round regret and the causes they have."""
    if "linear_growth" not in study.cells.columns:
        return []
    hit = study.cells.filter(pl.col("linear_growth") > 0).sort("cell_index")
    if not hit.height:
        return []
    levels = {r["cell_id"]: r for r in per_round_levels(study.lf, hit["cell_id"].to_list(), study.metric).iter_rows(named=True)}
    verdicts = _stable(levels, hit)
    syncs = first_syncs(study)
    syncing = syncing_algorithms(study, syncs)
    by: dict[str, list[list[str]]] = {}
    for r in hit.iter_rows(named=True):
        lv = levels.get(r["cell_id"]) or {}

        def rate(k: str, lv: dict = lv) -> str:
            return "" if lv.get(k) is None else f"{lv[k]:.3g}"

        by.setdefault(verdicts[r["cell_id"]], []).append(
            [
                study.label(r),
                _reps(r["linear_growth"], r["n"]),
                f"{r['max_exponent']:.2f}",
                rate("early"),
                rate("prev"),
                rate("late"),
                causes(study, r, syncs, syncing),
            ]
        )
    head = [
        "cell",
        "repetitions flagged",
        "largest exponent",
        "per-round regret at first",
        "decade before last",
        "last decade",
        "causes it has",
    ]
    out = []
    for v, rows in by.items():
        out.append(
            Warned(
                f"Regret grows linearly over the last decade (`regret_exponent` >= {LINEAR_GROWTH_EXPONENT}) in {len(rows)} "
                f"of {study.cells.height} cells, **{v}**: {VERDICTS.get(v, v)}.",
                (head, _capped(rows)),
            )
        )
    return out


def long_phase_warnings(study: Study, phases: pl.DataFrame) -> list[Warned]:
    """Cells whose longest linear stretch is long (phases.py), each with
    the causes it has."""
    long = phases.filter(pl.col("long"))
    if not long.height:
        return []
    cells = {r["cell_id"]: r for r in study.cells.iter_rows(named=True)}
    rows = sorted((cells[r["cell_id"]]["cell_index"], r) for r in long.iter_rows(named=True) if r["cell_id"] in cells)
    syncs = first_syncs(study)
    syncing = syncing_algorithms(study, syncs)
    table = [[study.label(cells[r["cell_id"]]), describe(r), causes(study, cells[r["cell_id"]], syncs, syncing)] for _, r in rows]
    return [
        Warned(
            f"Regret grows linearly over half the horizon's decades or more in {long.height} of {study.cells.height} cells: "
            "they learn late, which the last-decade exponent cannot see.",
            (["cell", "longest linear stretch", "causes it has"], _capped(table)),
        )
    ]


def sync_warnings(study: Study) -> list[Warned]:
    """Cells of an algorithm that syncs (in some cell of the study) whose
    mean sync count is below floor(log2 T): too few syncs for the
    federation to be what is measured."""
    syncs = first_syncs(study)
    syncing = syncing_algorithms(study, syncs)
    rows = []
    for r in study.cells.sort("cell_index").iter_rows(named=True):
        s = syncs.get(r["cell_id"])
        cell = study.final.filter(pl.col("cell_id") == r["cell_id"]).head(1)
        if r["algorithm"] not in syncing or s is None or not cell.height:
            continue
        floor = int(math.floor(math.log2(max(int(cell["horizon"][0]), 2))))
        if (s["syncs"] or 0) < floor:
            rows.append([study.label(r), f"{s['syncs']:.3g}", str(floor)])
    if not rows:
        return []
    return [
        Warned(
            f"{len(rows)} cell(s) sync fewer than floor(log2 T) times: their agents hardly share, so their regret measures "
            "their schedule more than their federation.",
            (["cell", "sync rounds (mean)", "floor(log2 T)"], _capped(rows)),
        )
    ]


def baseline_warnings(study: Study, frame: pl.DataFrame) -> list[Warned]:
    """Federated cells worse than their family's baseline at the same
    stratum (compare.py's baseline contrasts whose interval lies above 1),
    private or not."""
    from .compare import fmt_ratio_ci, worse_than_baseline

    worse = worse_than_baseline(frame) if frame.height else frame
    if not worse.height:
        return []
    listed = {c["cell_id"] for c in study.privacy.get("cells", [])}
    cells = {r["cell_id"]: r for r in study.cells.iter_rows(named=True)}
    rows = [
        [
            study.label(cells[r["num_cell"]]),
            r["denominator"],
            fmt_ratio_ci(r["ratio"], r["lo"], r["hi"]),
            "yes" if r["num_cell"] in listed else "no",
        ]
        for r in worse.iter_rows(named=True)
        if r["num_cell"] in cells
    ]
    plain = sum(1 for r in rows if r[3] == "no")
    return [
        Warned(
            f"{len(rows)} federated cell(s) have more regret than not federating at the same stratum ({plain} of them "
            "non-private): paired ratio to the family's baseline, interval above x1.",
            (["cell", "baseline", "ratio to the baseline [95%]", "private"], _capped(rows)),
        )
    ]


def model_warnings(study: Study) -> list[Warned]:
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
            Warned(
                f"Misspecified environment in {len(labels)} cell(s) (`{key}`): {why}. Regret can grow linearly at long "
                f"horizons. Fix: {fix}. Cells: {shown}"
            )
        )
    return out

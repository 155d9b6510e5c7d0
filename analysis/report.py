"""A sensitivity report for any job: from a results directory to the effect
of every swept parameter.

    python -m fedbandits_analysis.report RESULTS_DIR --out DIR [--html]

or `report(path, out, html=False)`. RESULTS_DIR is a job's results
directory (merged or sharded; an incomplete run is reported with a
warning), a root of several jobs (one section each), or a Parquet file.
Only the final rows and the curves of the cells drawn are read.

For each job, `DIR/report.md` (with the PNGs beside it; `--html`: also
`DIR/report.html`, one self-contained file with the images embedded), and
`DIR/contrasts.csv` (every job's contrasts, one row per stratum):
0. the study's question: the algorithms compared with each other per
   stratum (compare.py), declared ones (`compare:`) first;
1. warnings, one line per cause with its cells' table (report_warnings.py);
2. the run: job, engine and semantics versions, cells, repetitions,
   agent-steps, wall time, backend, swept axes; every privacy figure
   present with its column, and each null with the reason the engine wrote;
3. the axes ranked by effect size (effects.py's module doc defines it);
4. main effects: final per-agent regret against each axis, one line per
   variant it varies within (per level of an axis it interacts with), 95%
   intervals over repetitions, the other axes pooled, epsilon at the
   accounted figure (`--privacy-axis`);
   the federated regret ratio where the family has a baseline;
5. interactions within each variant, strongest first, the first few drawn
   (contrasts.py defines them);
6. the cost of privacy: each private cell against its non-private
   counterpart, paired by repetition, against epsilon and the other axes;
   and the cost of the algorithm apart from it (costs.py); communication,
   the families' facts and metrics;
7. regret curves of each variant's best and worst cells and its
   grid-corner cells, and the variants side by side at matched settings.
"""

from __future__ import annotations

import argparse
import base64
import html
import math
import os
import re
import sys
import time
from pathlib import Path
from typing import cast

import polars as pl

from . import compare as comparisons
from . import report_comms as comms
from . import report_compare as question
from . import report_contrasts as contrast
from . import report_plots as plots
from . import report_warnings, stats
from .contrasts import interactions, stratified
from .effects import (
    MIN_REPETITIONS,
    PRIVACY_COLUMNS,
    VARIANT,
    Study,
    curve_cells,
    fmt,
    frr_effect,
    frr_reference,
    load_studies,
    main_effect,
    ranking,
    reference_levels,
    regret_names,
)
from .load import ResultsError
from .phases import linear_phases
from .report_metrics import metrics_blocks

#: A document is a list of blocks: ("h1" | "h2" | "h3" | "p", text),
#: ("ul", [items]), ("table", header, rows), ("img", file name, alt text).
Block = tuple


def _range(lo: int, hi: int) -> str:
    """`lo`, or `lo to hi` where they differ."""
    return f"{lo}" if lo == hi else f"{lo} to {hi}"


def _num(v, digits: int = 4) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.{digits}g}"
    return str(v)


def _pm(mean, lo, hi) -> str:
    if lo is None or hi is None or math.isnan(lo):
        return f"{_num(mean)} (no interval: < 3 repetitions)"
    return f"{_num(mean)} ± {_num((hi - lo) / 2, 2)}"


def short_commit(commit: str) -> str:
    """The engine commit, shortened, keeping the build's `+dirty` mark (a
    build of sources that differ from the commit: src/build.rs)."""
    dirty = commit.endswith("+dirty")
    return commit.removesuffix("+dirty")[:12] + ("+dirty" if dirty else "")


def header(s: Study) -> list[Block]:
    """The run: what was computed, by which engine, at what cost."""
    m, final = s.meta, s.final
    reps = s.cells["n"]
    shards = sorted({f.name for f in s.files})
    steps = final.select((pl.col("m").cast(pl.Float64) * pl.col("horizon").cast(pl.Float64)).sum()).item() if "m" in final.columns else None
    backends = ", ".join(f"{b} ({n} repetitions)" for b, n in final.group_by("backend").len().sort("backend").iter_rows())
    per_algo = ", ".join(f"{a} {n}" for a, n in s.cells.group_by("variant", maintain_order=True).len().iter_rows())
    axes = "; ".join(f"`{a.name}`: {', '.join(fmt(v) for v in a.values)}{' (log axis)' if a.log else ''}" for a in s.axes) or "none"
    rows = [
        ("job", f"`{s.job}` ({m.get('job_path', '?')}, identity {m.get('job_identity', '?')})"),
        (
            "engine",
            f"fedbandits {m.get('version', '?')}, commit {short_commit(m.get('git_commit', '?'))}, "
            f"semantics {m.get('semantics_version', '?')}",
        ),
        ("family", f"{s.family or '?'}" + (f" (baseline of the federated regret ratio: `{s.baseline}`)" if s.baseline else "")),
        (
            "files",
            f"{len(s.files)} part file(s): {', '.join(shards[:4])}{' ...' if len(shards) > 4 else ''}; "
            + ("complete" if not s.incomplete else "INCOMPLETE (see warnings)"),
        ),
        ("cells", f"{s.cells.height} ({per_algo})"),
        ("repetitions per cell", _range(int(stats.scalar(reps.min())), int(stats.scalar(reps.max())))),
        ("rows", f"{s.rows:,}"),
        ("horizon", ", ".join(str(h) for h in sorted(final["horizon"].unique().to_list()))),
        ("agent-steps", f"{steps:.3e}" if steps is not None else "unknown"),
        ("wall time", f"{final['wall_seconds'].sum():.1f} s (sum of the repetitions' wall times; they run in parallel)"),
        ("backend", backends),
        ("swept axes", axes),
        ("final value", f"{s.regret_word()} at t = horizon: " + "; ".join(regret_names(s.families, set(final["algorithm"].to_list())))),
        ("scale", f"{s.scale} ({s.scale_why}). {stats.scale_note(s.scale)}"),
    ]
    return [("h2", "Run"), ("table", ["", ""], rows)]


def _family_privacy_columns(s: Study) -> list[str]:
    """The privacy columns of this job's family: the shared ones and its
    own, not those only another family fills."""
    fams = s.families
    own = set(fams.get(s.family, {}).get("columns", []))
    others = {c for n, f in fams.items() if n != s.family for c in f.get("columns", [])} - own
    return [c for c in PRIVACY_COLUMNS if c in s.final.columns and c not in others]


def privacy(s: Study) -> list[Block]:
    """Every privacy figure present (by column) per private cell, and why
    each null figure is null (the notes the accountant wrote)."""
    listed = {c["cell_id"]: c for c in s.privacy.get("cells", [])}
    private = s.final.filter(pl.col("cell_id").is_in(list(listed))).unique("cell_id", keep="first").sort("cell_index")
    if private.height == 0:
        return [("h2", "Privacy"), ("p", "No cell of this job is private (no privacy figure to report).")]
    cols = _family_privacy_columns(s)
    out: list[Block] = [("h2", "Privacy"), *contrast.privacy_table(s, cols)]
    nulls = []
    for c in cols:
        # A column is the row's where its variant fills it in some cell or
        # a note of the cell names it (another family's, or another
        # mechanism's, is not listed as a null of this one).
        fills = set(private.filter(pl.col(c).is_not_null())[VARIANT].to_list())
        missing = [
            r["cell_id"]
            for r in private.filter(pl.col(c).is_null()).iter_rows(named=True)
            if r[VARIANT] in fills or any(c in n for n in listed[r["cell_id"]].get("notes", []))
        ]
        if not missing:
            continue
        notes = sorted({n for cid in missing for n in listed[cid].get("notes", [])})
        named = [n for n in notes if c in n]
        why = " / ".join(_similar(named)) if named else "no note in the file names this column"
        nulls.append(f"`{c}` null in {len(missing)} of {private.height} private cells: {why}")
    if nulls:
        out += [("p", "Null figures and why:"), ("ul", nulls)]
    relations = sorted({c.get("relation", "") for c in listed.values()} - {""})
    if relations:
        out.append(("p", "Neighbouring relation the figures assume: " + " / ".join(relations)))
    return out


def _similar(notes: list[str]) -> list[str]:
    """Notes that differ only in their numbers once each: the first, with
    how many more read alike."""
    groups: dict[str, list[str]] = {}
    for n in notes:
        groups.setdefault(re.sub(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?", "#", n), []).append(n)
    return [g[0] + (f" (and {len(g) - 1} more alike but for their numbers)" if len(g) > 1 else "") for g in groups.values()]


def _flat(flat: bool | None) -> str:
    return "undetermined (needs 2+ repetitions per cell)" if flat is None else "flat" if flat else "resolved"


def ranking_blocks(s: Study, ranked: pl.DataFrame) -> list[Block]:
    """The axes ranked per variant (effects.py's module doc)."""
    ratio = s.scale == "ratio"
    rows = []
    for i, r in enumerate(ranked.iter_rows(named=True)):
        ext = stats.Estimate.of(r["extreme"], r["extreme_lo"], r["extreme_hi"])
        score = (
            stats.fmt_ratio(r["score"]) if ratio else (_num(r["score"], 3) if r["score"] is not None else "n/a (one repetition per cell)")
        )
        rows.append(
            [
                str(i + 1),
                f"`{r['axis']}`",
                r["variant"],
                str(r["values"]),
                score,
                f"{stats.fmt_estimate(ext, s.scale)} ({r['extreme_pair']})",
                _flat(r["flat"]),
                r["paired"],
            ]
        )
    score = "fold range (largest / smallest level)" if ratio else "effect size (range in within-cell sds)"
    return [
        ("h2", "Axes ranked, per variant"),
        (
            "p",
            "A variant is an algorithm with the parameters that change what it is or how it is accounted (the family "
            "registry's `variant_params`, e.g. `private`, `protocol`, `calibration`): axes are analysed within each "
            "variant they vary in, never pooled across variants. "
            + (
                "Score: the fold range of the variant's main-effect levels (geometric means) over the axis. "
                if ratio
                else "Score: the range of the variant's main-effect means over the axis in units of its pooled within-cell sd. "
            )
            + "Highest vs lowest: the paired contrast of those two levels, taken within each repetition (cells share "
            "random numbers within a repetition), with its 95% interval. Verdict: flat where no two values' paired "
            "contrast resolves an effect, resolved otherwise; resolved axes rank first. Steps: the neighbouring values "
            "the paired contrast resolves. " + stats.scale_note(s.scale),
        ),
        ("table", ["rank", "axis", "variant", "values", score, "highest vs lowest level (paired)", "verdict", "steps resolved"], rows),
    ]


def _effect_table(eff: pl.DataFrame, refs: pl.DataFrame, y: str = "mean", scale: str = "additive") -> tuple[Block, str]:
    """The main effect as a table (values down, variants across; each
    cell its level, 95% interval and median) and a note of how many cells
    each point pools."""
    algos = eff["variant"].unique(maintain_order=True).to_list()
    values = eff["value"].unique(maintain_order=True).to_list()
    cells = sorted(set(eff["cells"].to_list()))
    uniform = len(cells) == 1
    medians = "median" in eff.columns
    rows = []
    for v in values:
        row = [fmt(v)]
        for a in algos:
            hit = eff.filter((pl.col("variant") == a) & (pl.col("value") == v))
            if hit.height == 0:
                row.append("")
                continue
            r = hit.row(0, named=True)
            text = _interval(r[y], r["lo"], r["hi"])
            if medians:
                text += f"; median {_num(r['median'])}"
            row.append(text + ("" if uniform else f" ({r['cells']} cells)"))
        rows.append(row)
    note = f"Each point pools {cells[0]} cell(s)" if uniform else "Cells pooled per point in parentheses"
    reps = sorted(set(eff["reps"].to_list()))
    center = stats.center_name(scale) if y == "mean" else "ratio"
    note += f", {reps[0] if len(reps) == 1 else f'{reps[0]} to {reps[-1]}'} repetitions; each entry: {center} [95% interval]"
    note += "; median over repetitions." if medians else "."
    if refs.height:
        note += (
            " Cells the axis does not apply to (the dashed levels): "
            + "; ".join(
                f"{r['variant']} ({r['cells']} cell{'s' if r['cells'] > 1 else ''}) {_interval(r[y], r['lo'], r['hi'])}"
                for r in refs.iter_rows(named=True)
            )
            + "."
        )
    if len(algos) > WIDE:
        # Many variants (strata): one row each, the values across.
        flipped = [[a, *[row[1 + j] for row in rows]] for j, a in enumerate(algos)]
        return ("table", ["variant", *[fmt(v) for v in values]], flipped), note
    return ("table", ["value", *algos], rows), note


#: A main-effect table with more variants than this has one row per variant.
WIDE = 5


def _interval(center, lo, hi) -> str:
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return f"{_num(center)} (no interval: too few repetitions)"
    return f"{_num(center)} [{_num(lo, 3)}, {_num(hi, 3)}]"


def main_effects(
    s: Study, out: Path, effects: dict[str, pl.DataFrame], mode: str = "target", studies: dict[str, Study] | None = None
) -> list[Block]:
    """The report's "Main effects" section: per swept axis, the final
    regret of each variant against it (a plot in `out` and its table), and
    the federated regret ratio where the family has a baseline; `mode`
    "accounted" draws epsilon at each cell's accounted figure; `studies`:
    per axis, the study with the variants it interacts in split into
    strata (contrasts.stratified)."""
    blocks: list[Block] = [("h2", "Main effects")]
    if not s.axes:
        return blocks + [("p", "The job sweeps no parameter (one cell per algorithm): no main effect to draw.")]
    palette = plots.colors(s)
    center = stats.center_name(s.scale)
    blocks.append(
        (
            "p",
            f"Final {s.regret_word()} against each axis: the {center} over repetitions with its 95% interval and the median, "
            "the other axes pooled within each repetition (each of their combinations counted once). "
            + stats.scale_note(s.scale)
            + (" Drawn on a log axis." if s.scale == "ratio" else "")
            + " Strata, not pools: where the axis interacts with another within a variant (Interactions, detected at "
            "the family-wise level), that variant's levels are shown per level of the other, as `variant [m=16]`.",
        )
    )
    for axis in s.axes:
        sa = (studies or {}).get(axis.name, s)
        eff, refs = effects[axis.name], reference_levels(sa, axis)
        if not eff.height:
            # An axis no variant varies in: a job of several families whose
            # algorithms each run on their own family's environment.
            blocks += [
                ("h3", f"`{axis.name}`"),
                ("p", f"No variant runs at more than one value of `{axis.name}` (each runs at its own): no main effect to show."),
            ]
            continue
        name = f"{s.job}_effect_{axis.name}.png"
        drawn, spread = eff, cast("list", [])
        title = f"{s.job}: final {s.regret_word()} ({center}) vs {axis.name}"
        if axis.name == "epsilon" and mode == "accounted" and "acct_epsilon" in s.final.columns:
            drawn, spread = contrast.accounted_x(s, eff)
            title = f"{s.job}: final {s.regret_word()} ({center}) vs accounted epsilon (points labelled with their target)"
        plots.effect_plot(
            axis, drawn, refs, out / name, title, palette, label=plots.ylabel_of(s.scale, s.regret_word()), log_y=s.scale == "ratio"
        )
        table, note = _effect_table(eff, refs, scale=s.scale)
        if spread:
            note += " Points whose cells provide different accounted figures: " + "; ".join(spread) + "."
        blocks += [("h3", f"`{axis.name}`"), ("img", name, f"final regret vs {axis.name}"), table, ("p", note)]
        blocks += _frr_blocks(sa, out, axis, eff, palette)
    return blocks


def _frr_blocks(s: Study, out: Path, axis, eff: pl.DataFrame, palette: dict) -> list[Block]:
    """The federated regret ratio against `axis` (effects.py), where the
    family's baseline is in the study."""
    frr = frr_effect(s, axis, eff)
    if frr is None or not frr.height:
        return []
    fname = f"{s.job}_frr_{axis.name}.png"
    frr_lines = frr.select("variant", "value", "frr", "lo", "hi", "cells", "reps")
    frr_refs = frr_reference(s, axis)
    how = "geometric mean of the per-repetition ratios" if s.scale == "ratio" else "ratio of means"
    plots.effect_plot(
        axis,
        frr_lines,
        frr_refs,
        out / fname,
        f"{s.job}: final regret over {s.baseline}'s ({how}) vs {axis.name}",
        palette,
        y="frr",
        label=f"final regret / {s.baseline}'s ({how}; 1: as good as not federating)",
        log_y=s.scale == "ratio",
    )
    ftable, fnote = _effect_table(frr_lines, frr_refs, y="frr", scale=s.scale)
    return [
        ("img", fname, f"ratio to {s.baseline} vs {axis.name}"),
        ftable,
        (
            "p",
            f"Federated regret ratio: final regret over `{s.baseline}`'s (not federating) at the same value (its overall "
            f"level where the axis does not apply to it), below 1 where federation helps; the {how}, paired by "
            f"repetition (effects.py). {fnote}",
        ),
    ]


def curve_blocks(s: Study, out: Path, phases: dict | None = None) -> list[Block]:
    """The report's "Regret curves" section: per variant, the curves of its
    best, worst and grid-corner cells (plots in `out`), with each cell's
    learning phases where `phases` holds them."""
    blocks: list[Block] = [
        ("h2", "Regret curves"),
        (
            "p",
            "Per variant: its best and worst cells (lowest and highest mean final regret) and the cells at the grid's corners (dashed); "
            + (
                "the geometric mean over repetitions with its 95% Student-t band on the log scale (none below 3 repetitions); "
                if s.scale == "ratio"
                else "mean and 95% percentile-bootstrap band over repetitions (none below 3 repetitions); "
            )
            + "log-log with each cell's growth exponent "
            "when the checkpoints span two decades or more, and the end of its linear stretch where it is long (phases.py). "
            "The variants side by side: every variant (each value of a variant parameter such as `protocol` is its own) at "
            "the first, middle and last value of the axis most variants share.",
        ),
    ]
    chosen = curve_cells(s)
    single = [cells[0] for cells in chosen.values() if len(cells) == 1]
    if len(single) > 1:
        name = f"{s.job}_curves_single.png"
        plots.curves(s, None, single, out / name, phases=phases)
        blocks.append(("img", name, "regret curves of the variants with one cell"))
    for algo, cells in chosen.items():
        if len(cells) == 1 and len(single) > 1:
            continue
        name = f"{s.job}_curves_{re.sub(r'[^A-Za-z0-9_.-]', '_', algo)}.png"
        plots.curves(s, algo, cells, out / name, phases=phases)
        blocks.append(("img", name, f"{algo} regret curves"))
    for k, (title, cells) in enumerate(matched_groups(s)):
        name = f"{s.job}_matched_{k + 1}.png"
        plots.curves(s, None, cells, out / name, title=f"{s.job}: variants at {title}", phases=phases)
        blocks.append(("img", name, f"variants at {title}"))
    return blocks


#: At most this many figures of the variants side by side.
MAX_MATCHED = 3


def matched_groups(s: Study) -> list[tuple[str, list[tuple[str, str]]]]:
    """Groups of matched settings, each with one cell per variant: the axis
    shared by the most variants (ties: grid order) at its first, middle and
    last values; in each, every variant's cell at that value with its other
    axes at their middle value (variants the axis does not apply to: their
    cell at their middle values)."""
    variants = s.cells["variant"].unique(maintain_order=True).to_list()
    if len(variants) < 2:
        return []
    shared = [
        (sum(1 for v in variants if s.cells.filter((pl.col("variant") == v) & pl.col(a.name).is_not_null()).height), a) for a in s.axes
    ]
    shared = [x for x in shared if x[0] >= 2]
    if not shared:
        return []
    axis = max(shared, key=lambda x: x[0])[1]
    values = axis.values if len(axis.values) <= MAX_MATCHED else [axis.values[0], axis.values[len(axis.values) // 2], axis.values[-1]]
    groups = []
    for value in values:
        cells = []
        for v in variants:
            part = s.cells.filter(pl.col("variant") == v)
            if part[axis.name].drop_nulls().len():
                part = part.filter(pl.col(axis.name) == value)
            for a in s.axes:
                if a.name == axis.name or a.name not in part.columns or not part[a.name].drop_nulls().len():
                    continue
                used = [x for x in a.values if x in set(part[a.name].drop_nulls().to_list())]
                part = part.filter(pl.col(a.name) == used[len(used) // 2])
            if part.height:
                cells.append((part.sort("cell_index")["cell_id"][0], ""))
        if len(cells) >= 2:
            groups.append((f"{axis.name}={fmt(value)} (other axes at their middle values)", cells))
    return groups


def job_report(s: Study, out: Path, privacy_axis: str | None = None, frame: pl.DataFrame | None = None) -> list[Block]:
    """Every section of one job's report (the figures written into `out`);
    `privacy_axis`: accounted, target, or None (accounted when every
    private cell has a figure); `frame`: its contrasts (compare.py),
    computed when not given."""
    frame = comparisons.contrasts(s) if frame is None else frame
    mode, why = contrast.privacy_axis_mode(s, privacy_axis)
    found = interactions(s.final, s.axes, s.metric, s.scale)
    studies = {a.name: stratified(s, a, found) for a in s.axes}
    effects = {a.name: main_effect(studies[a.name], a) for a in s.axes}
    ranked = ranking(s, effects, studies)
    phases = linear_phases(s.lf, s.metric)
    extra: list[str] = [*report_warnings.long_phase_warnings(s, phases), *report_warnings.sync_warnings(s)]
    extra += [*report_warnings.baseline_warnings(s, frame), *comms.clipping_warnings(s)]
    warned = report_warnings.warnings(s, ranked, extra)
    description = _description(s.meta.get("job_yaml", ""))
    blocks: list[Block] = [("h1", f"Sensitivity report: {s.job}")]
    if description:
        blocks.append(("p", description))
    blocks += question.compare_blocks(s, out, frame)
    blocks += [("h2", "Warnings")] + _warning_blocks(warned)
    blocks += header(s) + privacy(s)
    if s.axes:
        blocks += ranking_blocks(s, ranked)
    if "epsilon" in {a.name for a in s.axes}:
        blocks.append(("p", f"Privacy axis of the epsilon plots: {mode} epsilon ({why})."))
    blocks += main_effects(s, out, effects, mode, studies) + contrast.interaction_blocks(s, out, found)
    blocks += contrast.cost_blocks(s, out, mode) + question.split_blocks(s)
    blocks += comms.comms_blocks(s, out, phases) + question.facts_blocks(s) + metrics_blocks(s, out)
    blocks += curve_blocks(s, out, {r["cell_id"]: r for r in phases.iter_rows(named=True)})
    return blocks


def _warning_blocks(warned: list) -> list[Block]:
    """One line per warning (report_warnings.Warned), each followed by the
    table of the cells it concerns."""
    if not warned:
        return [("p", f"None (every cell has {MIN_REPETITIONS}+ repetitions, no health counter fired, no flat axis, the run is complete).")]
    out: list[Block] = []
    for w in warned:
        out.append(("ul", [str(w)]))
        if getattr(w, "table", None):
            out.append(("table", *w.table))
    return out


def _description(job_yaml: str) -> str:
    found = re.search(r"^description:\s*(.+)$", job_yaml, re.M)
    return found.group(1).strip().strip("\"'") if found else ""


def _inline_md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: list[Block]) -> str:
    """The report's blocks (headings, paragraphs, tables, images, lists)
    as Markdown text."""
    lines: list[str] = []
    for b in blocks:
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            lines += ["#" * int(kind[1]) + " " + b[1], ""]
        elif kind == "p":
            lines += [b[1], ""]
        elif kind == "ul":
            lines += [f"- {item}" for item in b[1]] + [""]
        elif kind == "table":
            head, rows = b[1], b[2]
            lines.append("| " + " | ".join(_inline_md(h) for h in head) + " |")
            lines.append("|" + "|".join("---" for _ in head) + "|")
            lines += ["| " + " | ".join(_inline_md(str(c)) for c in row) + " |" for row in rows]
            lines.append("")
        elif kind == "img":
            lines += [f"![{b[2]}]({b[1]})", ""]
    return "\n".join(lines)


def _inline_html(text: str) -> str:
    t = html.escape(text)
    t = re.sub(r"`([^`]+)`", r"<code>\1</code>", t)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", t)


def to_html(blocks: list[Block], out: Path, title: str) -> str:
    """One self-contained page: the images inlined as base64 data."""
    body = []
    for b in blocks:
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            body.append(f"<{kind}>{_inline_html(b[1])}</{kind}>")
        elif kind == "p":
            body.append(f"<p>{_inline_html(b[1])}</p>")
        elif kind == "ul":
            body.append("<ul>" + "".join(f"<li>{_inline_html(i)}</li>" for i in b[1]) + "</ul>")
        elif kind == "table":
            head = "".join(f"<th>{_inline_html(h)}</th>" for h in b[1])
            rows = "".join("<tr>" + "".join(f"<td>{_inline_html(str(c))}</td>" for c in row) + "</tr>" for row in b[2])
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif kind == "img":
            data = base64.b64encode((out / b[1]).read_bytes()).decode()
            body.append(f'<p><img alt="{html.escape(b[2])}" src="data:image/png;base64,{data}"></p>')
    style = (
        "body{font-family:sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#222}"
        "table{border-collapse:collapse;margin:0.5em 0;font-size:0.9em;display:block;max-width:100%;overflow-x:auto}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;overflow-wrap:break-word}"
        "th{overflow-wrap:normal;word-break:keep-all;hyphens:none}"
        "img{max-width:100%}code{background:#f3f3f3;padding:0 2px}"
    )
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{style}</style></head><body>\n'
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def report(
    path: str | Path, out: str | Path, html_page: bool = False, progress=None, privacy_axis: str | None = None, scale: str = "ratio"
) -> Path:
    """Writes the sensitivity report of every job under `path` into `out`
    (report.md, the PNGs, and with `html_page` report.html), read on
    `scale` (stats.SCALES: ratio by default, additive on request); returns
    the path of report.md. Raises ResultsError when `path` cannot be read."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    blocks: list[Block] = []
    studies = load_studies(path, scale)
    if len(studies) > 1:
        blocks.append(("p", f"{len(studies)} jobs, one section each: " + ", ".join(f"`{s.job}`" for s in studies) + "."))
    frames = []
    for s in studies:
        if progress:
            progress(f"{s.job}: {s.cells.height} cells, {s.rows:,} rows")
        frame = comparisons.contrasts(s)
        frames.append(frame.with_columns(job=pl.lit(s.job)))
        blocks += job_report(s, out, privacy_axis, frame)
    question.write_csv(frames, out)
    md = out / "report.md"
    _write_text(md, to_markdown(blocks))
    if html_page:
        _write_text(out / "report.html", to_html(blocks, out, f"fedbandits report: {Path(path).name}"))
    return md


def main(argv: list[str] | None = None) -> int:
    """The command line (`python -m fedbandits_analysis.report RESULTS
    --out DIR`): the sensitivity report of every job under RESULTS; 0 on
    success."""
    p = argparse.ArgumentParser(prog="python -m fedbandits_analysis.report", description=__doc__.split("\n\n")[0])
    p.add_argument("results", help="a job's results directory (merged or sharded), a root of several, or a Parquet file")
    p.add_argument("--out", required=True, help="directory for report.md and its figures (created)")
    p.add_argument("--html", action="store_true", help="also write report.html, one file with the images embedded")
    p.add_argument(
        "--privacy-axis",
        choices=["accounted", "target"],
        default=None,
        help="epsilon on the effect plots: the accounted figure (acct_epsilon; default when every private cell has one) or the target",
    )
    p.add_argument(
        "--scale",
        choices=list(stats.SCALES),
        default="ratio",
        help="ratio (default): geometric means and paired ratios of final regret; additive: arithmetic means and paired differences",
    )
    a = p.parse_args(argv)
    start = time.perf_counter()
    try:
        md = report(
            a.results,
            a.out,
            a.html,
            progress=lambda m: print(f"report: {m}", file=sys.stderr, flush=True),
            privacy_axis=a.privacy_axis,
            scale=a.scale,
        )
    except ResultsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: cannot write the report into {a.out}: {e.strerror or e}", file=sys.stderr)
        return 2
    made = [md] + ([md.with_suffix(".html")] if a.html else [])
    print(f"wrote {', '.join(str(m) for m in made)} in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

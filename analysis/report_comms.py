"""Communication and baselines beside regret (`fedbandits_analysis.report`):
per variant, each cell's sync rounds and messages, the round of its first
sync, its longest linear stretch (`phases.py`), its regret against not
federating (the family's baseline, linear `independent`) and against its
non-private counterpart, and the share of observations it clipped; a
regret-versus-communication figure; where epsilon is swept, the break-even
epsilon at which each private variant stops losing to not federating; and
a warning where a private cell clips more than its counterpart.

Definitions:
- **first sync**: the first checkpoint at which `sync_rounds` is positive,
  the median over repetitions (the sync happened at or before it, after
  the checkpoint before); "never" where no repetition synced.
- **vs baseline**: the cell's final regret over the baseline cell's of the
  same environment whose swept values agree where both have them (e.g.
  the same m), paired by repetition on the study's scale (stats.py).
- **break-even epsilon** of a private variant at one setting of its other
  axes: where its ratio to the baseline crosses 1 going up the epsilon
  grid, interpolated linearly in (ln epsilon, ln ratio); its interval is
  where the ratio's upper and lower 95% bounds cross 1 (pointwise bounds:
  approximate). "beyond the grid" where it loses at every epsilon swept,
  "below the grid" where it already wins at the smallest.
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl

from . import report_plots as plots
from . import stats
from .contrasts import counterparts, is_private, pair_ratios
from .effects import VARIANT, Study, fmt
from .phases import describe
from .report_warnings import first_syncs

Block = tuple
#: A private cell's clipped share this much (absolute) above its
#: counterpart's is warned: part of its cost of privacy is clipping bias.
CLIP_GAP = 0.01


def _matches(study: Study, cell: dict, other: dict) -> bool:
    return cell["environment"] == other["environment"] and all(
        cell.get(a.name) is None or other.get(a.name) is None or cell[a.name] == other[a.name] for a in study.axes
    )


def baseline_pairs(study: Study) -> dict[str, str]:
    """Each non-baseline cell's baseline cell (module doc), where the
    study has the family's baseline."""
    if study.baseline is None:
        return {}
    cells = list(study.cells.iter_rows(named=True))
    base = [c for c in cells if c[VARIANT] == study.baseline]
    out = {}
    for c in cells:
        if c[VARIANT] == study.baseline:
            continue
        found = [b for b in base if _matches(study, c, b)]
        if found:
            out[c["cell_id"]] = min(found, key=lambda b: b["cell_index"])["cell_id"]
    return out


def _est(row: dict | None) -> str:
    """A paired ratio with its interval (`x4.4 [2.51, 7.72]`; a ratio on
    either scale)."""
    if row is None:
        return ""
    return stats.fmt_estimate(stats.Estimate.of(row["frr"], row["lo"], row["hi"], row["reps"]), "ratio")


def _crossing(eps: list[float], y: list[float]) -> tuple[str, float]:
    """Where ln-ratio values `y` over ascending `eps` first cross 0 from
    above: ("at", epsilon), ("below", smallest) or ("beyond", largest)."""
    if y[0] <= 0:
        return "below", eps[0]
    for i in range(len(y) - 1):
        if y[i] > 0 >= y[i + 1]:
            lx0, lx1 = math.log(eps[i]), math.log(eps[i + 1])
            return "at", math.exp(lx0 + (0 - y[i]) * (lx1 - lx0) / (y[i + 1] - y[i]))
    return "beyond", eps[-1]


def _say(kind: str, x: float) -> str:
    return {"at": f"{x:.3g}", "below": f"below the grid (< {fmt(x)})", "beyond": f"beyond the grid (> {fmt(x)})"}[kind]


def break_even(study: Study, ratios: pl.DataFrame) -> list[list[str]]:
    """Rows (variant, setting, ratio at each epsilon, break-even epsilon
    [interval]) for every private variant whose epsilon is swept, per
    setting of its other axes."""
    if "epsilon" not in {a.name for a in study.axes} or not ratios.height:
        return []
    private = is_private(study)
    others = [a.name for a in study.axes if a.name != "epsilon"]
    cells = study.cells.filter(pl.col("cell_id").is_in(list(private)) & pl.col("epsilon").is_not_null()).join(ratios, on="cell_id")
    cells = cells.filter(pl.col("epsilon").is_finite() & pl.col("frr").is_not_null())
    rows = []
    for key, part in cells.sort("cell_index").group_by([VARIANT, *others], maintain_order=True):
        part = part.sort("epsilon")
        if part.height < 2:
            continue
        eps = part["epsilon"].to_list()
        ln = lambda col, part=part: [math.log(v) if v is not None and v > 0 else float("nan") for v in part[col].to_list()]  # noqa: E731
        mid, low, high = ln("frr"), ln("lo"), ln("hi")
        kind, x = _crossing(eps, mid)
        text = _say(kind, x)
        if not any(math.isnan(v) for v in low + high):
            (k_lo, x_lo), (k_hi, x_hi) = _crossing(eps, low), _crossing(eps, high)
            text += f" [{_say(k_lo, x_lo)}, {_say(k_hi, x_hi)}]"
        setting = ", ".join(f"{n}={fmt(v)}" for n, v in zip(others, key[1:], strict=True) if v is not None) or "-"
        at = "; ".join(f"{fmt(e)}: {stats.fmt_ratio(r)}" for e, r in zip(eps, part["frr"].to_list(), strict=True))
        rows.append([key[0], setting, at, text])
    return rows


def clipping_warnings(study: Study) -> list[str]:
    """Private cells whose clipped share exceeds their non-private
    counterpart's by CLIP_GAP or more."""
    if "clipped_share" not in study.cells.columns:
        return []
    pairs, _ = counterparts(study)
    share = {r["cell_id"]: r for r in study.cells.iter_rows(named=True)}
    hit = [
        (share[p], share[c])
        for p, c in pairs.items()
        if p in share and c in share and (share[p]["clipped_share"] or 0) - (share[c]["clipped_share"] or 0) >= CLIP_GAP
    ]
    if not hit:
        return []
    shown = "; ".join(
        f"{study.label(p)}: {100 * p['clipped_share']:.3g}% (counterpart {100 * (c['clipped_share'] or 0):.3g}%)" for p, c in hit[:5]
    )
    return [
        f"{len(hit)} private cell(s) clip a larger share of their observations than their non-private counterpart "
        f"({shown}{'; ...' if len(hit) > 5 else ''}): part of their cost of privacy is clipping bias, not noise"
    ]


def _table(study: Study, cells: pl.DataFrame, first: dict, phases: dict, base: dict, cost: dict) -> Block:
    center = stats.center_name(study.scale)
    head = ["cell", "sync rounds", "messages", "first sync (median t)", "longest linear stretch", f"final regret ({center})"]
    if base:
        head.append(f"vs `{study.baseline}`")
    if cost:
        head.append("vs non-private counterpart")
    clip = "clipped_share" in cells.columns
    if clip:
        head.append("clipped share")
    rows = []
    for r in cells.iter_rows(named=True):
        f = first.get(r["cell_id"], {})
        sync = (
            "never" if f.get("first_sync") is None else f"<= {f['first_sync']:,.0f}" + (f" ({f['never']} never)" if f.get("never") else "")
        )
        label = study.label(r).removeprefix(r[VARIANT]).strip() or "-"
        row = [
            label,
            _count(r.get("sync_rounds")),
            _count(r.get("messages")),
            sync,
            describe(phases.get(r["cell_id"], {})),
            f"{r['level']:.4g}",
        ]
        if base:
            row.append(_est(base.get(r["cell_id"])))
        if cost:
            row.append(_est(cost.get(r["cell_id"])))
        if clip:
            row.append("" if r["clipped_share"] is None else f"{100 * r['clipped_share']:.3g}%")
        rows.append(row)
    return ("table", head, rows)


def _count(v) -> str:
    return "" if v is None else f"{v:,.1f}".removesuffix(".0")


def comms_blocks(study: Study, out: Path, phases: pl.DataFrame) -> list[Block]:
    """The section of the module doc."""
    blocks: list[Block] = [("h2", "Communication and baselines")]
    first = first_syncs(study)
    ph = {r["cell_id"]: r for r in phases.iter_rows(named=True)}
    ratios = pair_ratios(study, baseline_pairs(study))
    base = {r["cell_id"]: r for r in ratios.iter_rows(named=True)}
    cost_pairs, _ = counterparts(study)
    cost = {r["cell_id"]: r for r in pair_ratios(study, cost_pairs).iter_rows(named=True)}
    level = study.final.group_by("cell_id").agg(
        level=pl.col(study.metric).log().mean().exp() if study.scale == "ratio" else pl.col(study.metric).mean()
    )
    cells = study.cells.join(level, on="cell_id").sort("cell_index")
    blocks.append(
        (
            "p",
            "Per variant, each cell's mean final sync rounds and messages, the median over repetitions of the first "
            "checkpoint after its first sync, its longest stretch of linear regret growth (local slope of ln regret "
            "against ln t >= 0.9 over a quarter decade, on the geometric-mean curve: phases.py), its final regret "
            + (f"against `{study.baseline}`'s (not federating) at the same swept values, " if base else "")
            + ("against its non-private counterpart's, " if cost else "")
            + "paired by repetition, and the share of its m x T observations clipped. "
            + stats.scale_note(study.scale),
        )
    )
    for (variant,), part in cells.group_by([VARIANT], maintain_order=True):
        blocks += [("h3", variant), _table(study, part, first, ph, base, cost)]
    if "messages" in cells.columns and cells["messages"].drop_nulls().len():
        name = f"{study.job}_communication.png"
        plots.communication_plot(study, cells, out / name)
        blocks.append(("img", name, "final regret against messages, per cell"))
    rows = break_even(study, ratios)
    if rows:
        blocks += [
            ("h3", f"Break-even epsilon against `{study.baseline}`"),
            (
                "p",
                "The epsilon at which each private variant's regret falls to that of not federating, per setting of its "
                "other axes: interpolated in (ln epsilon, ln ratio), the interval where the ratio's 95% bounds cross 1.",
            ),
            ("table", ["variant", "setting", f"ratio to `{study.baseline}` at each epsilon", "break-even epsilon [interval]"], rows),
        ]
    return blocks

"""Each family's own metrics in a sensitivity report
(`fedbandits_analysis.report`): their definitions, read from the family
registry the engine wrote (`metrics`, as `fedbandits list` prints them), a
table per variant of each cell's final values, and a figure of each metric
that moves along an axis.

Counts become shares where a count alone cannot be read: clipped
observations and forced pulls over the m x T observations (pulls),
constraint violations over the m x T agent-rounds, and P-FCB's accepted
messages over the messages it received (accepted + rejected). Every value
is the mean over repetitions of the final row (t = horizon)."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl

from . import report_plots as plots
from .effects import VARIANT, Study, fmt, pooled

Block = tuple
#: Counts read as a share of the m x T observations, pulls or agent-rounds.
PER_AGENT_ROUND = {"clipped_observations": "of observations", "forced_pulls": "of pulls", "constraint_violations": "of agent-rounds"}
#: At most this many metric figures per job.
MAX_FIGURES = 4


def _shown(study: Study) -> dict[str, str]:
    """The metrics of the families in the study (column -> definition), in
    registry order; messages_rejected folds into the accepted share."""
    algos = set(study.final["algorithm"].to_list())
    out: dict[str, str] = {}
    for f in study.families.values():
        if algos & set(f.get("algorithms", [])):
            out.update(f.get("metrics", {}) or {})
    return {c: d for c, d in out.items() if c in study.final.columns and c != "regret_after_exploration"}


def _values(study: Study, metrics: list[str]) -> tuple[pl.DataFrame, dict[str, str]]:
    """`final` with one column per metric as it is shown (a share where
    PER_AGENT_ROUND or the acceptance says so), and each column's heading."""
    exprs, heads = [], {}
    rounds = pl.col("m").cast(pl.Float64) * pl.col("horizon").cast(pl.Float64) if "m" in study.final.columns else None
    for c in metrics:
        if c == "messages_rejected":
            continue
        if c == "messages_accepted" and "messages_rejected" in study.final.columns:
            total = pl.col("messages_accepted").cast(pl.Float64) + pl.col("messages_rejected").cast(pl.Float64)
            exprs.append((pl.col("messages_accepted").cast(pl.Float64) / total).alias(c))
            heads[c] = "accepted share of messages"
        elif c in PER_AGENT_ROUND and rounds is not None:
            exprs.append((pl.col(c).cast(pl.Float64) / rounds).alias(c))
            heads[c] = f"`{c}` (share {PER_AGENT_ROUND[c]})"
        else:
            exprs.append(pl.col(c).cast(pl.Float64).alias(c))
            heads[c] = f"`{c}`"
    return study.final.with_columns(exprs), heads


def _cell(v, share: bool) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "null"
    return f"{100 * v:.3g}%" if share else f"{v:.4g}"


def metrics_blocks(study: Study, out: Path) -> list[Block]:
    """The section of the module doc."""
    defs = _shown(study)
    if not defs:
        return []
    rows, heads = _values(study, list(defs))
    shares = {c for c, h in heads.items() if "share" in h}
    blocks: list[Block] = [
        ("h2", "Family metrics"),
        (
            "p",
            "Definitions (the family registry, as `fedbandits list` prints them); each value below is the mean over repetitions at t = T:",
        ),
        ("ul", [f"`{c}`: {d}" for c, d in defs.items()]),
    ]
    means = rows.group_by("cell_id").agg([pl.col(c).mean() for c in heads])
    cells = study.cells.drop([c for c in heads if c in study.cells.columns]).join(means, on="cell_id").sort("cell_index")
    for (variant,), part in cells.group_by([VARIANT], maintain_order=True):
        mine = [c for c in heads if part[c].null_count() < part.height]
        if not mine:
            continue
        table = [
            [study.label(r).removeprefix(variant).strip() or "-", *[_cell(r[c], c in shares) for c in mine]]
            for r in part.iter_rows(named=True)
        ]
        blocks += [("h3", variant), ("table", ["cell", *[heads[c] for c in mine]], table)]
    return blocks + _figures(study, rows, heads, out)


def _figures(study: Study, rows: pl.DataFrame, heads: dict[str, str], out: Path) -> list[Block]:
    """Each metric that moves along the axis with the most values: its
    mean per variant against that axis (the other axes pooled)."""
    if not study.axes:
        return []
    axis = max(study.axes, key=lambda a: len(a.values))
    blocks: list[Block] = []
    palette = plots.colors(study)
    for c in heads:
        sub = rows.filter(pl.col(c).is_not_null() & pl.col(axis.name).is_not_null())
        if not sub.height:
            continue
        # In the axis's own order (the job's, for a categorical axis): the
        # points are joined in it.
        rank = pl.DataFrame({"value": axis.values, "_order": range(len(axis.values))}, schema_overrides={"value": sub.schema[axis.name]})
        eff = pooled(sub, [VARIANT, axis.name], c, "additive").rename({axis.name: "value"})
        eff = eff.join(rank, on="value", how="left").sort([VARIANT, "_order"]).drop("_order")
        moving = eff.group_by(VARIANT).agg(spread=pl.col("mean").max() - pl.col("mean").min(), n=pl.len())
        if not moving.filter((pl.col("n") > 1) & (pl.col("spread") > 0)).height:
            continue
        name = f"{study.job}_metric_{c}.png"
        plots.effect_plot(
            axis,
            eff,
            eff.head(0),
            out / name,
            f"{study.job}: {heads[c].replace('`', '')} vs {axis.name}",
            palette,
            label=heads[c].replace("`", ""),
        )
        blocks.append(("img", name, f"{c} vs {axis.name}"))
        if len(blocks) >= MAX_FIGURES:
            break
    if blocks:
        blocks.insert(
            0,
            (
                "p",
                f"Metrics that move along `{axis.name}` (mean over repetitions, 95% bootstrap interval, the other axes pooled; "
                f"values {', '.join(fmt(v) for v in axis.values)}):",
            ),
        )
    return blocks

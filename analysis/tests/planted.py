"""Synthetic studies with planted effects for the report's tests: rows built
as the engine writes them (one row per cell, repetition and checkpoint,
every parameter a column), each cell's final value a known function of its
repetition, so a test knows the answer it checks.

`study(rows, axes, params, private)` returns a `Study` whose curves rise as
t^0.6 to the planted final value at t = HORIZON over CHECKPOINTS (enough
for every section of the report to draw), with `sync_rounds` and
`messages` for the federated algorithms."""

from __future__ import annotations

import hashlib

import polars as pl
from fedbandits_analysis.effects import Axis, Study, _cell_table, with_variants

REPS = 20
HORIZON = 1000
CHECKPOINTS = (1, 3, 10, 30, 100, 300, 1000)
#: The family registry as the engine writes it (src/algo/linear/mod.rs).
FAMILIES = {
    "linear": {
        "algorithms": ["private_fedlinucb", "fedlinucb", "feducb_centralized", "feducb_decentralized", "independent"],
        "variant_params": ["private", "protocol", "calibration", "schedule", "neighbours", "clip_rewards"],
        "non_private": {"private_fedlinucb": "fedlinucb"},
        "baseline": "independent",
    }
}


def cell_id(algorithm: str, cell: dict) -> str:
    """A cell's id: a hash of its algorithm and parameters."""
    return hashlib.sha1(repr((algorithm, sorted(cell.items()))).encode()).hexdigest()[:16]


def study(
    rows: list[dict], axes: list[Axis], params: list[str], private: set[str], reps: int = REPS, families: dict | None = None, **kw
) -> Study:
    """A Study over planted rows: each of `rows` holds `algorithm`, `cell`
    (its parameters), `value` (repetition -> final agent_regret) and
    optionally `clipped` (the share of observations clipped); the
    repetitions are 0..reps-1. Keyword arguments go to Study (e.g.
    scale="additive" for a study planted on the additive scale); `families`:
    the registry (the linear family's by default)."""
    families = FAMILIES if families is None else families
    out = []
    for i, r in enumerate(rows):
        cid = cell_id(r["algorithm"], r["cell"])
        talks = r["algorithm"] not in ("independent", "non_federated", "local_ucb")
        m = r["cell"].get("m") or 4
        for rep in range(reps):
            final = r["value"](rep)
            for t in CHECKPOINTS:
                out.append(
                    {
                        "job": "planted",
                        "cell_id": cid,
                        "cell_index": i,
                        "algorithm": r["algorithm"],
                        "environment": "linear_sphere",
                        "horizon": HORIZON,
                        **{p: r["cell"].get(p) for p in params},
                        "repetition": rep,
                        "t": t,
                        "agent_regret": final * (t / HORIZON) ** 0.6,
                        "sync_rounds": t // 25 if talks else 0,
                        "messages": (t // 25) * m if talks else 0,
                        "target_epsilon": r["cell"].get("epsilon"),
                        "acct_epsilon": r["cell"].get("epsilon"),
                        "clipped_observations": round(r.get("clipped", 0.0) * m * t),
                        "backend": "cpu",
                        "wall_seconds": 0.0,
                    }
                )
    frame = pl.DataFrame(out, infer_schema_length=None)
    if "private" not in frame.columns:  # the engine writes every parameter column
        frame = frame.with_columns(private=pl.lit(None, pl.Boolean))
    frame = with_variants(frame, families)
    final = frame.filter(pl.col("t") == pl.col("horizon"))
    keys = ["cell_id", "cell_index", "algorithm", "variant", "environment", *[a.name for a in axes]]
    cells = _cell_table(final, "agent_regret", keys)
    ids = final.filter(pl.col("algorithm").is_in(list(private)) & pl.col("private").fill_null(True))["cell_id"].unique().to_list()
    privacy = {"cells": [{"cell_id": c} for c in ids]}
    family = next(iter(families))
    base = families[family].get("baseline")
    baseline = base if base in set(final["variant"].to_list()) else None
    return Study(
        "planted", {}, [], None, frame.height, final, cells, axes, family, baseline, frame.lazy(), privacy, families, params=params, **kw
    )

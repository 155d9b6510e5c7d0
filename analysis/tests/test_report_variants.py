"""Planted effects: the report compares algorithm variants, finds
the interaction that exists, and recovers the cost of privacy. The data are
synthetic final rows with known effects (fixed seed), built as the engine
writes them (one row per cell and repetition at t = horizon, a per-repetition
shift shared by every cell as common random numbers give), so each test
knows the answer it checks."""

from __future__ import annotations

import itertools

import numpy as np
import planted
import polars as pl
from fedbandits_analysis.contrasts import interactions, privacy_cost
from fedbandits_analysis.effects import Axis, main_effect, ranking
from fedbandits_analysis.report_warnings import warnings
from planted import REPS


def study(rows, axes, params, private):
    """A planted study read on the additive scale, the scale these effects
    are planted on (planted.py)."""
    return planted.study(rows, axes, params, private, scale="additive")


def test_a_sync_effect_only_in_the_non_private_variant_is_ranked_there_and_flat_in_the_private_one() -> None:
    rng = np.random.default_rng(1)
    shared = rng.normal(0, 10, REPS)
    rows = []
    for private, sync, m in itertools.product([True, False], ["log", "every_round"], [5, 10]):
        own = rng.normal(0, 5, REPS)
        # Non-private: every_round syncs cost 3x less regret; private: no sync effect.
        base = 300.0 if private else (30.0 if sync == "every_round" else 100.0)
        rows.append(
            {
                "algorithm": "feducb_centralized",
                "cell": {"private": private, "sync": sync, "m": m},
                "value": lambda rep, b=base, o=own: b + shared[rep] + o[rep],
            }
        )
    axes = [Axis("sync", ["log", "every_round"], False, False), Axis("m", [5, 10], True, False)]
    s = study(rows, axes, ["private", "sync", "m"], {"feducb_centralized"})
    assert sorted(s.cells["variant"].unique().to_list()) == ["feducb_centralized (non-private)", "feducb_centralized (private)"]
    ranked = ranking(s, {a.name: main_effect(s, a) for a in s.axes})
    top = ranked.row(0, named=True)
    assert (top["axis"], top["variant"]) == ("sync", "feducb_centralized (non-private)")
    assert top["score"] > 5 and top["flat"] is False
    private_sync = ranked.filter((pl.col("axis") == "sync") & (pl.col("variant") == "feducb_centralized (private)")).row(0, named=True)
    assert private_sync["flat"] is True and private_sync["score"] < 1.5
    # Pooled over the two variants (the old report), sync's range would be
    # half the non-private one; per variant it is the planted 70.
    eff = main_effect(s, axes[0]).filter(pl.col("variant") == "feducb_centralized (non-private)")
    assert abs((eff["mean"].max() - eff["mean"].min()) - 70.0) < 8.0
    flat = [w for w in warnings(s, ranked) if "shows no effect" in w and "`sync`" in w]
    assert len(flat) == 1 and "feducb_centralized (private)" in flat[0]


def test_a_planted_interaction_is_found_first_and_a_missing_cross_is_never_drawn() -> None:
    rng = np.random.default_rng(2)
    shared = rng.normal(0, 10, REPS)
    rows = []
    for eps, b, m in itertools.product([1.0, 4.0, 16.0], [5, 125], [5, 10]):
        own = rng.normal(0, 4, REPS)
        # Additive in epsilon and m; epsilon x batch_size: the sign of the
        # batch-size effect flips with epsilon (the finding).
        value = 200.0 - 20.0 * np.log2(eps) + 3.0 * (m == 10) + (25.0 if b == 125 else -25.0) * (1 if eps < 4 else -1)
        rows.append(
            {
                "algorithm": "private_fedlinucb",
                "cell": {"epsilon": eps, "batch_size": b, "m": m},
                "value": lambda rep, v=value, o=own: v + shared[rep] + o[rep],
            }
        )
    # Another variant whose axes never cross (fedlinucb has no epsilon).
    for b in [5, 125]:
        own = rng.normal(0, 4, REPS)
        rows.append({"algorithm": "fedlinucb", "cell": {"batch_size": b, "m": 5}, "value": lambda rep, o=own: 50.0 + shared[rep] + o[rep]})
    axes = [Axis("epsilon", [1.0, 4.0, 16.0], True, False), Axis("batch_size", [5, 125], True, True), Axis("m", [5, 10], True, False)]
    s = study(rows, axes, ["epsilon", "batch_size", "m"], {"private_fedlinucb"})
    found = interactions(s.final, s.axes, s.metric, s.scale)
    first = found[0]
    assert (first.variant, first.a.name, first.b.name) == ("private_fedlinucb", "epsilon", "batch_size")
    # strongly resolved at the family-wise level, in within-cell sds (the
    # sign is the orientation of the strongest 2 x 2 sub-table)
    assert first.detected and first.lo * first.hi > 0 and min(abs(first.lo), abs(first.hi)) > 5
    others = [f for f in found[1:] if f.variant == "private_fedlinucb"]
    assert all(abs(f.strength) < abs(first.strength) / 5 and not f.detected for f in others)
    # fedlinucb varies batch_size only: no pair for it at all.
    assert not [f for f in found if f.variant == "fedlinucb"]


def test_a_planted_constant_cost_of_privacy_is_recovered_within_its_interval() -> None:
    rng = np.random.default_rng(3)
    shared = rng.normal(0, 30, REPS)
    rows = []
    base = {}
    for m, b in itertools.product([5, 10], [5, 25]):
        own = rng.normal(0, 5, REPS)
        base[(m, b)] = own
        v = 40.0 + 2.0 * m + 0.1 * b
        rows.append(
            {"algorithm": "fedlinucb", "cell": {"m": m, "batch_size": b}, "value": lambda rep, v=v, o=own: v + shared[rep] + o[rep]}
        )
    for eps, m, b in itertools.product([1.0, 4.0], [5, 10], [5, 25]):
        extra = rng.normal(0, 3, REPS)
        v = 40.0 + 2.0 * m + 0.1 * b + 60.0  # the planted cost: 60 whatever the setting
        rows.append(
            {
                "algorithm": "private_fedlinucb",
                "cell": {"epsilon": eps, "m": m, "batch_size": b},
                "value": lambda rep, v=v, o=base[(m, b)], e=extra: v + shared[rep] + o[rep] + e[rep],
            }
        )
    axes = [Axis("epsilon", [1.0, 4.0], True, False), Axis("m", [5, 10], True, False), Axis("batch_size", [5, 25], True, False)]
    s = study(rows, axes, ["epsilon", "m", "batch_size"], {"private_fedlinucb"})
    table, per_rep, missing = privacy_cost(s)
    assert missing == [] and table.height == 8
    # Eight 95% intervals: at least 6 cover 60 (probability 0.994 when each
    # covers with 0.95), and none misses by more than its own half-width.
    covered = 0
    for r in table.iter_rows(named=True):
        half = (r["diff_hi"] - r["diff_lo"]) / 2
        covered += r["diff_lo"] <= 60.0 <= r["diff_hi"]
        assert abs(r["diff"] - 60.0) < 2 * half, r
        assert half < 3.0  # paired: the shared shift (sd 30) cancels
    assert covered >= 6
    assert abs(per_rep["cost"].mean() - 60.0) < 1.0
    # A private cell whose counterpart is absent is named, not paired.
    lone = rows + [{"algorithm": "private_fedlinucb", "cell": {"epsilon": 1.0, "m": 20, "batch_size": 5}, "value": lambda rep: 200.0}]
    s2 = study(
        lone,
        [Axis("epsilon", [1.0, 4.0], True, False), Axis("m", [5, 10, 20], True, False), Axis("batch_size", [5, 25], True, False)],
        ["epsilon", "m", "batch_size"],
        {"private_fedlinucb"},
    )
    _, _, missing2 = privacy_cost(s2)
    assert len(missing2) == 1 and "m=20" in missing2[0]

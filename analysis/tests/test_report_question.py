"""Issue 70: the report answers the question a study was built to ask. On
synthetic studies with a known answer (planted.py; common random numbers:
one instance factor per repetition shared by every cell): a graph x m
reversal between two algorithms is reported per stratum, never pooled; a
combinatorial study where the cost of the algorithm exceeds the cost of
privacy says so; a non-private federated cell worse than not federating is
warned; a categorical metric figure joins its points in the job's order."""

from __future__ import annotations

import csv
import itertools
import re
from pathlib import Path

import numpy as np
import planted
import polars as pl
import pytest
from fedbandits_analysis import report as rep
from fedbandits_analysis import report_metrics
from fedbandits_analysis.effects import Axis

REPS = 8


def _instances(seed: int) -> tuple[np.random.Generator, np.ndarray]:
    """Per-repetition instance factors (ln-sd 0.5), shared by every cell."""
    rng = np.random.default_rng(seed)
    return rng, np.exp(rng.normal(0.0, 0.5, REPS))


def _cell(rng, inst, algorithm: str, cell: dict, level: float, **extra) -> dict:
    """A planted cell: level x the repetition's instance x its own noise
    (ln-sd 0.01)."""
    own = np.exp(rng.normal(0.0, 0.01, REPS))
    return {"algorithm": algorithm, "cell": cell, "value": lambda r, o=own: level * inst[r] * o[r], **extra}


def _section(md: str, heading: str) -> str:
    start = md.index(heading)
    nxt = md.find("\n## ", start + 1)
    return md[start : nxt if nxt >= 0 else len(md)]


#: decentralized / centralized: x0.5 on a ring at m = 16, x0.95 at m = 4,
#: x1 on the complete graph.
REVERSAL = {("ring", 16): 0.5, ("ring", 4): 0.95, ("complete", 16): 1.0, ("complete", 4): 1.0}


def _reversal_study():
    rng, inst = _instances(701)
    rows = []
    for m in (4, 16):
        central = 1000.0 * (m / 4) ** -0.5
        rows.append(_cell(rng, inst, "feducb_centralized", {"m": m}, central))
        for g in ("ring", "complete"):
            rows.append(_cell(rng, inst, "feducb_decentralized", {"m": m, "graph": g}, central * REVERSAL[(g, m)]))
    axes = [Axis("graph", ["ring", "complete"], False, False), Axis("m", [4, 16], True, False)]
    s = planted.study(rows, axes, ["m", "graph"], set(), reps=REPS)
    s.meta["compare"] = '[["feducb_decentralized", "feducb_centralized"]]'
    return s


def test_a_graph_by_m_reversal_is_reported_per_stratum(tmp_path: Path) -> None:
    s = _reversal_study()
    md = rep.to_markdown(rep.job_report(s, tmp_path))
    # The report leads with the declared question.
    assert md.index("## The study's question: algorithms compared") < md.index("## Warnings") < md.index("## Run")
    lead = _section(md, "## The study's question")
    assert "### feducb_decentralized / feducb_centralized (declared in the job's `compare:`)" in lead
    rows = {
        (r[0], r[1]): r
        for r in re.findall(r"^\| (ring|complete) \| (4|16) \| x([0-9.]+) \[([0-9.]+), ([0-9.]+)\] \| (\d+) \| ([a-z ]+) \|$", lead, re.M)
    }
    got = {(g, int(m)): float(x[2]) for (g, m), x in rows.items()}
    assert got.keys() == REVERSAL.keys(), lead
    for key, want in REVERSAL.items():
        assert got[key] == pytest.approx(want, rel=0.03), (key, got)
    assert rows[("ring", "16")][6] == "lower" and rows[("ring", "16")][5] == str(REPS)
    assert "`graph`: ring x0.5" in lead  # the range at each level
    # Strata, not pools: the graph effect of the decentralized form is read
    # per level of m (the interaction is detected), never as one level.
    effects = _section(md, "## Main effects")
    graph = effects[effects.index("### `graph`") : effects.index("### `m`")]
    assert "feducb_decentralized [m=4]" in graph and "feducb_decentralized [m=16]" in graph
    assert not re.search(r"\| feducb_decentralized \|", graph)
    # contrasts.csv: the same rows, machine-readable.
    rep_dir = tmp_path / "csv"
    from fedbandits_analysis.compare import contrasts
    from fedbandits_analysis.report_compare import write_csv

    rep_dir.mkdir()
    write_csv([contrasts(s).with_columns(job=pl.lit("planted"))], rep_dir)
    with open(rep_dir / "contrasts.csv", newline="") as f:
        table = list(csv.DictReader(f))
    mine = [r for r in table if r["numerator"] == "feducb_decentralized" and r["denominator"] == "feducb_centralized"]
    assert len(mine) == 4 and {"graph", "m", "ratio", "lo", "hi", "repetitions", "metric"} <= set(mine[0])
    ring16 = next(r for r in mine if r["graph"] == "ring" and r["m"] == "16")
    assert float(ring16["ratio"]) == pytest.approx(0.5, rel=0.03) and float(ring16["hi"]) < 1 and ring16["repetitions"] == str(REPS)


COMBINATORIAL = {
    "combinatorial": {
        "algorithms": ["non_federated", "fcb", "p_fcb"],
        "variant_params": ["neighbours", "calibration", "budget", "noise"],
        "non_private": {"p_fcb": "fcb"},
        "noiseless_at_inf": ["p_fcb"],
        "baseline": "non_federated",
    }
}
#: P-FCB without noise against FCB (the cost of the algorithm) and P-FCB
#: against itself without noise (the cost of privacy), per m.
ALGORITHM_COST = {2: 1.17, 10: 3.09}
PRIVACY_COST = {2: 1.1, 10: 1.05}


def test_the_cost_of_the_algorithm_is_told_from_the_cost_of_privacy(tmp_path: Path) -> None:
    rng, inst = _instances(702)
    rows = []
    for m in (2, 10):
        fcb = 400.0 / m
        rows += [
            _cell(rng, inst, "non_federated", {"m": m}, 3 * fcb),
            _cell(rng, inst, "fcb", {"m": m}, fcb),
            _cell(rng, inst, "p_fcb", {"m": m, "epsilon": 1.0, "noise": False}, fcb * ALGORITHM_COST[m]),
            _cell(rng, inst, "p_fcb", {"m": m, "epsilon": 1.0, "noise": True}, fcb * ALGORITHM_COST[m] * PRIVACY_COST[m]),
        ]
    axes = [Axis("m", [2, 10], True, False)]
    s = planted.study(rows, axes, ["m", "epsilon", "noise"], {"p_fcb"}, reps=REPS, families=COMBINATORIAL)
    md = rep.to_markdown(rep.job_report(s, tmp_path))
    split = _section(md, "## Cost of the algorithm and cost of privacy")
    assert "| private cell | noise-free twin | non-private sibling | noise | rest of the algorithm | total |" in split
    for m in (2, 10):
        line = next(x for x in split.splitlines() if x.startswith(f"| p_fcb (noise=true) m={m} "))
        noise, rest, total = (float(v) for v in re.findall(r"\| x([0-9.]+) \[", line))
        assert noise == pytest.approx(PRIVACY_COST[m], rel=0.02) and rest == pytest.approx(ALGORITHM_COST[m], rel=0.02), line
        assert total == pytest.approx(PRIVACY_COST[m] * ALGORITHM_COST[m], rel=0.02), line
    # At m = 10 the algorithm costs more than the privacy, and the report
    # says the two apart (no advice to add a counterpart it already has).
    assert ALGORITHM_COST[10] > PRIVACY_COST[10] and "have no noise-free twin" not in split


def test_a_non_private_federated_cell_worse_than_its_baseline_is_warned(tmp_path: Path) -> None:
    rng, inst = _instances(703)
    rows = [
        _cell(rng, inst, "independent", {"m": 4}, 100.0),
        _cell(rng, inst, "independent", {"m": 16}, 100.0),
        _cell(rng, inst, "fedlinucb", {"m": 4}, 160.0),  # worse than not federating
        _cell(rng, inst, "fedlinucb", {"m": 16}, 50.0),
    ]
    s = planted.study(rows, [Axis("m", [4, 16], True, False)], ["m"], set(), reps=REPS)
    md = rep.to_markdown(rep.job_report(s, tmp_path))
    warned = _section(md, "## Warnings")
    assert "- 1 federated cell(s) have more regret than not federating at the same stratum (1 of them non-private)" in warned
    line = next(x for x in warned.splitlines() if x.startswith("| fedlinucb m=4 | independent |"))
    assert re.search(r"\| x1\.6[0-9]* \[", line) and line.endswith("| no |")
    assert "| fedlinucb m=16 | independent |" not in warned


def test_a_categorical_metric_figure_joins_its_points_in_the_jobs_order(tmp_path: Path, monkeypatch) -> None:
    rng, inst = _instances(704)
    order = ["ring", "erdos_renyi", "complete"]  # the job's order, not the alphabet's
    rows = [
        _cell(rng, inst, "fedlinucb", {"graph": g, "m": m}, 100.0, clipped=0.1 * (i + 1))
        for (i, g), m in itertools.product(enumerate(order), (4, 8))
    ]
    families = {"linear": {**planted.FAMILIES["linear"], "metrics": {"clipped_observations": "observations clipped"}}}
    s = planted.study(rows, [Axis("graph", order, False, False), Axis("m", [4, 8], True, False)], ["graph", "m"], set(), REPS, families)
    drawn = []
    monkeypatch.setattr(report_metrics.plots, "effect_plot", lambda axis, lines, *a, **k: drawn.append(lines))
    report_metrics.metrics_blocks(s, tmp_path)
    assert drawn, "no metric figure drawn"
    assert drawn[0]["value"].to_list() == order

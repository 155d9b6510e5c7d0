"""Issue 54: the report reads every family right. A cell that never starts
learning is told apart from one that learned and stalled (curves with a
known answer); P-FCB's cost of privacy is measured against P-FCB without
noise, and the combinatorial family is read after its exploration phase
(small real runs)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
from fedbandits_analysis import report as rep
from fedbandits_analysis.contrasts import counterparts
from fedbandits_analysis.effects import load_studies
from fedbandits_analysis.phases import per_round_levels

ROOT = Path(__file__).resolve().parents[2]


def _engine(*args: str) -> None:
    exe = Path(os.environ.get("FEDBANDITS_BIN", ROOT / "target" / "release" / "fedbandits"))
    assert exe.exists(), f"{exe} not built: run `cargo build --release` (.ci/run does) or set FEDBANDITS_BIN"
    subprocess.run([str(exe), *args], check=True, capture_output=True)


def test_never_started_stalled_and_still_learning_are_told_apart() -> None:
    """Curves whose last decade grows linearly, with a known answer: one at
    its first per-round regret throughout (random play: never started), one
    that fell to 0.01 per round by t = 100 and stayed there (stalled after
    learning), one still exploring near its first level but moving (never
    started), and sqrt t, still falling (still learning)."""
    horizon = 100_000
    ts = np.unique(np.round(np.logspace(0, 5, 60)).astype(int))
    curves = {
        "random": 0.1 * ts,
        "stalled": np.where(ts < 100, 10 * np.sqrt(ts), 10 * np.sqrt(100) + 0.01 * (ts - 100)),
        "exploring": 0.1 * ts - 4e-5 * ts**1.5,
        "learner": 10 * np.sqrt(ts),
    }
    rows = [
        {"cell_id": c, "repetition": 0, "t": int(t), "horizon": horizon, "agent_regret": float(r)}
        for c, rs in curves.items()
        for t, r in zip(ts, rs, strict=True)
    ]
    levels = {r["cell_id"]: r for r in per_round_levels(pl.DataFrame(rows).lazy(), list(curves)).iter_rows(named=True)}
    assert levels["random"]["verdict"] == "never started"
    assert abs(levels["random"]["early"] - 0.1) < 1e-9 and abs(levels["random"]["late"] - 0.1) < 1e-9
    assert levels["stalled"]["verdict"] == "stalled after learning"
    assert abs(levels["stalled"]["late"] - 0.01) < 1e-9 and abs(levels["stalled"]["prev"] - 0.01) < 1e-9
    # 0.1 - 6e-5 sqrt(t) per round: 0.1 at first, about 0.085 over the last
    # decade and 0.096 over the one before: moving, near its first level.
    assert levels["exploring"]["verdict"] == "never started", levels["exploring"]
    assert levels["learner"]["verdict"] == "still learning"


PROCUREMENT = """\
name: proc
seed: 54
repetitions: 3
horizon: 3000
checkpoints: {log_points: 20}
algorithm: [non_federated, fcb, p_fcb]
environment: procurement
params: {producers: 10, delta: 0.01, t_low: 50, t_high: 4000}
grid:
  epsilon: [1, .inf]
  m: [2, 6]
"""


def test_p_fcb_is_paired_with_itself_without_noise_and_read_after_exploration(tmp_path: Path) -> None:
    job = tmp_path / "proc.yaml"
    job.write_text(PROCUREMENT)
    _engine("run", str(job), "--out", str(tmp_path), "--quiet")
    (s,) = load_studies(tmp_path / "proc")
    # P-FCB at epsilon = inf is not private: no privacy figure, and the
    # counterpart of each private P-FCB cell (same m), not FCB.
    final = s.final
    inf = final.filter((pl.col("algorithm") == "p_fcb") & pl.col("epsilon").is_infinite())
    assert inf.height == 6 and inf["acct_epsilon"].null_count() == 6
    # The linear family's basic-composition columns are not the
    # combinatorial family's: its files do not carry them.
    assert "acct_epsilon_basic" not in final.columns
    pairs, missing = counterparts(s)
    label = {r["cell_id"]: r for r in s.cells.iter_rows(named=True)}
    assert missing == [] and len(pairs) == 2
    for p, c in pairs.items():
        assert label[c]["algorithm"] == "p_fcb" and label[c]["m"] == label[p]["m"]
    # The final value: regret after exploration per agent, exactly.
    assert s.regret_word() == "regret per agent after exploration"
    by_hand = final["regret_after_exploration"] / final["m"].cast(pl.Float64)
    assert (final[s.metric] - by_hand).abs().max() < 1e-12
    md = rep.report(tmp_path / "proc", tmp_path / "out").read_text()
    assert "| p_fcb epsilon=1 m=2 | 1 |" in md and "| p_fcb epsilon=inf m=2 |" in md
    assert "Compared with another algorithm" not in md


def test_readme_defines_every_family_metric_as_the_registry_does(tmp_path: Path) -> None:
    """README's column table gives the registry's definition of every
    family metric, word for word (what `fedbandits list` prints and the
    report shows)."""
    import json

    import pyarrow.parquet as pq

    job = tmp_path / "proc.yaml"
    job.write_text(PROCUREMENT.replace("repetitions: 3", "repetitions: 1").replace("horizon: 3000", "horizon: 300"))
    _engine("run", str(job), "--out", str(tmp_path), "--quiet")
    meta = pq.read_metadata(next((tmp_path / "proc").glob("part-*.parquet"))).metadata
    fams = json.loads(meta[b"fedbandits.families"])
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Output columns") : readme.index("<!-- END generated -->")]
    defined = [(name, col, d) for name, f in fams.items() for col, d in f["metrics"].items()]
    assert len(defined) >= 12
    for name, col, d in defined:
        row = next(ln for ln in section.splitlines() if ln.startswith(f"| `{col}` |"))
        assert name in row.split(" | ")[2] and d.replace("|", "\\|") in row, col


RANKED = """\
name: rk
seed: 54
repetitions: 4
horizon: 30000
checkpoints: {log_points: 30}
algorithm: [non_federated, fcb, p_fcb]
environment: procurement
params: {delta: 0.01}
grid:
  epsilon: [0.5, .inf]
  m: [2, 10]
"""


def test_the_combinatorial_ranking_after_exploration_differs_from_the_total(tmp_path: Path) -> None:
    """On total regret the exploration phase (about 4x longer at m = 2 than
    at 10, the same for every algorithm) ranks `m` first for every
    algorithm and leaves P-FCB's epsilon at x1.01; after exploration, the
    report's reading, P-FCB's noise is the resolved effect (x1.48 at this
    seed) and `m` is flat."""
    import dataclasses

    from fedbandits_analysis.effects import main_effect, ranking

    job = tmp_path / "rk.yaml"
    job.write_text(RANKED)
    _engine("run", str(job), "--out", str(tmp_path), "--quiet")
    (s,) = load_studies(tmp_path / "rk")
    after = ranking(s, {a.name: main_effect(s, a) for a in s.axes})
    total_study = dataclasses.replace(s, metric="agent_regret")
    total = ranking(total_study, {a.name: main_effect(total_study, a) for a in s.axes})
    top = after.row(0, named=True)
    assert (top["axis"], top["variant"], top["flat"]) == ("epsilon", "p_fcb", False) and top["extreme_lo"] > 1.0
    assert after.filter(pl.col("axis") == "m")["flat"].to_list() == [True, True, True]
    assert total["axis"].to_list()[:3] == ["m", "m", "m"] and total["score"][0] > 4.0
    eps_total = total.filter(pl.col("axis") == "epsilon")["score"][0]
    assert eps_total < 1.05

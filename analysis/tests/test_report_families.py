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


def test_never_started_and_stalled_after_learning_are_told_apart() -> None:
    """Two curves whose last decade both grow linearly: one at its first
    per-round regret throughout (still exploring), one that fell from
    1 per round to 0.01 by t = 1000 and then grew linearly (settled on a
    wrong action); and a learner, sqrt t, which is neither."""
    horizon = 100_000
    ts = np.unique(np.round(np.logspace(0, 5, 60)).astype(int))
    curves = {
        "never": 0.1 * ts,
        "stalled": np.where(ts < 1000, 10 * np.sqrt(ts), 10 * np.sqrt(1000) + 0.01 * (ts - 1000)),
        "learner": 10 * np.sqrt(ts),
    }
    rows = [{"cell_id": c, "repetition": 0, "t": int(t), "horizon": horizon, "agent_regret": float(r)} for c, rs in curves.items() for t, r in zip(ts, rs)]
    levels = {r["cell_id"]: r for r in per_round_levels(pl.DataFrame(rows).lazy(), list(curves)).iter_rows(named=True)}
    assert levels["never"]["verdict"] == "never started"
    assert abs(levels["never"]["early"] - 0.1) < 1e-9 and abs(levels["never"]["late"] - 0.1) < 1e-9
    assert levels["stalled"]["verdict"] == "stalled after learning"
    # early: 10 sqrt(t0) / t0 at the first checkpoint t0 >= 100 (1.0 at 100)
    assert abs(levels["stalled"]["late"] - 0.01) < 1e-9 and 0.9 < levels["stalled"]["early"] <= 1.0
    # sqrt t: its last decade's per-round regret is a tenth of t0's (0.1 of
    # 1.0 at t0 = 100 against 10 (sqrt(T) - sqrt(T/10)) / 0.9 T): not never.
    assert levels["learner"]["verdict"] == "stalled after learning"


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
    assert inf.height == 6 and inf["acct_epsilon"].null_count() == 6 and inf["acct_epsilon_basic"].null_count() == 6
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
    """README's "Family metrics" list is the registry's definitions, word
    for word (what `fedbandits list` prints and the report shows)."""
    import json

    import pyarrow.parquet as pq

    job = tmp_path / "proc.yaml"
    job.write_text(PROCUREMENT.replace("repetitions: 3", "repetitions: 1").replace("horizon: 3000", "horizon: 300"))
    _engine("run", str(job), "--out", str(tmp_path), "--quiet")
    meta = pq.read_metadata(next((tmp_path / "proc").glob("part-*.parquet"))).metadata
    fams = json.loads(meta[b"fedbandits.families"])
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("**Family metrics.**") : readme.index("**Calibration: at a given epsilon")]
    defined = [(name, col, d) for name, f in fams.items() for col, d in f["metrics"].items()]
    assert len(defined) >= 12
    for name, col, d in defined:
        assert f"- `{col}` ({name}): {d}" in section, col

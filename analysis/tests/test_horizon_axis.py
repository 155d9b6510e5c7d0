"""A study that sweeps `horizon`: the loader's
`swept_columns` names it, and the report reads it as an axis and pairs
each private cell with its non-private counterpart of the same horizon
(never across horizons)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import polars as pl
from fedbandits_analysis import load
from fedbandits_analysis.report import report
from tiny import ENGINE

JOB = """\
name: hz
seed: 3
repetitions: 4
checkpoints: {log_points: 8}
algorithm: [fedlinucb, private_fedlinucb]
environment: linear_sphere
params: {d: 3, k: 8, m: 3, epsilon: 1, delta: 0.1}
grid:
  horizon: [300, 3000]
"""


def test_a_swept_horizon_is_an_axis_and_pairs_within_itself(tmp_path: Path) -> None:
    (tmp_path / "hz.yaml").write_text(JOB)
    r = subprocess.run(
        [str(ENGINE), "run", str(tmp_path / "hz.yaml"), "--out", str(tmp_path / "o"), "--quiet"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    lf = load.scan(tmp_path / "o" / "hz")
    assert load.swept_columns(lf) == ["algorithm", "horizon"]
    final = lf.filter(pl.col("t") == pl.col("horizon")).collect()
    assert sorted(final["horizon"].unique().to_list()) == [300, 3000]
    text = report(tmp_path / "o" / "hz", tmp_path / "rep").read_text()
    assert "| swept axes | `horizon`: 300, 3000" in text, text[:2000]
    pairs = [line for line in text.splitlines() if line.startswith("| private_fedlinucb horizon=")]
    assert pairs, text
    for line in pairs:
        own = line.split("horizon=")[1].split(" ")[0]
        assert f"fedlinucb horizon={own} |" in line, line

"""`load.final_summary`: the final regret per agent of every cell a study
tells apart, grouped by every swept column (never averaging two protocols),
with the combinatorial family read after its exploration phase."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import polars as pl
from fedbandits_analysis import load
from tiny import ENGINE

JOB = """name: fs
seed: 3
repetitions: 3
horizon: 200
checkpoints: {every: 50}
algorithm: [independent, private_fedlinucb, fcb]
environment: [linear_sphere, procurement]
params: {m: 2, d: 2, k: 3, epsilon: 1, delta: 0.1, producers: 4}
grid: {protocol: [ldp, alt]}
"""


def test_final_summary_groups_by_every_swept_column_and_reads_each_familys_regret(tmp_path: Path) -> None:
    (tmp_path / "fs.yaml").write_text(JOB)
    r = subprocess.run(
        [str(ENGINE), "run", str(tmp_path / "fs.yaml"), "--out", str(tmp_path / "r"), "--quiet"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    lf = load.scan(tmp_path / "r" / "fs")
    out = load.final_summary(lf)
    # protocol is swept: two private_fedlinucb rows, never one averaged.
    assert load.swept_columns(lf) == ["algorithm", "protocol"]
    assert out.height == 4
    assert sorted(out.filter(pl.col("algorithm") == "private_fedlinucb")["protocol"].to_list()) == ["alt", "ldp"]
    assert out["n"].to_list() == [3, 3, 3, 3]
    final = lf.filter(pl.col("t") == pl.col("horizon")).collect()
    # Linear: agent_regret; the mean and geometric mean of the three repetitions.
    ldp = final.filter((pl.col("algorithm") == "private_fedlinucb") & (pl.col("protocol") == "ldp"))["agent_regret"]
    row = out.filter((pl.col("algorithm") == "private_fedlinucb") & (pl.col("protocol") == "ldp"))
    assert math.isclose(row["mean"][0], ldp.mean(), rel_tol=1e-12)
    assert math.isclose(row["geo_mean"][0], math.exp(sum(math.log(v) for v in ldp) / 3), rel_tol=1e-12)
    # Combinatorial: regret after exploration per agent, not agent_regret.
    fcb = final.filter(pl.col("algorithm") == "fcb")
    want = (fcb["regret_after_exploration"] / fcb["m"]).mean()
    got = out.filter(pl.col("algorithm") == "fcb")["mean"][0]
    assert math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12)
    assert not math.isclose(got, fcb["agent_regret"].mean(), rel_tol=1e-3)

"""The lattice sampler's figure against an independent one: Fed_UCB with
`sampler: discrete` at three targets (epsilon 0.3, 1.7, 9; T = 3000, so 12
blocks an observation enters) states `acct_epsilon`; dp-accounting's
privacy-loss distribution of the discrete Laplace mechanism with the
row's rate (sqrt(2) / acct_noise_multiplier per block over the rounded
range's width in steps, acct_sensitivity / acct_lattice_step), composed 12
times, gives at delta 1e-9 a figure that differs from the exact pure one
only by its pessimistic discretization (1e-5 per composition) and by what
delta 1e-9 buys (the loss reaches its maximum in all 12 blocks with
positive probability): the engine's is at most the target and within 1e-4
of dp-accounting's, and 1% less noise in the row would be caught."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest

dp = pytest.importorskip("dp_accounting")
from dp_accounting.pld import privacy_loss_distribution as pld  # noqa: E402
from test_privacy_tight import engine  # noqa: E402

JOB = """\
name: lattice
repetitions: 1
horizon: 3000
checkpoints: {every: 3000}
algorithm: fed_ucb_gossip
environment: mab_heterogeneous
params: {m: 3, arms: 3, sampler: discrete}
grid: {epsilon: [0.3, 1.7, 9]}
"""


def independent(rate: float, width: int, blocks: int) -> float:
    d = pld.from_discrete_laplace_mechanism(rate, sensitivity=width, value_discretization_interval=1e-5)
    return d.self_compose(blocks).get_epsilon_for_delta(1e-9)


def test_the_lattice_figure_is_the_discrete_laplaces(tmp_path: Path) -> None:
    job = tmp_path / "lattice.yaml"
    job.write_text(JOB)
    r = engine("run", str(job), "--out", str(tmp_path), "--quiet")
    assert r.returncode == 0, r.stderr
    rows = pl.read_parquet(tmp_path / "lattice" / "*.parquet").filter(pl.col("t") == pl.col("horizon")).to_dicts()
    assert len(rows) == 3
    for row in rows:
        blocks, step = row["acct_releases_per_observation"], row["acct_lattice_step"]
        width = round(row["acct_sensitivity"] / step)
        assert blocks == 12 and step == 2.0**-20 and width == 2**20
        rate = math.sqrt(2) / row["acct_noise_multiplier"] / width
        ours, target = row["acct_epsilon"], row["target_epsilon"]
        theirs = independent(rate, width, blocks)
        print(f"target {target}: acct_epsilon {ours:.9f}, dp-accounting {theirs:.9f} ({theirs / ours:.6f})")
        # Short of the budget by under width / t = 2^-20 per block.
        assert target - blocks * 2.0**-20 < ours <= target, (ours, target)
        assert abs(theirs / ours - 1) < 1e-4, (ours, theirs)
        assert independent(rate * 1.01, width, blocks) > ours * 1.005

"""A job's files carry the columns of its own families only (the common
ones, the parameters its families use, the metric and accountant columns
they fill), and the loader's one frame across families is the union of
the files' columns, null where a file lacks one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyarrow.parquet as pq
from fedbandits_analysis import load
from tiny import ENGINE

JOBS = {
    "lin": "algorithm: [random, independent]\nenvironment: linear_sphere\nparams: {m: 2, d: 2, k: 3}\n",
    "gos": "algorithm: [gossip_ucb, fed_ucb_gossip]\nenvironment: mab_heterogeneous\nparams: {m: 3, arms: 3, epsilon: 1}\n",
    "mix": "algorithm: [independent, local_ucb]\nenvironment: [linear_sphere, mab_heterogeneous]\nparams: {m: 2, d: 2, k: 3, arms: 3}\n",
}


def run(tmp_path: Path, name: str) -> list[str]:
    (tmp_path / f"{name}.yaml").write_text(f"name: {name}\nseed: 1\nrepetitions: 2\nhorizon: 60\ncheckpoints: {{every: 30}}\n{JOBS[name]}")
    r = subprocess.run(
        [str(ENGINE), "run", str(tmp_path / f"{name}.yaml"), "--out", str(tmp_path / "results"), "--quiet"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    (part,) = (tmp_path / "results" / name).glob("part-*.parquet")
    return pq.read_schema(part).names


def test_each_file_carries_its_families_columns_and_the_frame_is_their_union(tmp_path: Path) -> None:
    lin, gos, mix = (run(tmp_path, n) for n in JOBS)
    # The linear job: its parameters and counters, none of the gossip
    # family's; the gossip job the other way round.
    assert {"d", "k", "cholesky_failures", "acct_epsilon_zcdp"} <= set(lin)
    assert not {"arms", "consensus_error", "gossip_lambda2", "producers", "regret_after_exploration"} & set(lin)
    assert {"arms", "consensus_error", "gossip_lambda2", "acct_epsilon_pure", "clipped_observations"} <= set(gos)
    assert not {"d", "cholesky_failures", "beta_clamps", "producers", "acct_epsilon_zcdp"} & set(gos)
    # A job of two families carries both families' columns.
    assert set(lin) | set(gos) <= set(mix) | {
        "epsilon",
        "neighbours",
        "budget_split",
        "clip",
        "clip_lo",
        "clip_hi",
        "c_priv",
        "calibration",
        "delta",
    }
    df = load.scan(tmp_path / "results").collect()
    assert set(df.columns) == set(lin) | set(gos) | set(mix)
    assert df.filter(df["job"] == "lin")["consensus_error"].is_null().all()
    assert df.filter(df["job"] == "gos")["d"].is_null().all()
    assert df.filter(df["job"] == "gos")["consensus_error"].is_not_null().all()
    assert df.height == 3 * 2 * 2 * 2


def test_a_study_of_two_families_reports(tmp_path: Path) -> None:
    """The environment axis of a job whose families each run on their own
    environment has no main effect (no variant varies in it): the report
    says so instead of failing."""
    from fedbandits_analysis.report import report

    run(tmp_path, "mix")
    report(tmp_path / "results" / "mix", tmp_path / "rep")
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "No variant runs at more than one value of `environment`" in text

"""Fixtures shared by the test modules: the `_small` paper jobs, run once
per session by the engine under test (`FEDBANDITS_BIN`, else the release
build) for the claims and the reproduction report's check. `.ci/run`
names in `FEDBANDITS_SMALL_RESULTS` the folder where the engine's own test
(`every_bundled_job_validates_and_small_paper_jobs_run`, src/tests/cli.rs)
ran them with the same build moments before; where it holds every job's
results they are read from there."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from tiny import ENGINE, ROOT

#: The `_small` job of every paper figure (the CI scale).
SMALL_JOBS = sorted(p.stem for p in (ROOT / "jobs").glob("*_small.yaml"))


def run_job(job: Path, out: Path) -> None:
    """Runs one job file into `out` with the engine under test."""
    res = subprocess.run([str(ENGINE), "run", str(job), "--out", str(out), "--threads", "2", "--quiet"], capture_output=True, text=True)
    assert res.returncode == 0, f"{job}: {res.stderr}"


@pytest.fixture(scope="session")
def small_results(tmp_path_factory) -> Path:
    """A results root holding every `_small` paper job's results."""
    shared = os.environ.get("FEDBANDITS_SMALL_RESULTS")
    if shared and all((Path(shared) / name / "part-00000-of-00001.parquet").is_file() for name in SMALL_JOBS):
        return Path(shared)
    out = tmp_path_factory.mktemp("small")
    for name in SMALL_JOBS:
        run_job(ROOT / "jobs" / f"{name}.yaml", out)
    return out

"""A grown study stays loadable until its new merge: the
first task of a grown job moves the superseded parts and their manifest to
`.superseded/<job>/`, where the loader reads the old study; the grown
directory, incomplete, is refused with a pointer to it; the grown job's
complete `merge` removes the old copy."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from fedbandits_analysis import load
from fedbandits_analysis.load import ResultsError
from tiny import ENGINE, JOB


def engine(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ENGINE), *map(str, args)], capture_output=True, text=True)


def test_the_study_a_job_grew_from_stays_loadable_until_the_merge(tmp_path: Path) -> None:
    job, out = tmp_path / "g.yaml", tmp_path / "o"
    job.write_text(JOB.format(name="g"))
    for shard in ("0/2", "1/2"):
        assert engine("run", job, "--out", out, "--quiet", "--shard", shard).returncode == 0
    assert engine("merge", out / "g").returncode == 0
    before = load.scan(out / "g").collect()
    # Grown by a repetition; only the first shard runs yet.
    job.write_text(JOB.format(name="g").replace("repetitions: 2", "repetitions: 3"))
    r = engine("run", job, "--out", out, "--quiet", "--shard", "0/2")
    assert r.returncode == 0, r.stderr
    old = out / "g" / ".superseded" / "g"
    assert f"moved to {old}" in r.stderr, r.stderr
    assert (old / "_manifest.yaml").exists() and not (out / "g" / "_manifest.yaml").exists()
    # The old study, whole, where the message says; the grown one refused
    # with a pointer to it.
    assert load.scan(old).collect().sort(load.scan(old).collect().columns).equals(before.sort(before.columns))
    with pytest.raises(ResultsError, match=r"being grown: the study it grew from stays loadable at .*\.superseded/g"):
        load.scan(out / "g")
    # The rest of the grown job, then its merge: the old copy goes.
    assert engine("run", job, "--out", out, "--quiet", "--shard", "1/2").returncode == 0
    m = engine("merge", out / "g")
    assert m.returncode == 0 and "removed" in m.stdout, m.stdout
    assert not (out / "g" / ".superseded").exists()
    grown = load.scan(out / "g").collect()
    assert grown.height == before.height * 3 // 2


def test_the_merge_keeps_and_names_a_users_file_in_the_superseded_folder(tmp_path: Path) -> None:
    """Issue 73, case 6: merge deleted a user's file inside
    `.superseded/<job>/` without naming it ("merge never deletes data")."""
    job, out = tmp_path / "g.yaml", tmp_path / "o"
    job.write_text(JOB.format(name="g"))
    assert engine("run", job, "--out", out, "--quiet").returncode == 0
    assert engine("merge", out / "g").returncode == 0
    job.write_text(JOB.format(name="g").replace("repetitions: 2", "repetitions: 3"))
    r = engine("run", job, "--out", out, "--quiet", "--shard", "0/2")
    assert r.returncode == 0, r.stderr
    old = out / "g" / ".superseded" / "g"
    (old / "notes.txt").write_text("what the first study was for\n")
    assert engine("run", job, "--out", out, "--quiet", "--shard", "1/2").returncode == 0
    m = engine("merge", out / "g")
    assert m.returncode == 0, m.stderr
    assert (old / "notes.txt").read_text() == "what the first study was for\n"
    assert not list(old.glob("part-*.parquet")) and not (old / "_manifest.yaml").exists()
    assert f"kept 1 file(s) there that fedbandits did not write (merge deletes only what it wrote): {old / 'notes.txt'}" in m.stdout, (
        m.stdout
    )

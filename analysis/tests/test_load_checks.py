"""The loader trusts a results directory only as far as it can check it:
a missing shard part, two versions of a job, a part in another
job's directory, a single shard read alone, a part written after the last
merge. Each case returned wrong data silently before these checks."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest
from fedbandits_analysis.load import ResultsError, families, scan, scan_family, to_pandas
from tiny import write_sealed

ROOT = Path(__file__).resolve().parents[2]
JOB = """\
name: kjob
seed: {seed}
repetitions: 4
horizon: 400
checkpoints: {{every: 50}}
algorithm: [independent, private_fedlinucb]
environment: linear_sphere
params: {{m: 3, d: 4, k: 9, delta: 0.1}}
grid: {{epsilon: [0.5, 2]}}
"""
ROWS = 3 * 4 * 8  # cells x repetitions x checkpoints


def engine(*args: str) -> subprocess.CompletedProcess:
    exe = Path(os.environ.get("FEDBANDITS_BIN", ROOT / "target" / "release" / "fedbandits"))
    assert exe.exists(), f"{exe} not built: run `cargo build --release` or set FEDBANDITS_BIN"
    return subprocess.run([str(exe), *args], capture_output=True, text=True)


def sharded(tmp: Path, seed: int = 7, shards: tuple[str, ...] = ("0/2", "1/2")) -> Path:
    """Runs the job's `shards` into tmp/out; returns the job directory."""
    job = tmp / f"seed{seed}" / "kjob.yaml"
    job.parent.mkdir(parents=True, exist_ok=True)
    job.write_text(JOB.format(seed=seed))
    for s in shards:
        r = engine("run", str(job), "--out", str(tmp / "out"), "--quiet", "--shard", s)
        assert r.returncode == 0, r.stderr
    return tmp / "out" / "kjob"


def every_entry_point_raises(d: Path, match: str) -> None:
    for read in (
        lambda: scan(d).collect(),
        lambda: families(d),
        lambda: scan_family(d, "linear").collect(),
        lambda: to_pandas(d),
    ):
        with pytest.raises(ResultsError, match=match):
            read()


def test_a_missing_shard_part_is_an_error_with_or_without_a_manifest(tmp_path: Path) -> None:
    d = sharded(tmp_path)
    assert engine("merge", str(d)).returncode == 0
    full = scan(d, allow_partial=True).collect()
    assert full.height == ROWS and full["results_complete"].all()
    assert "results_complete" not in scan(d).collect_schema().names()
    (d / "part-00001-of-00002.parquet").unlink()
    # The manifest says complete: true and still lists the deleted file.
    every_entry_point_raises(d, r"part-00001-of-00002.parquet listed in _manifest.yaml but missing.*--shard 1/2")
    # merge rewrites it as incomplete (and exits 1).
    assert engine("merge", str(d)).returncode == 1
    every_entry_point_raises(d, r"says the run is incomplete \(6 of 12 repetition units")
    # No manifest: the parts must be a whole shard layout.
    (d / "_manifest.yaml").unlink()
    every_entry_point_raises(d, r"shard\(s\) missing: part-00001-of-00002.parquet.*kjob.yaml --out .* --shard 1/2")
    # On purpose: what is there, marked.
    part = scan(d, allow_partial=True).collect()
    assert part.height == ROWS // 2 and not part["results_complete"].any()
    assert len(to_pandas(d, allow_partial=True)) == ROWS // 2


def test_two_versions_of_a_job_are_never_mixed(tmp_path: Path) -> None:
    a = sharded(tmp_path / "a", seed=7, shards=("0/2",))
    b = sharded(tmp_path / "b", seed=8, shards=("1/2",))
    shutil.copy(b / "part-00001-of-00002.parquet", a)
    every_entry_point_raises(a, "mixes two versions of job 'kjob'")
    with pytest.raises(ResultsError, match="mixes two versions"):
        scan(a, allow_partial=True)


def test_a_part_in_another_jobs_directory_is_refused(tmp_path: Path) -> None:
    d = sharded(tmp_path, shards=("0/1",))
    shutil.copytree(d, tmp_path / "out" / "other")
    assert scan(d).collect().height == ROWS
    with pytest.raises(ResultsError, match="holds results of job 'kjob' but lies in directory 'other'"):
        scan(tmp_path / "out" / "other", allow_partial=True)
    # The root holding both is refused too.
    with pytest.raises(ResultsError, match="lies in directory 'other'"):
        scan(tmp_path / "out")


def test_a_single_shard_file_and_a_part_newer_than_the_manifest(tmp_path: Path) -> None:
    d = sharded(tmp_path, shards=("0/2",))
    f = d / "part-00000-of-00002.parquet"
    with pytest.raises(ResultsError, match=r"one shard \(shard 0/2\) of a sharded run"):
        scan(f)
    assert scan(f, allow_partial=True).collect().height == ROWS // 2
    assert engine("merge", str(d)).returncode == 1
    sharded(tmp_path, shards=("1/2",))
    with pytest.raises(ResultsError, match="part-00001-of-00002.parquet not in _manifest.yaml"):
        scan(d)
    assert engine("merge", str(d)).returncode == 0
    df = scan(d).collect()
    assert df.height == ROWS and df.select(pl.col("repetition").n_unique()).item() == 4


def test_a_part_rewritten_without_its_checksum_is_refused(tmp_path: Path) -> None:
    """Issue 39, case 1: a part rewritten with pyarrow, agent_regret halved
    and the checksum key dropped (every other key kept), was read silently."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    d = sharded(tmp_path, shards=("0/1",))
    f = d / "part-00000-of-00001.parquet"
    t = pq.read_table(f)
    md = {
        k: v
        for k, v in pq.read_metadata(f).metadata.items()
        if k not in (b"ARROW:schema", b"fedbandits.data_xxh64", b"fedbandits.footer_xxh64")
    }
    i = t.schema.get_field_index("agent_regret")
    t = t.set_column(i, "agent_regret", pc.divide(t["agent_regret"], 2.0))
    write_sealed(t.replace_schema_metadata(md), f)
    every_entry_point_raises(d, "no fedbandits.data_xxh64 checksum in its metadata")


def test_a_part_of_another_layout_under_a_listed_name_is_refused(tmp_path: Path) -> None:
    """Issue 39, case 2: with a complete manifest, a part of a 4-shard run
    copied over `part-00001-of-00002.parquet` gave 18 of 24 repetitions
    silently."""
    d = sharded(tmp_path, shards=("0/2", "1/2"))
    assert engine("merge", str(d)).returncode == 0
    other = sharded(tmp_path / "elsewhere", shards=("1/4",))
    shutil.copy(other / "part-00001-of-00004.parquet", d / "part-00001-of-00002.parquet")
    every_entry_point_raises(d, "holds shard 1/4 but _manifest.yaml lists it as shard 1/2")


def test_rows_of_another_job_are_refused(tmp_path: Path) -> None:
    """Issue 39, case 3: a part whose metadata names one job and whose rows
    another (units reused under a renamed job, as the engine before issue
    39 wrote it) was accepted, and counted twice beside the original."""
    import pyarrow.parquet as pq
    from fedbandits_analysis.load import data_checksum

    d = sharded(tmp_path, shards=("0/1",))
    other = tmp_path / "out" / "kjob2"
    other.mkdir()
    src = d / "part-00000-of-00001.parquet"
    t = pq.read_table(src)
    md = {
        k: v
        for k, v in pq.read_metadata(src).metadata.items()
        if k not in (b"ARROW:schema", b"fedbandits.data_xxh64", b"fedbandits.footer_xxh64")
    }
    md[b"fedbandits.job_name"] = b"kjob2"
    f = other / src.name
    pq.write_table(t.replace_schema_metadata(md), f)
    md[b"fedbandits.data_xxh64"] = f"{data_checksum(f):016x}".encode()
    write_sealed(t.replace_schema_metadata(md), f)
    every_entry_point_raises(other, "its rows belong to job 'kjob', its metadata to 'kjob2'")
    with pytest.raises(ResultsError, match="its rows belong to job 'kjob'"):
        scan(tmp_path / "out").collect()


def test_scan_from_inside_a_job_directory(tmp_path: Path, monkeypatch) -> None:
    """Issue 39: `load.scan(".")` inside a job directory said the part "lies
    in directory ''"."""
    d = sharded(tmp_path, shards=("0/1",))
    monkeypatch.chdir(d)
    assert scan(".").collect().height == ROWS


def test_a_failed_figure_write_leaves_no_temporary_file(tmp_path: Path, monkeypatch) -> None:
    """Issue 39: a report onto a full disk left an empty `.*.png.tmp`."""
    import matplotlib.pyplot as plt
    from fedbandits_analysis import figures

    fig, _ = plt.subplots()

    def full(path, **kwargs):
        Path(path).write_bytes(b"")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fig, "savefig", full)
    with pytest.raises(OSError, match="No space left"):
        figures._save(fig, tmp_path / "a.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == []

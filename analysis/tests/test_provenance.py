"""What the loader says of a part's provenance: the parts of one
job directory come from one engine semantics; a part whose metadata lacks a
key every part has is refused naming the key (the messages once read
`--shard ` and "rerun the job ''"); a part with a footer checksum that
claims an engine before footer checksums is refused; a rerun command names
the job file by its folder, so it works from any working directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import xxhash
from fedbandits_analysis import load
from tiny import ENGINE, JOB, write_sealed


def _run(tmp_path: Path) -> Path:
    """Runs the job from `tmp_path/jobs` in two shards, from `tmp_path`
    with a relative job path; returns the job's results directory."""
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "p.yaml").write_text(JOB.format(name="p"))
    for shard in ("0/2", "1/2"):
        r = subprocess.run(
            [str(ENGINE), "run", "jobs/p.yaml", "--out", "o", "--quiet", "--shard", shard],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert r.returncode == 0, r.stderr
    return tmp_path / "o" / "p"


def _rewrite(part: Path, edit) -> None:
    """Rewrites `part` with its metadata edited as a careful editor would:
    its data checksum recomputed and its footer sealed again (not for a
    semantics before footer checksums)."""
    table = pq.read_table(part)
    md = {k: v for k, v in (pq.read_metadata(part).metadata or {}).items() if k != load.FOOTER_KEY}
    edit(md)
    md.pop(load.CHECKSUM_KEY, None)
    pq.write_table(table.replace_schema_metadata(md), part, compression="snappy")
    md[load.CHECKSUM_KEY] = f"{load.data_checksum(part):016x}".encode()
    if int(md.get(b"fedbandits.semantics_version", b"0")) >= load.FOOTER_SINCE:
        write_sealed(table.replace_schema_metadata(md), part)
    else:  # as an engine before footer checksums wrote it
        pq.write_table(table.replace_schema_metadata(md), part, compression="snappy")
    assert f"{load.data_checksum(part):016x}".encode() == md[load.CHECKSUM_KEY]


def test_parts_of_two_engine_semantics_are_refused(tmp_path: Path) -> None:
    d = _run(tmp_path)
    assert load.scan(d).collect().height == 4 * 2
    _rewrite(d / "part-00001-of-00002.parquet", lambda md: md.update({b"fedbandits.semantics_version": b"16"}))
    with pytest.raises(load.ResultsError, match="mixes engine semantics"):
        load.scan(d).collect()


@pytest.mark.parametrize("key", ["shard", "job_name"])
def test_a_part_without_a_key_every_part_has_is_refused_naming_it(tmp_path: Path, key: str) -> None:
    d = _run(tmp_path)
    part = d / "part-00000-of-00002.parquet"
    _rewrite(part, lambda md: md.pop(f"fedbandits.{key}".encode()))
    with pytest.raises(load.ResultsError, match=f"lacks fedbandits.{key}") as e:
        load.scan(d).collect()
    assert str(part) in str(e.value)


def test_a_sealed_part_claiming_an_older_engine_is_refused(tmp_path: Path) -> None:
    d = _run(tmp_path)
    part = d / "part-00000-of-00002.parquet"
    raw = bytearray(part.read_bytes())
    # Rewrite the semantics value in place and reseal both checksums, as a
    # careful editor would: the contradiction is what is refused.
    md = pq.read_metadata(part).metadata
    assert md[b"fedbandits.semantics_version"] == b"21"
    key = raw.find(b"fedbandits.semantics_version")
    at = raw.find(b"21", key)
    raw[at : at + 2] = b"16"
    start = len(raw) - 8 - int.from_bytes(raw[-8:-4], "little")
    pos = raw.find(load.FOOTER_KEY, start) + len(load.FOOTER_KEY) + 2
    raw[pos : pos + 16] = b"0" * 16
    raw[pos : pos + 16] = xxhash.xxh64(bytes(raw[start:])).hexdigest().encode()
    part.write_bytes(bytes(raw))
    with pytest.raises(load.ResultsError, match="no engine before semantics 17"):
        load.scan(d).collect()


def test_a_rerun_command_names_the_job_file_by_its_folder(tmp_path: Path) -> None:
    d = _run(tmp_path)
    (d / "part-00001-of-00002.parquet").unlink()
    why = load.incomplete_runs(d)[d]
    assert f"fedbandits run {tmp_path / 'jobs' / 'p.yaml'} --out {d.parent} --shard 1/2" in why, why

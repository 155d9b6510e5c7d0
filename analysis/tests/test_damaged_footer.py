"""A damaged part footer never escapes the loader as anything but its own
error, and is never read as other data: one bit of every third
byte of a small part's footer and tail flipped, `load.scan(...).collect()`
raises `ResultsError` naming the file or returns the intact rows. The
footer checksum is checked on the raw bytes before pyarrow or polars read
the footer (a damaged footer once renamed columns silently, raised pyo3's
PanicException or aborted the interpreter). A flip inside the checksum's
own key name removes the entry, and a file of semantics 17 without it is
refused too: with the key renamed, two columns' names swapped in the
footer were once read as the data."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from fedbandits_analysis import load
from tiny import ENGINE, JOB


def test_a_damaged_footer_is_the_loaders_error_never_other_data(tmp_path: Path) -> None:
    (tmp_path / "f.yaml").write_text(JOB.format(name="f"))
    r = subprocess.run(
        [str(ENGINE), "run", str(tmp_path / "f.yaml"), "--out", str(tmp_path / "o"), "--quiet"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    part = tmp_path / "o" / "f" / "part-00000-of-00001.parquet"
    want = load.scan(part.parent).collect().sort("cell_id", "repetition", "t")
    good = part.read_bytes()
    n = len(good)
    footer = int.from_bytes(good[-8:-4], "little") + 8
    work = tmp_path / "w" / "f"
    work.mkdir(parents=True)
    counts = {"error": 0, "same": 0, "silent": 0}
    for i, at in enumerate(range(n - footer, n, 3)):
        bad = bytearray(good)
        bad[at] ^= 1 << (i % 8)
        (work / part.name).write_bytes(bytes(bad))
        try:
            got = load.scan(work).collect().sort("cell_id", "repetition", "t")
        except load.ResultsError as e:
            assert str(work) in str(e), e
            counts["error"] += 1
            continue
        counts["same" if got.equals(want) else "silent"] += 1
    print(f"footer flips: {counts}")
    assert counts["silent"] == 0 and counts["same"] == 0 and counts["error"] > 0, counts


def test_a_renamed_checksum_key_is_refused_and_read_only_when_asked(tmp_path: Path) -> None:
    import warnings

    import pytest

    (tmp_path / "r.yaml").write_text(JOB.format(name="r"))
    r = subprocess.run(
        [str(ENGINE), "run", str(tmp_path / "r.yaml"), "--out", str(tmp_path / "o"), "--quiet"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    part = tmp_path / "o" / "r" / "part-00000-of-00001.parquet"
    want = load.scan(part.parent).collect()
    raw = bytearray(part.read_bytes())
    start = len(raw) - 8 - int.from_bytes(raw[-8:-4], "little")
    at = raw.index(load.FOOTER_KEY, start)
    raw[at + len(b"fedbandits.")] = ord("F")
    # The two names have one length, so the footer stays decodable; only
    # whole names (not agent_regret_max) are swapped.
    names = {b"agent_regret": b"group_regret", b"group_regret": b"agent_regret"}
    tail = re.sub(rb"(agent_regret|group_regret)(?!_)", lambda m: names[m.group(1)], bytes(raw[start:]))
    part.write_bytes(bytes(raw[:start]) + tail)
    with pytest.raises(load.ResultsError, match="has no fedbandits.footer_xxh64 entry") as e:
        load.scan(part.parent).collect()
    assert str(part) in str(e.value)
    # Asked for: read, with a warning naming the file; the swap is what an
    # unchecked read cannot see.
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = load.scan(part.parent, unchecked_footers=True).collect()
    assert any("read unchecked" in str(x.message) and str(part) in str(x.message) for x in w), [str(x.message) for x in w]
    assert got["agent_regret"].to_list() == want["group_regret"].to_list()

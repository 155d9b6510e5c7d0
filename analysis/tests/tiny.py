"""The smallest real study the loader's fault tests read: two algorithms,
two repetitions, two checkpoints, written by the engine under test
(`FEDBANDITS_BIN`, else the release build)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The engine binary under test.
ENGINE = Path(os.environ.get("FEDBANDITS_BIN", ROOT / "target" / "release" / "fedbandits"))

#: A job of 4 units and 8 rows named `{name}`.
JOB = """\
name: {name}
seed: 2
repetitions: 2
horizon: 40
checkpoints: {{every: 20}}
algorithm: [random, independent]
environment: linear_sphere
params: {{m: 2, d: 2, k: 3}}
"""


def write_sealed(table, path: Path) -> None:
    """Writes `table` (with its schema metadata) as the engine seals a part,
    as a careful editor of a part would: the footer checksum entry written
    as sixteen '0's, then its value patched with the XXH64 of the footer
    and tail (`load.check_footer`'s rule), so that the loader's later
    checks are what a test reaches."""
    import pyarrow.parquet as pq
    import xxhash
    from fedbandits_analysis import load

    md = dict(table.schema.metadata or {})
    md[load.FOOTER_KEY] = b"0" * 16
    pq.write_table(table.replace_schema_metadata(md), path, compression="snappy")
    raw = bytearray(path.read_bytes())
    start = len(raw) - 8 - int.from_bytes(raw[-8:-4], "little")
    at = raw.index(load.FOOTER_KEY, start) + len(load.FOOTER_KEY)
    assert raw[at : at + 2] == b"\x18\x10", "the value's encoding right after its key"
    raw[at + 2 : at + 18] = xxhash.xxh64(bytes(raw[start:])).hexdigest().encode()
    path.write_bytes(bytes(raw))

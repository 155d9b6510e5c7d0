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

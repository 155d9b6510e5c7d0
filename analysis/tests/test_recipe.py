"""README's recipe ("Recomputing a figure from its row") recomputes every
private row's `acct_epsilon` from the row alone: the code between the
README's recipe markers, run as it stands, on the final row of a cell of
every private mechanism (Private-FedLinUCB's four protocols, both FedUCB
forms with their private schedule, each tree, Fed_UCB and P-FCB with both
samplers) at
two targets, agrees with the engine to 1e-9 (relative), and a row whose
noise multiplier (sdp_vecsum: Binomial counts) is off by 1% (2%) does
not."""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[2]

JOB = """\
name: recipe
repetitions: 1
horizon: 2000
checkpoints: {every: 2000}
algorithm: [private_fedlinucb, feducb_centralized, feducb_decentralized, fed_ucb_gossip, p_fcb]
environment: [linear_gap, mab_heterogeneous, procurement]
params: {m: 4, d: 3, k: 6, arms: 3, producers: 5, t_low: 50, t_high: 1000, graph: ring, gamma: 2, delta: 0.001}
grid: {epsilon: [0.5, 4], protocol: [ldp, sdp_amp, alt, sdp_vecsum], sampler: [float, discrete]}
"""


def recipe() -> dict:
    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- BEGIN recipe -->", 1)[1].split("<!-- END recipe -->", 1)[0]
    code = block.split("```python", 1)[1].split("```", 1)[0]
    scope: dict = {}
    exec(compile(code, "README.md recipe", "exec"), scope)  # noqa: S102 - the README's own code
    return scope


def test_the_readme_recipe_recomputes_every_figure(tmp_path: Path) -> None:
    job = tmp_path / "recipe.yaml"
    job.write_text(JOB)
    exe = Path(os.environ.get("FEDBANDITS_BIN", ROOT / "target" / "release" / "fedbandits"))
    r = subprocess.run([str(exe), "run", str(job), "--out", str(tmp_path), "--quiet"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = (
        pl.read_parquet(tmp_path / "recipe" / "*.parquet")
        .filter((pl.col("t") == pl.col("horizon")) & pl.col("acct_epsilon").is_not_null())
        .unique("cell_id")
        .to_dicts()
    )
    figure = recipe()["figure"]
    kinds = set()
    for row in rows:
        kinds.add((row["algorithm"], row.get("protocol"), row.get("sampler")))
        got, want = figure(row), row["acct_epsilon"]
        assert math.isclose(got, want, rel_tol=1e-9), f"{row['algorithm']} {row.get('protocol')}: {got} vs {want}"
        off = dict(row, acct_noise_multiplier=row["acct_noise_multiplier"] * 1.01)
        if row["acct_tail"] is None:
            assert not math.isclose(figure(off), want, rel_tol=1e-4), row["algorithm"]
        else:
            # sdp_vecsum: the figure is the counts', not the noise multiplier's.
            counts = [int(t) for t in row["acct_binomial_trials"].split()]
            fewer = " ".join(str(t * 98 // 100) for t in counts)
            assert not math.isclose(figure(dict(row, acct_binomial_trials=fewer)), want, rel_tol=1e-4)
    samplers = ("float", "discrete")
    want = {("private_fedlinucb", p, s) for p in ("ldp", "sdp_amp", "alt") for s in samplers}
    want |= {("private_fedlinucb", "sdp_vecsum", None)}
    want |= {(a, None, s) for a in ("feducb_centralized", "feducb_decentralized", "fed_ucb_gossip", "p_fcb") for s in samplers}
    assert kinds == want, kinds

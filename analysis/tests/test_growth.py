"""Tests of the long-horizon checks on results the engine writes:
`regret_exponent` equals the loader's own computation from the curves for
every family (on the family's `growth_regret`), a policy that never learns
has exponent 1, the report lists cells that grow linearly and cells whose
environment is misspecified, and files of semantics 9 (no column) load."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from fedbandits_analysis import load
from fedbandits_analysis.effects import load_studies, main_effect, ranking
from fedbandits_analysis.report_warnings import warnings
from test_report import run_job

# T/10 = 300 is bracketed by checkpoints less than a factor 2 apart; the
# combinatorial exploration phase (about 380 rounds at n = 4) ends before
# its T/10 = 600.
LINEAR = """\
name: lin
seed: 3
repetitions: 4
horizon: 3000
checkpoints: {log_points: 30}
algorithm: [random, independent, fedlinucb]
environment: linear_sphere
params: {m: 3, d: 4, k: 10}
"""
GOSSIP = """\
name: gos
seed: 3
repetitions: 4
horizon: 3000
checkpoints: {log_points: 30}
algorithm: [local_ucb, oracle_ucb]
environment: mab_heterogeneous
params: {m: 4, arms: 3}
"""
COMBINATORIAL = """\
name: com
seed: 3
repetitions: 3
horizon: 6000
checkpoints: {log_points: 30}
algorithm: [non_federated, fcb]
environment: procurement
params: {m: 4, producers: 8, quality_threshold: 0.4, instances: 3}
"""
RAW = LINEAR.replace("name: lin", "name: raw").replace("k: 10}", "k: 10, reward_on: raw}")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("growth")
    return {n: run_job(d, text) for n, text in [("lin", LINEAR), ("gos", GOSSIP), ("com", COMBINATORIAL), ("raw", RAW)]}


def finals(path: Path) -> pl.DataFrame:
    return load.scan(path).filter(pl.col("t") == pl.col("horizon")).collect()


def test_growth_exponent_closed_forms() -> None:
    ts = [10 * i for i in range(1, 1001)]
    for f, want in [(lambda t: t, 1.0), (math.sqrt, 0.5), (lambda t: 7.0, 0.0)]:
        assert load.growth_exponent(ts, [f(t) for t in ts], 10_000) == pytest.approx(want, abs=1e-12)
    # Not spanning the decade, or no positive regret: None.
    assert load.growth_exponent([5000, 10_000], [1.0, 2.0], 10_000) is None
    assert load.growth_exponent([1, 10_000], [1.0, 2.0], 10_000) is None
    assert load.growth_exponent(ts, [0.0] * len(ts), 10_000) is None


@pytest.mark.parametrize("name", ["lin", "gos", "com"])
def test_engine_exponent_matches_the_curves(runs: dict[str, Path], name: str) -> None:
    path = runs[name]
    fams = load.families(path)
    lf = load.scan(path)
    algos = set(lf.select("algorithm").unique().collect()["algorithm"].to_list())
    family = next(f for f in fams.values() if algos <= set(f["algorithms"]))
    column = family["growth_regret"]
    assert column == ("regret_after_exploration" if name == "com" else "group_regret")
    mine = load.regret_exponents(lf, column)
    eng = finals(path).select("job", "cell_id", "repetition", "regret_exponent")
    both = eng.join(mine, on=["job", "cell_id", "repetition"])
    assert both.height == eng.height > 0
    assert both["regret_exponent"].null_count() == 0, "every repetition spans the decade here"
    assert (both["regret_exponent"] - both["exponent"]).abs().max() < 1e-12
    # Only the final row carries it.
    others = lf.filter(pl.col("t") != pl.col("horizon")).select(pl.col("regret_exponent").null_count(), pl.len()).collect()
    assert others.row(0)[0] == others.row(0)[1]


def test_random_grows_linearly_and_learners_do_not(runs: dict[str, Path]) -> None:
    f = finals(runs["lin"])
    rnd = f.filter(pl.col("algorithm") == "random")["regret_exponent"]
    assert rnd.min() > 0.97 and rnd.max() < 1.03, rnd.to_list()
    learners = f.filter(pl.col("algorithm") != "random")["regret_exponent"]
    assert learners.max() < load.LINEAR_GROWTH_EXPONENT, learners.to_list()


def test_report_warns_of_linear_growth_and_misspecification(runs: dict[str, Path]) -> None:
    def warned(path: Path) -> list[str]:
        s = load_studies(path)[0]
        return warnings(s, ranking(s, {a.name: main_effect(s, a) for a in s.axes}))

    lin = warned(runs["lin"])
    growth = [w for w in lin if w.startswith("Regret grows linearly")]
    # random never learns: per-round regret as high at the end as early on
    assert len(growth) == 1 and "in 1 of 3 cells, **never started**" in growth[0], lin
    # one line; the cells in its table, each with the causes it has
    assert growth[0].table is not None and [r[:2] for r in growth[0].table[1]] == [["random", "all 4"]], growth[0].table
    assert "none of the causes the report checks" in growth[0].table[1][0][-1]
    assert not any(w.startswith("Misspecified") for w in lin), lin
    raw = [w for w in warned(runs["raw"]) if w.startswith("Misspecified")]
    # random assumes no model: only the two learners are misspecified.
    assert len(raw) == 1 and "in 2 cell(s) (`reward_on`)" in raw[0] and "reward_on: normalized" in raw[0], raw
    assert "random" not in raw[0].split("Cells:")[1]


def test_files_before_semantics_10_load_without_the_column(runs: dict[str, Path], tmp_path: Path) -> None:
    src = next(runs["lin"].glob("part-*.parquet"))
    table = pq.read_table(src)
    table = table.drop_columns([c for c in load.ADDED_COLUMNS if c in table.column_names])
    md = dict(pq.read_metadata(src).metadata)
    md[b"fedbandits.semantics_version"] = b"9"
    md.pop(load.CHECKSUM_KEY)
    md.pop(load.FOOTER_KEY)  # files before semantics 17 have no footer checksum
    old = tmp_path / "lin" / src.name
    old.parent.mkdir()
    pq.write_table(table.replace_schema_metadata(md), old)
    md[load.CHECKSUM_KEY] = f"{load.data_checksum(old):016x}".encode()
    pq.write_table(table.replace_schema_metadata(md), old)
    lf = load.scan(old.parent)
    schema = lf.collect_schema()
    assert schema["regret_exponent"] == pl.Float64
    # Every column of today's file, and the added columns other families
    # fill (an old file had every family's columns of its day).
    now = load.scan(runs["lin"]).collect_schema().names()
    assert set(now) <= set(schema.names()) and set(schema.names()) - set(now) <= set(load.ADDED_COLUMNS)
    assert lf.select(pl.col("regret_exponent").is_null().all()).collect().item()
    # The exponent computed from the old file's curves is the new file's.
    new = finals(runs["lin"]).select("cell_id", "repetition", "regret_exponent")
    got = load.regret_exponents(lf).join(new, on=["cell_id", "repetition"])
    assert (got["exponent"] - got["regret_exponent"]).abs().max() < 1e-12

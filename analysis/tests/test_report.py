"""Tests of the sensitivity report (`fedbandits_analysis.report`) on results
the engine writes: a planted effect ranked first and a flat axis warned,
main effects and the federated regret ratio recomputed by hand, every
family, sharded and incomplete directories, and the self-contained HTML."""

from __future__ import annotations

import math
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
from fedbandits_analysis import report as rep
from fedbandits_analysis.effects import load_studies, main_effect, ranking, reference_levels
from fedbandits_analysis.report_warnings import warnings

ROOT = Path(__file__).resolve().parents[2]

# epsilon over two decades moves Private-FedLinUCB's regret by several
# within-cell sds; refactor_every (how often V is refactorized exactly
# instead of updated by Sherman-Morrison: rounding only) does not: an
# axis flat by construction is the honest fixture (confidence_scale over
# +-2% has a small real effect, +4% regret at 1.02, that paired ratios
# resolve).
PLANTED = """\
name: planted
seed: 11
repetitions: 12
horizon: 1000
checkpoints: {log_points: 10}
algorithm: private_fedlinucb
environment: linear_sphere
params: {m: 4, d: 4, k: 10, delta: 0.1}
grid:
  refactor_every: [10, 50, 250]
  epsilon: {logspace: [0.1, 10, 3]}
"""
GOSSIP = """\
name: goss
seed: 5
repetitions: 4
horizon: 2000
checkpoints: {log_points: 10}
algorithm: [fed_ucb_gossip, local_ucb]
environment: mab_heterogeneous
params: {m: 4, arms: 3, graph: complete, c_priv: 0.05}
grid:
  epsilon: [1, 4, .inf]
  clip: [true, false]
"""
COMBINATORIAL = """\
name: comb
seed: 5
repetitions: 4
horizon: 2000
checkpoints: {log_points: 10}
algorithm: [non_federated, fcb, p_fcb]
environment: procurement
params: {m: 4, producers: 10, quality_threshold: 0.4, instances: 4, delta: 0.01, t_low: 50, t_high: 4000, omega1: 0.1, omega2: 10}
grid:
  epsilon: [1, 8]
"""


def engine(*args: str) -> None:
    exe = Path(os.environ.get("FEDBANDITS_BIN", ROOT / "target" / "release" / "fedbandits"))
    assert exe.exists(), f"{exe} not built: run `cargo build --release` (.ci/run does) or set FEDBANDITS_BIN"
    subprocess.run([str(exe), *args], check=True, capture_output=True)


def run_job(d: Path, text: str, *extra: str) -> Path:
    name = re.search(r"^name: (\S+)", text, re.M).group(1)
    job = d / f"{name}.yaml"
    job.write_text(text)
    engine("run", str(job), "--out", str(d), "--quiet", *extra)
    return d / name


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    return run_job(tmp_path_factory.mktemp("planted"), PLANTED)


def test_planted_axis_ranks_first_and_the_flat_axis_is_warned(planted: Path, tmp_path: Path) -> None:
    (s,) = load_studies(planted)
    assert sorted(a.name for a in s.axes) == ["epsilon", "refactor_every"]
    ranked = ranking(s, {a.name: main_effect(s, a) for a in s.axes})
    assert ranked["axis"].to_list() == ["epsilon", "refactor_every"]
    # fold ranges (ratio scale): epsilon over two decades moves regret more
    # than 2x, refactor_every (rounding only) by less than 10%
    assert ranked["score"][0] > 2.0 and ranked["score"][1] < 1.1
    assert ranked["flat"].to_list() == [False, True]
    assert ranked["paired"].to_list() == ["2 of 2", "0 of 2"]  # within-repetition differences
    flat = [w for w in warnings(s, ranked) if "shows no effect" in w]
    assert len(flat) == 1 and "`refactor_every`" in flat[0]
    md = rep.report(planted, tmp_path / "out").read_text()
    assert "Axis `refactor_every` shows no effect for private_fedlinucb at this many repetitions" in md
    assert "Axis `epsilon` shows no effect" not in md
    assert md.index("| 1 | `epsilon` |") < md.index("| 2 | `refactor_every` |")


def test_main_effect_is_the_per_repetition_pooled_level_with_its_interval(planted: Path) -> None:
    from scipy import stats as sst

    final = pl.read_parquet(planted / "*.parquet").filter(pl.col("t") == pl.col("horizon"))
    epsilon = lambda s: next(a for a in s.axes if a.name == "epsilon")  # noqa: E731
    # Ratio scale (the default): per repetition the mean of ln regret over
    # the three refactor_every cells; the geometric mean over repetitions
    # with the Student-t interval on the log scale.
    (s,) = load_studies(planted)
    eff = main_effect(s, epsilon(s))
    assert eff["value"].to_list() == pytest.approx([0.1, 1.0, 10.0])
    t11 = sst.t.ppf(0.975, 11)
    for row in eff.iter_rows(named=True):
        sub = final.filter((pl.col("epsilon") - row["value"]).abs() < 1e-12)
        x = sub.group_by("repetition").agg(pl.col("agent_regret").log().mean()).sort("repetition")["agent_regret"].to_numpy()
        assert len(x) == 12 and row["cells"] == 3 and row["reps"] == 12
        half = t11 * x.std(ddof=1) / math.sqrt(len(x))
        assert row["mean"] == pytest.approx(math.exp(x.mean()), rel=1e-12)
        assert (row["lo"], row["hi"]) == pytest.approx((math.exp(x.mean() - half), math.exp(x.mean() + half)), rel=1e-12)
        assert row["median"] == pytest.approx(math.exp(float(np.median(x))), rel=1e-12)
    ranked = ranking(s, {a.name: main_effect(s, a) for a in s.axes})
    assert ranked["score"][0] == pytest.approx(eff["mean"].max() / eff["mean"].min(), rel=1e-12)
    # Additive scale (--scale additive): arithmetic means, a percentile
    # bootstrap interval, and the effect size in within-cell sds.
    (s,) = load_studies(planted, scale="additive")
    assert s.scale == "additive"
    eff = main_effect(s, epsilon(s))
    for row in eff.iter_rows(named=True):
        sub = final.filter((pl.col("epsilon") - row["value"]).abs() < 1e-12)
        x = sub.group_by("repetition").agg(pl.col("agent_regret").mean()).sort("repetition")["agent_regret"].to_numpy()
        assert row["mean"] == pytest.approx(x.mean(), rel=1e-12)
        # inside the support, around the mean, close to the normal interval
        half = 1.959963984540054 * x.std(ddof=1) / math.sqrt(len(x))
        assert x.min() <= row["lo"] < row["mean"] < row["hi"] <= x.max()
        assert (row["hi"] - row["lo"]) / 2 == pytest.approx(half, rel=0.25)
    cells = final.group_by("cell_id").agg(v=pl.col("agent_regret").var())
    sw = math.sqrt(cells["v"].mean())
    ranked = ranking(s, {a.name: main_effect(s, a) for a in s.axes})
    assert ranked["score"][0] == pytest.approx((eff["mean"].max() - eff["mean"].min()) / sw, rel=1e-9)


def test_header_counts_and_self_contained_html(planted: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert rep.main([str(planted), "--out", str(out), "--html"]) == 0
    md = (out / "report.md").read_text()
    assert "| cells | 9 (private_fedlinucb 9) |" in md
    assert "| repetitions per cell | 12 |" in md
    assert f"| agent-steps | {9 * 12 * 4 * 1000:.3e} |" in md
    assert "| rows | 1,080 |" in md  # 9 cells x 12 repetitions x 10 checkpoints
    # The engine's semantics version, as its files state it.
    version = pq.read_metadata(next(planted.glob("part-*.parquet"))).metadata[b"fedbandits.semantics_version"].decode()
    assert "`acct_epsilon`" in md and f"semantics {version}" in md
    pngs = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert pngs and all((out / p).stat().st_size > 1000 for p in pngs)
    page = (out / "report.html").read_text()
    srcs = re.findall(r'src="([^"]*)"', page)
    assert len(srcs) == len(pngs) and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert "href=" not in page
    assert not list(out.glob(".*tmp"))


def test_every_family_and_the_federated_regret_ratio(tmp_path: Path) -> None:
    goss = run_job(tmp_path, GOSSIP)
    comb = run_job(tmp_path, COMBINATORIAL)
    md = rep.report(tmp_path, tmp_path / "out").read_text()
    for again in range(3):  # the same text every time (no group-by order leaks)
        assert rep.report(tmp_path, tmp_path / f"again{again}").read_text() == md
    assert "# Sensitivity report: goss" in md and "# Sensitivity report: comb" in md
    assert "have fewer than 10 repetitions" in md  # 4 per cell
    assert "Observations are clipped in" in md  # gossip clip = true, as a share
    assert (tmp_path / "out" / "comb_frr_epsilon.png").exists()
    # gossip's `clip` changes how Fed_UCB is accounted: a variant, not an axis
    assert "fed_ucb_gossip (clip=true)" in md and "fed_ucb_gossip (clip=false)" in md
    # The ratio by hand, on the combinatorial family's regret after
    # exploration: the geometric mean over repetitions of p_fcb's at each
    # epsilon over non_federated's in the same repetition (the baseline has
    # no epsilon: its one cell).
    final = pl.read_parquet(comb / "*.parquet").filter(pl.col("t") == pl.col("horizon"))
    col = "regret_after_exploration"
    base = final.filter(pl.col("algorithm") == "non_federated").sort("repetition")[col].to_numpy()
    # Regret after exploration can be 0 or below (the greedy benchmark can
    # be beaten): the study is read on the additive scale, which says why,
    # and the ratio is of the means.
    (c,) = load_studies(comb)
    assert c.regret_word() == "regret per agent after exploration"
    assert c.scale == "additive" and "which the ratio scale cannot read" in md
    for eps in (1.0, 8.0):
        num = final.filter((pl.col("algorithm") == "p_fcb") & (pl.col("epsilon") == eps)).sort("repetition")[col].to_numpy()
        assert f"| {eps:g} | {num.mean() / base.mean():.4g} [" in md
    # gossip: epsilon = inf (no noise, so no clipping setting) is a level of
    # its own, not a corner of the range: the clip variants vary over 1 and
    # 4, the cells at inf are a reference level.
    (g,) = [s for s in load_studies(goss)]
    axis = next(a for a in g.axes if a.name == "epsilon")
    eff = main_effect(g, axis)
    assert sorted(set(eff["variant"].to_list())) == ["fed_ucb_gossip (clip=false)", "fed_ucb_gossip (clip=true)"]
    assert not np.isinf(eff["value"].to_list()).any()
    refs = reference_levels(g, axis)
    assert [math.isinf(v) for v in refs.filter(pl.col("variant").str.starts_with("fed_ucb_gossip"))["fixed"].to_list()] == [True]


def test_sharded_incomplete_and_merged_directories(tmp_path: Path) -> None:
    job = tmp_path / "planted.yaml"
    job.write_text(PLANTED.replace("repetitions: 12", "repetitions: 4"))
    engine("run", str(job), "--out", str(tmp_path), "--quiet", "--shard", "0/2")
    md = rep.report(tmp_path / "planted", tmp_path / "half").read_text()
    assert "Incomplete results" in md and "part-00001-of-00002.parquet" in md
    engine("run", str(job), "--out", str(tmp_path), "--quiet", "--shard", "1/2")
    md = rep.report(tmp_path / "planted", tmp_path / "whole").read_text()
    assert "Incomplete results" not in md and "| repetitions per cell | 4 |" in md
    engine("merge", str(tmp_path / "planted"))
    merged = rep.report(tmp_path / "planted", tmp_path / "merged").read_text()
    assert merged.split("## Privacy")[1] == md.split("## Privacy")[1]


def test_cli_errors_are_clean(planted: Path, tmp_path: Path, capsys) -> None:
    assert rep.main([str(tmp_path / "nothing"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "no such results directory" in err
    assert not (tmp_path / "o" / "report.md").exists()
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    assert rep.main([str(planted), "--out", str(blocker)]) == 2
    assert f"error: cannot write the report into {blocker}" in capsys.readouterr().err
    assert blocker.read_text() == "not a directory"


def test_readme_command_works_verbatim(planted: Path, tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    (line,) = [ln for ln in readme.splitlines() if ln.startswith("analysis/.venv/bin/python -m fedbandits_analysis.report ")]
    args = line.split()[3:]
    assert args[0] == "results/quickstart" and args[1] == "--out"
    args[0], args[2] = str(planted), str(tmp_path / args[2])
    assert rep.main(args) == 0
    assert (tmp_path / "report" / "report.md").exists() and (tmp_path / "report" / "report.html").exists()


def test_one_repetition_per_cell_claims_nothing(tmp_path: Path) -> None:
    d = run_job(tmp_path, PLANTED.replace("repetitions: 12", "repetitions: 1"))
    (s,) = load_studies(d)
    ranked = ranking(s, {a.name: main_effect(s, a) for a in s.axes})
    # a fold range, but no interval and so no verdict
    assert ranked["score"].null_count() == 0 and ranked["flat"].null_count() == 2
    assert ranked["extreme_lo"].is_nan().all() or ranked["extreme_lo"].null_count() == 2
    assert ranked["axis"][0] == "epsilon"  # by its fold range
    ws = warnings(s, ranked)
    assert not [w for w in ws if "shows no effect" in w] and any("fewer than 10 repetitions (min 1)" in w for w in ws)
    md = rep.report(d, tmp_path / "out").read_text()
    assert "undetermined (needs 2+ repetitions per cell)" in md and " inf " not in md


def test_axes_come_from_the_grid_or_from_the_data_less_aliases() -> None:
    from fedbandits_analysis.effects import grid_keys, swept_axes

    assert grid_keys("grid:\n  epsilon: [1, 2]\n  d: {linspace: [2, 8, 4]}\nenvironment: [a, b]\n") == ["epsilon", "d", "environment"]
    assert grid_keys("grid: [oops\n") == [] and grid_keys("just text") == []
    cells = pl.DataFrame(
        {
            "cell_index": [0, 1, 2, 3],
            "environment": ["e"] * 4,
            "d": [4, 16, 4, 16],
            "s_bound": [2.0, 4.0, 2.0, 4.0],  # derived from d: an alias
            "epsilon": [0.1, 0.1, 100.0, float("inf")],
            "sync": ["log", "every_round", "log", "sqrt_m"],
        }
    )
    params = ["d", "s_bound", "epsilon", "sync"]
    declared = swept_axes(cells, ["epsilon"], params)
    assert [a.name for a in declared] == ["epsilon"] and declared[0].log  # 0.1 to 100, inf aside
    inferred = swept_axes(cells, [], params)
    assert [a.name for a in inferred] == ["d", "epsilon", "sync"]
    assert inferred[2].values == ["log", "every_round", "sqrt_m"] and not inferred[2].numeric  # grid order
    assert not inferred[0].log  # 4 to 16: under 20x


# The issue-41 study at a small scale: four algorithms, FedUCB with and
# without privacy, epsilon x batch_size x sync.
STUDY = """\
name: study
seed: 41
repetitions: 4
horizon: 1000
checkpoints: {log_points: 10}
algorithm: [private_fedlinucb, fedlinucb, feducb_centralized, independent]
environment: linear_sphere
params: {m: 4, d: 4, k: 10, delta: 0.1}
grid:
  epsilon: [1, 16]
  batch_size: [5, 125]
  sync: [log, every_round]
  private: [true, false]
"""


def test_the_study_is_reported_per_variant_with_its_interactions_and_the_cost_of_privacy(tmp_path: Path) -> None:
    res = run_job(tmp_path, STUDY)
    (s,) = load_studies(res)
    variants = sorted(s.cells["variant"].unique().to_list())
    assert variants == [
        "fedlinucb",
        "feducb_centralized (non-private)",
        "feducb_centralized (private)",
        "independent",
        "private_fedlinucb",
    ]
    assert "private" not in [a.name for a in s.axes]  # a variant parameter, not an axis
    ranked = ranking(s, {a.name: main_effect(s, a) for a in s.axes})
    # sync is ranked separately for the private and the non-private FedUCB
    sync = ranked.filter(pl.col("axis") == "sync")["variant"].to_list()
    assert sorted(sync) == ["feducb_centralized (non-private)", "feducb_centralized (private)"]
    md = rep.report(res, tmp_path / "out").read_text()
    assert "No algorithm has both" not in md and "## Interactions within each variant" in md
    # Both crossed pairs are searched; on the ratio scale neither interacts
    # (epsilon 1 -> 16 is x0.45 at B = 5 and x0.42 at B = 125: a product,
    # which the additive contrast had reported as an interaction).
    inter = md[md.index("## Interactions within each variant") : md.index("## The cost of privacy")]
    assert "Searched: 2 pair(s) of axes" in inter and "None detected" in inter
    assert "| private_fedlinucb | `epsilon` x `batch_size` |" not in inter
    # every private cell paired: 4 Private-FedLinUCB with FedLinUCB, 4 FedUCB with its non-private self
    start = md.index("## The cost of privacy")
    cost = md[start : md.index("\n## ", start + 1)]
    assert cost.count("| private_fedlinucb epsilon=") == 4 and cost.count("| feducb_centralized (private) epsilon=") == 4
    assert "No non-private counterpart" not in cost
    assert (tmp_path / "out" / "study_privacy_cost.png").exists() and (tmp_path / "out" / "study_matched_1.png").exists()
    assert "Privacy axis of the epsilon plots: accounted epsilon" in md

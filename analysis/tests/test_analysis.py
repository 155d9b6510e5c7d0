"""Tests of the analysis package on Parquet written by the engine itself."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fedbandits_analysis import figures
from fedbandits_analysis.load import REQUIRED, ResultsError, scan, summarize
from tiny import ENGINE, write_sealed

ROOT = Path(__file__).resolve().parents[2]
JOB = """\
name: {name}
seed: 3
repetitions: 4
horizon: 400
checkpoints: {{every: 50}}
algorithm: [independent, private_fedlinucb]
environment: linear_sphere
params: {{m: 3, d: 4, k: 9, delta: 0.1}}
grid: {{epsilon: [0.5, 2]}}
"""


def engine() -> Path:
    exe = ENGINE
    assert exe.exists(), f"{exe} not built: run `cargo build --release` (.ci/run does) or set FEDBANDITS_BIN"
    return exe


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("results")
    job = d / "job.yaml"
    job.write_text(JOB.format(name="fixture"))
    subprocess.run([str(engine()), "run", str(job), "--out", str(d), "--quiet"], check=True, capture_output=True)
    return d / "fixture"


def png_size(path: Path) -> tuple[int, int]:
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_scan_reads_engine_output_with_schema(results: Path) -> None:
    lf = scan(results)
    schema = lf.collect_schema()
    for col, dtype in REQUIRED.items():
        assert schema[col] == dtype
    df = lf.collect()
    # 3 cells (independent once, private at two epsilons) x 4 reps x 8 checkpoints.
    assert df.height == 3 * 4 * 8
    assert set(df["algorithm"].unique()) == {"independent", "private_fedlinucb"}


def test_scan_errors_are_helpful(tmp_path: Path, results: Path) -> None:
    with pytest.raises(ResultsError, match="no such results directory"):
        scan(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ResultsError, match="no Parquet part files"):
        scan(tmp_path / "empty")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    pq.write_table(pa.table({"x": [1, 2]}), foreign / "part-0.parquet")
    with pytest.raises(ResultsError, match="incompatible engine"):
        scan(foreign)
    # A fedbandits file with a column removed.
    part = next(results.glob("part-*.parquet"))
    t = pq.read_table(part)
    md = {
        k: v
        for k, v in pq.read_metadata(part).metadata.items()
        if k not in (b"ARROW:schema", b"fedbandits.data_xxh64", b"fedbandits.footer_xxh64")
    }
    broken = tmp_path / "broken"
    broken.mkdir()
    f = broken / "part-0.parquet"
    write_sealed(t.drop(["group_regret"]).replace_schema_metadata(md), f)
    # Without its checksum the file is refused as rewritten ...
    with pytest.raises(ResultsError, match="no fedbandits.data_xxh64 checksum"):
        scan(broken)
    # ... and with a valid one, for the column it lacks.
    from fedbandits_analysis.load import data_checksum

    md[b"fedbandits.data_xxh64"] = f"{data_checksum(f):016x}".encode()
    write_sealed(t.drop(["group_regret"]).replace_schema_metadata(md), f)
    with pytest.raises(ResultsError, match="missing columns"):
        scan(broken)


def test_summary_mean_and_band_match_numpy(results: Path) -> None:
    lf = scan(results)
    s = summarize(lf, ["algorithm", "epsilon"])
    row = s.filter((pl.col("algorithm") == "private_fedlinucb") & (pl.col("epsilon") == 2.0) & (pl.col("t") == 400))
    raw = (
        lf.filter((pl.col("algorithm") == "private_fedlinucb") & (pl.col("epsilon") == 2.0) & (pl.col("t") == 400))
        .collect()["agent_regret"]
        .to_numpy()
    )
    assert row["n"][0] == 4
    mean, sd = raw.mean(), raw.std(ddof=1)
    assert row["mean"][0] == pytest.approx(mean, rel=1e-12)
    assert row["sd"][0] == pytest.approx(sd, rel=1e-12)
    assert row["lo"][0] == pytest.approx(mean - 1.96 * sd / np.sqrt(4), rel=1e-12)
    assert row["hi"][0] == pytest.approx(mean + 1.96 * sd / np.sqrt(4), rel=1e-12)


def test_every_figure_function_writes_a_png_of_the_expected_size(results: Path, tmp_path: Path) -> None:
    lf = scan(results)
    made = [
        figures.regret_curves(lf, ["algorithm", "epsilon"], tmp_path / "curves.png", "curves"),
        figures.regret_curves(lf, ["algorithm", "epsilon"], tmp_path / "avg.png", "avg", value="time_avg_regret"),
        figures.regret_curves(lf, ["algorithm", "epsilon"], tmp_path / "round.png", "round", value="round_regret"),
        figures.final_vs(lf.filter(pl.col("algorithm") == "private_fedlinucb"), "epsilon", [], tmp_path / "eps.png", "eps", logx=True),
        # with the non-private cells (no epsilon) as a reference line
        figures.final_vs(lf, "epsilon", [], tmp_path / "eps_ref.png", "eps", logx=True),
        figures.communication(lf, ["algorithm"], tmp_path / "comm.png", "comm"),
    ]
    for p in made:
        assert p.stat().st_size > 5000
        assert png_size(p) == (figures.WIDTH_PX, figures.HEIGHT_PX)


def test_cli_renders_figures_and_fails_cleanly(results: Path, tmp_path: Path, capsys) -> None:
    assert figures.main([str(results), "--out", str(tmp_path / "figs")]) == 0
    assert (tmp_path / "figs" / "fixture.png").exists()
    assert figures.main([str(tmp_path / "nothing"), "--out", str(tmp_path / "figs2")]) == 2
    assert "no such results directory" in capsys.readouterr().err


def test_paper_job_names_select_paper_figures(tmp_path: Path) -> None:
    d = tmp_path / "r"
    job = tmp_path / "zhou_fig2c_small.yaml"
    job.write_text(JOB.format(name="zhou_fig2c_small"))
    subprocess.run([str(engine()), "run", str(job), "--out", str(d), "--quiet"], check=True, capture_output=True)
    made = figures.figures_for_job(scan(d), "zhou_fig2c_small", tmp_path / "f")
    assert [p.name for p in made] == ["zhou_fig2c_small.png"]
    # The paper-scale, workstation-scale and VM-scale names select the same figure.
    for name in ("zhou_fig2c", "zhou_fig2c_medium", "zhou_fig2c_vm"):
        made = figures.figures_for_job(scan(d), name, tmp_path / "f")
        assert [p.name for p in made] == [f"{name}.png"]
    assert figures.split_job_name("dubey_fig1a_vm") == ("dubey_fig1a", "vm")
    assert figures.split_job_name("dubey_onset_m10") == ("dubey_onset", "m10")
    assert figures.split_job_name("quickstart") == ("quickstart", "")
    made = figures.figures_for_job(scan(d), "dubey_onset_m10", tmp_path / "f")
    assert [p.name for p in made] == ["dubey_onset_m10.png"]


def test_time_average_regret_and_typed_pandas(results: Path) -> None:
    from fedbandits_analysis.load import time_average_regret, to_pandas

    df = time_average_regret(scan(results)).collect()
    expected = df["agent_regret"].to_numpy() / df["t"].to_numpy()
    assert np.array_equal(df["time_avg_regret"].to_numpy(), expected)
    pdf = to_pandas(results)
    assert len(pdf) == df.height
    # Parameters null for some cells keep nullable integer / boolean types.
    assert str(pdf["batch_size"].dtype) == "Int64" and str(pdf["private"].dtype) == "boolean", pdf.dtypes
    assert not [c for c, t in pdf.dtypes.items() if t == np.dtype(object)], pdf.dtypes


def test_per_round_regret_is_the_slope_between_checkpoints(results: Path) -> None:
    from fedbandits_analysis.load import per_round_regret

    df = per_round_regret(scan(results)).collect()
    for (_, _), g in df.group_by(["cell_id", "repetition"]):
        t = g["t"].to_numpy().astype(float)
        r = g["agent_regret"].to_numpy()
        assert np.all(np.diff(t) > 0), "rows sorted by t within a repetition"
        expected = np.concatenate([[r[0] / t[0]], np.diff(r) / np.diff(t)])
        assert np.allclose(g["round_regret"].to_numpy(), expected, rtol=1e-12, atol=0)
    # A per-round regret cannot exceed the largest gap (rewards in [-1, 1]
    # on the fixture's sphere: gaps <= 2) nor be negative by more than rounding.
    assert df["round_regret"].min() > -1e-9 and df["round_regret"].max() <= 2.0


def test_window_regret_averages_the_per_round_slope(results: Path) -> None:
    from fedbandits_analysis.load import ResultsError, window_regret

    df = scan(results).collect()
    ts = sorted(set(df["t"].to_list()))
    mid, end = ts[len(ts) // 2], ts[-1]
    got = window_regret(scan(results), [0, mid, end], ["cell_id"])
    assert got.height == 2 * df["cell_id"].n_unique()
    for row in got.iter_rows(named=True):
        cell = df.filter(pl.col("cell_id") == row["cell_id"]).sort("repetition")
        a = cell.filter(pl.col("t") == row["t_from"])["agent_regret"].to_numpy() if row["t_from"] else 0.0
        b = cell.filter(pl.col("t") == row["t_to"])["agent_regret"].to_numpy()
        expected = (b - a) / (row["t_to"] - row["t_from"])
        assert row["n"] == len(b)
        assert np.isclose(row["mean"], expected.mean(), rtol=1e-12), row
    # an edge between checkpoints maps to the nearest one; two edges on one
    # checkpoint are an error, not a division by zero
    assert window_regret(scan(results), [0, end - 1], ["cell_id"])["t_to"].unique().to_list() == [end]
    with pytest.raises(ResultsError, match="same checkpoint"):
        window_regret(scan(results), [end, end + 1], ["cell_id"])


def test_families_come_from_the_engine_and_split_a_mixed_job(tmp_path: Path) -> None:
    from fedbandits_analysis.load import families, scan_family

    job = tmp_path / "mix.yaml"
    job.write_text(
        "name: mix\nseed: 1\nrepetitions: 2\nhorizon: 300\ncheckpoints: {every: 100}\n"
        "algorithm: [independent, fed_ucb_gossip]\nenvironment: [linear_sphere, mab_heterogeneous]\n"
        "params: {m: 3, d: 4, k: 9, epsilon: 1, arms: 3, graph: ring}\n"
    )
    subprocess.run([str(engine()), "run", str(job), "--out", str(tmp_path), "--quiet"], check=True, capture_output=True)
    reg = families(tmp_path / "mix")
    assert set(reg) == {"linear", "gossip", "combinatorial"}
    assert "fed_ucb_gossip" in reg["gossip"]["algorithms"] and "consensus_error" in reg["gossip"]["columns"]
    g = scan_family(tmp_path / "mix", "gossip").collect()
    assert g["algorithm"].unique().to_list() == ["fed_ucb_gossip"] and g.height == 2 * 3
    assert g["consensus_error"].null_count() == 0 and g["acct_epsilon_pure"].to_list() == [1.0] * 6
    assert "cholesky_failures" not in g.columns
    lin = scan_family(tmp_path / "mix", "linear").collect()
    assert lin["algorithm"].unique().to_list() == ["independent"] and "consensus_error" not in lin.columns
    with pytest.raises(ResultsError, match="unknown family"):
        scan_family(tmp_path / "mix", "no_such_family")


def test_federated_regret_ratio_divides_by_non_federated(tmp_path: Path) -> None:
    from fedbandits_analysis.load import federated_regret_ratio

    job = tmp_path / "frr.yaml"
    job.write_text(
        "name: frr\nseed: 1\nrepetitions: 2\nhorizon: 600\ncheckpoints: {every: 300}\n"
        "algorithm: [non_federated, fcb, p_fcb]\nenvironment: procurement\n"
        "params: {m: 3, producers: 8, epsilon: 1, delta: 0.01}\n"
    )
    subprocess.run([str(engine()), "run", str(job), "--out", str(tmp_path), "--quiet"], check=True, capture_output=True)
    lf = scan(tmp_path / "frr")
    df = federated_regret_ratio(lf)
    final = lf.filter(pl.col("t") == 600).group_by("algorithm").agg(pl.col("agent_regret").mean()).collect()
    mean = dict(zip(final["algorithm"].to_list(), final["agent_regret"].to_list(), strict=True))
    got = dict(zip(df["algorithm"].to_list(), df["frr"].to_list(), strict=True))
    assert set(got) == {"fcb", "p_fcb"}
    for a in got:
        assert abs(got[a] - mean[a] / mean["non_federated"]) < 1e-12


def run_engine(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(engine()), *args], capture_output=True, text=True)


def readme_snippets() -> list[str]:
    """The README's Python blocks that read `results/quickstart`."""
    text = (ROOT / "README.md").read_text()
    blocks = text.split("```python\n")[1:]
    return [b.split("```")[0] for b in blocks if "results/quickstart" in b]


def test_readme_snippets_work_after_merge_and_audit(tmp_path: Path) -> None:
    """The README's polars and pandas snippets, verbatim but for the path,
    on a directory that `merge` (manifest) and `audit` (_audit/) touched."""
    job = tmp_path / "job.yaml"
    job.write_text(JOB.format(name="quickstart"))
    assert run_engine("run", str(job), "--out", str(tmp_path), "--quiet").returncode == 0
    assert run_engine("merge", str(tmp_path / "quickstart")).returncode == 0
    r = run_engine("audit", str(job), "--out", str(tmp_path), "--trials", "200", "--attack-trials", "20")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "quickstart" / "_manifest.yaml").exists()
    assert (tmp_path / "quickstart" / "_audit" / "audit.parquet").exists()
    snippets = readme_snippets()
    assert len(snippets) >= 2, "README lost its polars/pandas snippets"
    for code in snippets:
        env: dict = {}
        exec(code.replace("results/quickstart", str(tmp_path / "quickstart")), env)
        # grouped by every swept column: one group per cell, nothing pooled
        assert env["keys"] == ["algorithm", "epsilon"]
        if "lf" in env:  # polars: the final summary has one row per cell
            cells = env["lf"].select("cell_id").unique().collect().height
            assert env["load"].final_summary(env["lf"]).height == cells == 3
            assert env["curves"].select(env["keys"]).unique().height == 3
        else:  # pandas
            final = env["final"]
            assert len(final.groupby(env["keys"], dropna=False)) == final["cell_id"].nunique() == 3
            # Nullable parameter columns keep their types in pandas.
            dtypes = env["df"].dtypes
            assert str(dtypes["private"]) == "boolean" and str(dtypes["batch_size"]) == "Int64", dtypes
            assert not [c for c, t in dtypes.items() if t == np.dtype(object)], dtypes
    # README's generated reference names every column the engine writes
    # (a parameter in its parameter table, any other in its column table).
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("### Parameters") : readme.index("<!-- END generated -->")]
    written = pq.read_schema(next((tmp_path / "quickstart").glob("part-*.parquet"))).names
    missing = [c for c in written if f"| `{c}` |" not in section]
    assert not missing, f"README's column list misses {missing}"
    assert scan(tmp_path / "quickstart").collect().height == 3 * 4 * 8
    manifest = tmp_path / "quickstart" / "_manifest.yaml"
    manifest.write_text(manifest.read_text().replace("complete: true", "complete: fals"))
    with pytest.raises(ResultsError, match="_manifest.yaml: checksum mismatch"):
        scan(tmp_path / "quickstart")


def test_scan_refuses_overlapping_shard_layouts_and_damaged_files(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(JOB.format(name="sharded"))
    for shard in ("0/2", "1/2"):
        assert run_engine("run", str(job), "--out", str(tmp_path), "--quiet", "--shard", shard).returncode == 0
    d = tmp_path / "sharded"
    assert scan(d).collect().height == 3 * 4 * 8
    assert run_engine("run", str(job), "--out", str(tmp_path), "--quiet").returncode == 0
    with pytest.raises(ResultsError, match="mixes shard layouts"):
        scan(d)
    (d / "part-00000-of-00001.parquet").unlink()
    part = d / "part-00000-of-00002.parquet"
    raw = bytearray(part.read_bytes())
    raw[2386:2394] = b"ABCDEFGH"
    part.write_bytes(bytes(raw))
    with pytest.raises(ResultsError, match="checksum mismatch"):
        scan(d)


def test_package_imports_under_its_own_name_from_anywhere(tmp_path: Path) -> None:
    """Installed, the package is `fedbandits_analysis` (not the generic
    `analysis`), and its figure CLI runs from any directory."""
    import sys

    code = "import fedbandits_analysis.load, importlib.util; print(importlib.util.find_spec('analysis') is None)"
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "True", r.stderr + r.stdout
    r = subprocess.run([sys.executable, "-m", "fedbandits_analysis.figures", "--help"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0 and "fedbandits_analysis.figures" in r.stdout, r.stderr


def test_short_commit_keeps_the_dirty_mark():
    from fedbandits_analysis.report import short_commit

    assert short_commit("0217cad69116f00d" * 2) == "0217cad69116"
    assert short_commit("0217cad69116f00d" * 2 + "+dirty") == "0217cad69116+dirty"
    assert short_commit("?") == "?"

"""The engine's exact privacy figure (`acct_epsilon`) against
Google's `dp-accounting` privacy loss distributions, for a probe
configuration of every private algorithm.

The engine writes, per cell, the releases one observation enters, each
release's noise multiplier (noise standard deviation over L2 sensitivity)
and `acct_epsilon`. The library composes the same mechanisms:
- Gaussian releases (Private-FedLinUCB `ldp`/`alt`/`sdp_amp`/`theorem`,
  FedUCB centralized and decentralized, P-FCB): `releases` Gaussian
  mechanisms of standard deviation `acct_noise_multiplier` and sensitivity
  1; the engine's figure must lie between the library's optimistic and
  pessimistic PLD estimates (the true value is between them, so the engine
  is never below a valid lower bound) and within 1% (or 1e-3 absolute,
  where the figure is about 0) of the pessimistic one;
- Laplace releases (Fed_UCB's partial sums): `releases` Laplace mechanisms
  of scale `acct_noise_multiplier / sqrt(2)` per unit of sensitivity; the
  engine's pure-DP figure must be where the library's delta(epsilon) reaches
  0 (within 1%).
"""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path

import polars as pl
import pytest

dp = pytest.importorskip("dp_accounting")
from dp_accounting.pld import privacy_loss_distribution as pld  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

#: (file name, job text): every private algorithm, protocol and calibration.
PROBES = {
    "zhou": """\
name: zhou
repetitions: 1
horizon: 2000
checkpoints: {every: 2000}
algorithm: private_fedlinucb
environment: linear_sphere
params: {m: 10, d: 4, k: 10, batch_size: 25}
grid:
  protocol: [ldp, alt]
  calibration: [code, theorem]
  epsilon: [0.2, 1, 5]
  delta: [0.1, 1.0e-5]
""",
    "zhou_amp": """\
name: zhou_amp
repetitions: 1
horizon: 2000
checkpoints: {every: 2000}
algorithm: private_fedlinucb
environment: linear_sphere
params: {m: 10, d: 4, k: 10, protocol: sdp_amp, delta: 0.0001}
grid: {epsilon: [0.001, 1]}
""",
    "dubey": """\
name: dubey
repetitions: 1
horizon: 1000
checkpoints: {every: 1000}
algorithm: [feducb_centralized, feducb_decentralized]
environment: linear_gap
params: {m: 4, d: 3, k: 9, graph: ring, gamma: 2, schedule: paper}
grid:
  epsilon: [1, 10]
  delta: [0.1, 1.0e-6]
  neighbours: [add_remove, substitute]
""",
    "solanki": """\
name: solanki
repetitions: 1
horizon: 300
checkpoints: {every: 300}
algorithm: p_fcb
environment: procurement
params: {m: 4, producers: 5, delta: 0.01}
grid: {epsilon: [1, 10]}
""",
    "zhu": """\
name: zhu
repetitions: 1
horizon: 1024
checkpoints: {every: 1024}
algorithm: fed_ucb_gossip
environment: mab_heterogeneous
params: {m: 3, arms: 2, graph: complete}
grid:
  epsilon: [1, 5]
  budget_split: [exact, paper]
""",
}


def engine(*args: str) -> subprocess.CompletedProcess:
    exe = Path(os.environ.get("FEDBANDITS_BIN", ROOT / "target" / "release" / "fedbandits"))
    assert exe.exists(), f"{exe} not built: run `cargo build --release` or set FEDBANDITS_BIN"
    return subprocess.run([str(exe), *args], capture_output=True, text=True)


#: The columns the probes read, whatever the family.
ACCOUNTANT_COLUMNS = (
    "job",
    "algorithm",
    "cell_id",
    "target_delta",
    "acct_epsilon",
    "acct_epsilon_sums",
    "acct_mu",
    "acct_epsilon_zcdp",
    "acct_releases_per_observation",
    "acct_noise_multiplier",
)


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory) -> pl.DataFrame:
    """One row per private probe cell: its accountant columns."""
    tmp = tmp_path_factory.mktemp("probes")
    frames = []
    for name, text in PROBES.items():
        job = tmp / f"{name}.yaml"
        job.write_text(text)
        r = engine("run", str(job), "--out", str(tmp / "out"), "--quiet")
        assert r.returncode == 0, r.stderr
        # A family's files carry its own accountant columns only: the
        # others are null here, as the loader's union makes them.
        df = pl.read_parquet(tmp / "out" / name / "*.parquet").filter(pl.col("t") == pl.col("horizon"))
        cols = ACCOUNTANT_COLUMNS
        frames.append(df.with_columns(pl.lit(None, pl.Float64).alias(c) for c in cols if c not in df.columns).select(cols))
    return pl.concat(frames, how="vertical_relaxed")


def gaussian_bounds(nm: float, releases: int, delta: float, pure: float = 0.0) -> tuple[float, float]:
    """The library's (optimistic, pessimistic) epsilon at delta of
    `releases` Gaussian mechanisms of noise multiplier `nm`, composed with a
    pure `pure`-DP release as randomized response where `pure` > 0."""
    out = []
    for pessimistic in (False, True):
        d = pld.from_gaussian_mechanism(
            standard_deviation=nm,
            sensitivity=1.0,
            value_discretization_interval=1e-4,
            pessimistic_estimate=pessimistic,
            use_connect_dots=pessimistic,
        ).self_compose(releases)
        if pure > 0:
            d = d.compose(
                pld.from_randomized_response(
                    noise_parameter=2.0 / (1.0 + math.exp(pure)),
                    num_buckets=2,
                    pessimistic_estimate=pessimistic,
                    value_discretization_interval=1e-4,
                )
            )
        out.append(d.get_epsilon_for_delta(delta))
    return out[0], out[1]


def test_every_private_algorithm_is_probed(figures: pl.DataFrame) -> None:
    assert set(figures["job"]) == set(PROBES)
    assert figures.height == 24 + 2 + 16 + 2 + 4
    # FedUCB releases its data-dependent schedule, which no figure covers:
    # its run has no figure, its noisy sums have `acct_epsilon_sums`.
    dubey = figures.filter(pl.col("job") == "dubey")
    assert dubey["acct_epsilon"].null_count() == dubey.height == 16
    assert dubey["acct_epsilon_sums"].null_count() == 0 and dubey["acct_mu"].null_count() == 16
    others = figures.filter(pl.col("job") != "dubey")
    assert others["acct_epsilon"].null_count() == 0 and others["acct_epsilon_sums"].null_count() == others.height


def test_gaussian_figures_match_the_library(figures: pl.DataFrame) -> None:
    rows = figures.filter(pl.col("job") != "zhu").iter_rows(named=True)
    checked = 0
    for r in rows:
        # FedUCB: the figure of its noisy sums (its run has none).
        exact = r["acct_epsilon"] if r["acct_epsilon"] is not None else r["acct_epsilon_sums"]
        nm, k, delta, eps = (
            r["acct_noise_multiplier"],
            r["acct_releases_per_observation"],
            r["target_delta"],
            exact,
        )
        lo, hi = gaussian_bounds(nm, k, delta)
        where = f"{r['job']} {r['cell_id']}: engine {eps} vs dp-accounting [{lo}, {hi}]"
        assert eps >= lo - 1e-9, where
        assert abs(eps - hi) <= max(0.01 * hi, 1e-3), where
        if r["acct_epsilon"] is not None:
            # mu = sqrt(releases) / noise multiplier, and the exact figure is
            # never looser than the zCDP conversion.
            assert r["acct_mu"] == pytest.approx(math.sqrt(k) / nm, rel=1e-12), where
            assert eps <= r["acct_epsilon_zcdp"] + 1e-9, where
        checked += 1
    assert checked == 44


def test_laplace_figures_match_the_library(figures: pl.DataFrame) -> None:
    rows = list(figures.filter(pl.col("job") == "zhu").iter_rows(named=True))
    assert len(rows) == 4
    for r in rows:
        b = r["acct_noise_multiplier"] / math.sqrt(2.0)
        k = r["acct_releases_per_observation"]
        d = pld.from_laplace_mechanism(parameter=b, sensitivity=1.0, value_discretization_interval=1e-5)
        d = d.self_compose(k)
        eps = r["acct_epsilon"]
        where = f"{r['cell_id']}: engine {eps}, k {k}, b {b}"
        # Pure DP: no delta left at the engine's epsilon, some just below.
        assert d.get_delta_for_epsilon(eps * 1.001) <= 1e-9, where
        assert d.get_delta_for_epsilon(eps * 0.99) > 1e-9, where
        assert abs(eps - k / b) <= 1e-9 * eps, where


#: Every private algorithm and protocol with an exact calibration, at the
#: default calibration: Private-FedLinUCB ldp, sdp_amp, alt,
#: sdp_vecsum;
#: FedUCB centralized (its private schedule, the default, with its sums)
#: and decentralized (its noisy sums); Fed_UCB; P-FCB.
EXACT = """\
name: exact
repetitions: 1
horizon: 2000
checkpoints: {every: 2000}
algorithm: [private_fedlinucb, feducb_centralized, feducb_decentralized, fed_ucb_gossip, p_fcb]
environment: [linear_gap, mab_heterogeneous, procurement]
params: {m: 4, d: 4, k: 9, arms: 3, producers: 5, t_low: 50, t_high: 1000, graph: ring, delta: 0.001}
grid: {epsilon: [0.5, 1, 4], protocol: [ldp, sdp_amp, alt, sdp_vecsum]}
"""


def test_exact_calibration_meets_every_target(tmp_path: Path) -> None:
    """`calibration: exact` (the default): every figure in [0.99, 1] x the
    target, and dp-accounting's PLD from the written noise multiplier and
    release count agrees within 1% (Gaussian) or exactly (Laplace)."""
    job = tmp_path / "exact.yaml"
    job.write_text(EXACT)
    r = engine("run", str(job), "--out", str(tmp_path / "out"), "--quiet")
    assert r.returncode == 0, r.stderr
    df = pl.read_parquet(tmp_path / "out" / "exact" / "*.parquet").filter(pl.col("t") == pl.col("horizon"))
    assert df.height == 12 + 3 + 3 + 3 + 3
    for row in df.iter_rows(named=True):
        target, delta = row["target_epsilon"], row["target_delta"]
        nm, k = row["acct_noise_multiplier"], row["acct_releases_per_observation"]
        fig = row["acct_epsilon"] if row["acct_epsilon"] is not None else row["acct_epsilon_sums"]
        where = f"{row['algorithm']} {row['protocol']} eps {target}: {fig}"
        assert row["calibration"] == ("exact" if row["algorithm"] != "fed_ucb_gossip" else None), where
        # Every private cell states its neighbouring relation.
        want = "add_remove" if row["algorithm"].startswith("feducb") else "substitute"
        assert row["neighbours"] == want, where
        assert 0.99 * target <= fig <= target, where
        if row["protocol"] == "sdp_vecsum":
            # Binomial noise (test_privacy_vecsum.py checks the figure against
            # the library's PLDs of the same pmfs): here, that the solved
            # counts are not excessive. Gaussian noise of the same variance
            # (trials ceil(tau g_j^2), tau p (1 - p) = (nm Delta)^2, so its
            # mu^2 = sum_j ((G_j + sqrt(C)) / (g_j nm Delta))^2 with G_j =
            # g_j Delta) would provide at least 0.9 x the target.
            d, c, delta_l2 = 4, 14, math.sqrt(4.5)
            mu2 = 0.0
            for j in range(k):
                g = max(2.0 * math.sqrt((1 << j) * 25 * 4), d, 4.0)
                mu2 += ((g * delta_l2 + math.sqrt(c)) / (g * nm * delta_l2)) ** 2
            lo, hi = gaussian_bounds(1.0 / math.sqrt(mu2), 1, delta)
            assert 0.9 * target <= hi <= fig * 1.001, f"{where}: Gaussian of the same variance {hi}"
        elif row["algorithm"] == "fed_ucb_gossip":
            d = pld.from_laplace_mechanism(parameter=nm / math.sqrt(2.0), sensitivity=1.0, value_discretization_interval=1e-5)
            d = d.self_compose(k)
            assert d.get_delta_for_epsilon(fig * 1.001) <= 1e-9 < d.get_delta_for_epsilon(fig * 0.99), where
        else:
            # FedUCB's private schedule spends schedule_share (0.1) of the
            # target by the sparse vector technique: pure DP, composed with
            # the Gaussian sums as randomized response (its worst case).
            svt = 0.1 * target if row["schedule"] == "private" else 0.0
            lo, hi = gaussian_bounds(nm, k, delta, pure=svt)
            assert lo - 1e-9 <= fig and abs(fig - hi) <= 0.01 * hi, f"{where} vs dp-accounting [{lo}, {hi}] with {svt}"

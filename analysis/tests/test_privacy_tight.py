"""The engine's privacy figures are tight, not only safe: for
every private mechanism with a Gaussian or Laplace view, at three targets
under the default calibration and with both samplers, `acct_epsilon` is
within 10% of a figure computed here independently of the engine's
accounting (for `sampler: discrete` the engine's is the lattice bound on
the rounded statistic, the independent one dp-accounting's on the exact
statistic at the noise drawn, so the engine's may exceed it by the
rounding, about 1e-6 relative):

- the release count and the L2 sensitivity are derived here from the
  cell's own parameters (the tree levels an observation can reach given
  the leaves its schedule can produce; the worst pair of observations under
  the cell's relation), not read from the engine's columns;
- the noise is what the engine added (`acct_noise_multiplier` x
  `acct_sensitivity`: the standard deviation in the observer's view);
- the composition is Google's dp-accounting privacy loss distributions,
  FedUCB's private schedule entering as randomized response with its pure
  epsilon (its worst case).

A second test checks dp-accounting's composition of a Gaussian with
randomized response against a direct computation (numerical integration of
the hockey-stick divergence) on a small case, so that neither library nor
engine is the only witness.
"""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path

import polars as pl
import pytest

dp = pytest.importorskip("dp_accounting")
from scipy import integrate, optimize, stats  # noqa: E402
from test_privacy_exact import gaussian_bounds  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

#: Every Gaussian or Laplace private mechanism at its default calibration
#: (`exact`) and relation, at three targets, on bounded data (linear_gap,
#: whose Bernoulli rewards need no clipping for the sensitivities to hold).
JOB = """\
name: tight
repetitions: 1
horizon: 4000
checkpoints: {every: 4000}
algorithm: [private_fedlinucb, feducb_centralized, feducb_decentralized, fed_ucb_gossip, p_fcb]
environment: [linear_gap, mab_heterogeneous, procurement]
params: {m: 6, d: 4, k: 9, arms: 3, producers: 5, t_low: 50, t_high: 1000, graph: ring, gamma: 2, delta: 0.001}
grid: {epsilon: [0.5, 2, 8], protocol: [ldp, sdp_amp, alt], sampler: [float, discrete]}
"""


def engine(*args: str) -> subprocess.CompletedProcess:
    exe = Path(os.environ.get("FEDBANDITS_BIN", ROOT / "target" / "release" / "fedbandits"))
    assert exe.exists(), f"{exe} not built: run `cargo build --release` or set FEDBANDITS_BIN"
    return subprocess.run([str(exe), *args], capture_output=True, text=True)


def levels(leaves: int) -> int:
    """Nodes of a binary counter an observation's leaf can enter when the
    tree receives at most `leaves` leaves: floor(log2 leaves) + 1."""
    return int(math.floor(math.log2(max(1, leaves)))) + 1


def worst_pair_sq(kind: str, relation: str, bound: float = 1.0) -> float:
    """The squared L2 distance of a node's statistic between the worst pair
    of neighbouring observations, by a search over ||x||, ||x'|| <= L, the
    cosine between them and rewards in {-1, 1} (the squared distance is
    convex in the rewards). `kind`: "zhou" (Gram upper triangle with noise
    (Z + Z^T)/2, and the bias: ||dG||_F^2 + ||db||^2) or "dubey" (the
    symmetric [Gram, bias] block without the y^2 corner: ||dG||_F^2 + 2
    ||db||^2)."""
    bias_weight = 1.0 if kind == "zhou" else 2.0
    best = 0.0
    grid = [bound * i / 40 for i in range(41)]
    if relation == "add_remove":
        return max(a**4 + bias_weight * a * a for a in grid)
    for a in grid:
        for b in grid:
            for i in range(401):
                c = -1.0 + i / 200.0
                gram = a**4 + b**4 - 2 * a * a * b * b * c * c
                for y, y2 in ((1, 1), (1, -1)):
                    bias = a * a + b * b - 2 * y * y2 * a * b * c
                    best = max(best, gram + bias_weight * bias)
    return best


def reach(graph: str, m: int, hops: int) -> int:
    """The largest number of agents within `hops` hops of one agent (itself
    included), by breadth-first search on the fixed graphs."""
    edges = {
        "ring": [(i, (i + 1) % m) for i in range(m)],
        "line": [(i, i + 1) for i in range(m - 1)],
        "star": [(0, i) for i in range(1, m)],
        "complete": [(i, j) for i in range(m) for j in range(i + 1, m)],
    }[graph]
    adj: dict[int, set[int]] = {i: set() for i in range(m)}
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)
    best = 0
    for start in range(m):
        seen, frontier = {start}, {start}
        for _ in range(hops):
            frontier = {j for i in frontier for j in adj[i]} - seen
            seen |= frontier
        best = max(best, len(seen))
    return best


def derived(row: dict) -> tuple[int, float, float]:
    """(releases, sensitivity, pure epsilon of the schedule) derived from
    the row's parameters alone."""
    t, m = row["horizon"], row["m"]
    algo = row["algorithm"]
    if algo == "private_fedlinucb":
        return levels(t // row["batch_size"]), math.sqrt(worst_pair_sq("zhou", row["neighbours"])), 0.0
    if algo.startswith("feducb"):
        cap = row["schedule_cap"]
        pure = row["schedule_share"] * row["target_epsilon"]
        if algo == "feducb_centralized":
            # every agent's tree takes a leaf per sync: at most M cap
            # requests plus the powers of two up to T
            leaves = min(t, m * cap + levels(t))
        else:
            # per slot: the requests of the n slots within gamma hops, each
            # at most cap plus the powers of two of its own rounds
            own = -(-t // row["gamma"])
            leaves = min(t, reach(row["graph"], m, row["gamma"]) * (cap + levels(own)))
        return levels(leaves), math.sqrt(worst_pair_sq("dubey", row["neighbours"])), pure
    if algo == "p_fcb":
        # one round's procurement (k units, w and y) enters one message
        return 1, math.sqrt(2.0), 0.0
    raise AssertionError(algo)


def tight_epsilon(sigma: float, releases: int, sensitivity: float, pure: float, delta: float) -> tuple[float, float]:
    """dp-accounting's (optimistic, pessimistic) epsilon at delta of
    `releases` Gaussian releases of noise `sigma` and sensitivity
    `sensitivity`, with a pure `pure`-DP release as randomized response."""
    return gaussian_bounds(sigma / sensitivity, releases, delta, pure=pure)


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    tmp = tmp_path_factory.mktemp("tight")
    job = tmp / "tight.yaml"
    job.write_text(JOB)
    r = engine("run", str(job), "--out", str(tmp), "--quiet")
    assert r.returncode == 0, r.stderr
    df = pl.read_parquet(tmp / "tight" / "*.parquet").filter(pl.col("t") == pl.col("horizon"))
    return list(df.iter_rows(named=True))


def test_every_figure_is_within_ten_percent_of_an_independent_tight_figure(rows: list[dict]) -> None:
    seen = set()
    for row in rows:
        target, delta = row["target_epsilon"], row["target_delta"]
        figure = row["acct_epsilon"]
        where = f"{row['algorithm']} {row['protocol']} {row['sampler']} eps {target}"
        assert figure is not None and 0.99 * target <= figure <= target, f"{where}: {figure}"
        sigma = row["acct_noise_multiplier"] * row["acct_sensitivity"]
        if row["algorithm"] == "fed_ucb_gossip":
            # Laplace blocks: floor(log2 T) + 1 of scale b, substitution
            # within the clipping range moves a block by its width: pure
            # epsilon k width / b, the exact figure.
            k = levels(row["horizon"])
            b = sigma / math.sqrt(2.0)
            tight = k * row["acct_sensitivity"] / b
            lo = tight
        else:
            k, sens, pure = derived(row)
            lo, tight = tight_epsilon(sigma, k, sens, pure, delta)
        print(f"{where}: target {target}, acct_epsilon {figure:.4f}, independent tight {tight:.6f} ({figure / tight:.6f})")
        assert figure >= lo * (1 - 1e-6), f"{where}: engine {figure} below the tight lower estimate {lo}"
        assert figure <= 1.10 * tight, f"{where}: engine {figure} more than 10% above the tight figure {tight}"
        seen.add((row["algorithm"], row["protocol"], row["sampler"]))
    # ldp, sdp_amp, alt, both FedUCB forms, gossip and P-FCB, with both
    # samplers.
    assert len(seen) == (3 + 2 + 1 + 1) * 2, seen


def test_gaussian_with_randomized_response_matches_a_direct_computation() -> None:
    """delta(E) of mu-GDP composed with randomized response at e, computed
    by integrating (p(z) - e^E q(z))_+ over the Gaussian part for each of
    the response's two privacy losses; dp-accounting's epsilon at delta
    agrees within 1%."""
    mu, e, delta = 1.2, 0.4, 1e-3
    p = 1.0 / (1.0 + math.exp(-e))

    def gauss_delta(x: float) -> float:
        f = lambda z: max(0.0, stats.norm.pdf(z) - math.exp(x) * stats.norm.pdf(z, loc=mu))  # noqa: E731
        # the integrand is positive below the crossing z* = mu/2 - x/mu
        return integrate.quad(f, -40.0, mu / 2 - x / mu, limit=200)[0]

    def direct(x: float) -> float:
        return p * gauss_delta(x - e) + (1 - p) * gauss_delta(x + e)

    eps = optimize.brentq(lambda x: direct(x) - delta, 0.0, 20.0, xtol=1e-10)
    lo, hi = tight_epsilon(1.0 / mu, 1, 1.0, 0.0, delta)
    lo_c, hi_c = tight_epsilon(1.0 / mu, 1, 1.0, e, delta)
    print(f"direct {eps:.5f}, dp-accounting [{lo_c:.5f}, {hi_c:.5f}] (Gaussian alone [{lo:.5f}, {hi:.5f}])")
    assert lo_c - 1e-6 <= eps <= hi_c * 1.01 and abs(eps - hi_c) <= 0.01 * eps
    # composing by summing would overstate it
    assert eps < hi + e

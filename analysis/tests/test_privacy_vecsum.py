"""The vector-summation protocol's exact figure (`sdp_vecsum`) against an
independent computation: dp-accounting's privacy-loss distributions built from the same Binomial probability mass functions.

The engine bounds the protocol's privacy loss over every lattice shift k
of the shuffler's sums that one changed point can cause at a tree level
(||k||_2 <= G_j + sqrt(C), |k_c| <= ceil(min(G_j, 2 g_j)), with G_j = g_j
Delta / L and C coordinates; `privacy::vecsum_account`). Here the exact
privacy-loss distribution of the two extreme shifts of that set, composed
over the coordinates and the levels, is computed by the library from
Binomial(t_j, 1/4) and its shift: the *spread* shift (every coordinate moved
by 1 + floor(G_j / sqrt(C)), which reaches the L2 bound) and the
*concentrated* one (a single coordinate moved by its maximum). The engine's
figure must lie above both (it claims to cover every shift of the set) and
within 8% of the larger (its unit-shift decomposition and grid cost a few
percent, not more).
"""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pytest

dp = pytest.importorskip("dp_accounting")
from dp_accounting.pld import privacy_loss_distribution as pld  # noqa: E402
from scipy.stats import binom  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
P = 0.25


def engine(*args: str) -> subprocess.CompletedProcess:
    exe = Path(os.environ.get("FEDBANDITS_BIN", ROOT / "target" / "release" / "fedbandits"))
    assert exe.exists(), f"{exe} not built: run `cargo build --release` or set FEDBANDITS_BIN"
    return subprocess.run([str(exe), *args], capture_output=True, text=True)


def run(tmp: Path, text: str) -> pl.DataFrame:
    job = tmp / "job.yaml"
    job.write_text(text)
    r = engine("run", str(job), "--out", str(tmp / "out"), "--quiet")
    assert r.returncode == 0, r.stderr
    return pl.read_parquet(tmp / "out" / "vecsum" / "*.parquet").filter(pl.col("t") == pl.col("horizon"))


def levels(d: int, m: int, batch: int, horizon: int) -> list[tuple[int, float]]:
    """(n_j, g_j) per tree level, as the protocol sets them."""
    count = int(math.floor(math.log2(max(horizon // batch, 1)))) + 1
    out = []
    for j in range(count):
        n = (1 << j) * batch * m
        out.append((n, max(2.0 * math.sqrt(n), float(d), 4.0)))
    return out


def shift_pld(trials: int, k: int, pessimistic: bool) -> pld.PrivacyLossDistribution:
    """Binomial(trials, 1/4) + k against Binomial(trials, 1/4), both orders."""
    sigma = math.sqrt(trials * P * (1 - P))
    lo = max(0, int(trials * P - 14 * sigma))
    hi = min(trials + k, int(trials * P + 14 * sigma) + k)
    ys = np.arange(lo, hi + 1)
    base = binom.logpmf(ys, trials, P)
    moved = binom.logpmf(ys - k, trials, P)
    lower = {int(y): float(v) for y, v in zip(ys, base, strict=True) if v > -np.inf}
    upper = {int(y): float(v) for y, v in zip(ys, moved, strict=True) if v > -np.inf}
    return pld.from_two_probability_mass_functions(
        lower,
        upper,
        pessimistic_estimate=pessimistic,
        value_discretization_interval=1e-4,
        log_mass_truncation_bound=-80.0,
        symmetric=False,
    )


def candidate(plan: list[tuple[int, list[int]]], delta: float, pessimistic: bool) -> float:
    """epsilon at delta of the composition, per level (trials, shifts)."""
    total = None
    for trials, shifts in plan:
        for k in sorted(set(shifts)):
            one = shift_pld(trials, k, pessimistic).self_compose(shifts.count(k))
            total = one if total is None else total.compose(one)
    return total.get_epsilon_for_delta(delta)


def extreme_shifts(d: int, g: float, sensitivity: float) -> tuple[list[int], list[int]]:
    coords = d * (d + 1) // 2 + d
    big_g = g * sensitivity
    spread = [1 + int(math.floor(big_g / math.sqrt(coords)))] * coords
    single = [int(math.ceil(min(big_g, 2 * g)))]
    return spread, single


VECSUM = """\
name: vecsum
repetitions: 1
horizon: {horizon}
checkpoints: {{every: {horizon}}}
algorithm: private_fedlinucb
environment: linear_gap
params: {{m: {m}, d: 2, k: 4, batch_size: {batch}, protocol: sdp_vecsum, epsilon: {eps}, delta: 0.001, calibration: code}}
"""


@pytest.mark.parametrize(
    ("m", "batch", "horizon", "eps", "looser"),
    [
        # Parts of 2e4 trials and more: within 8% of the extreme shifts.
        (10, 25, 800, 0.25, 1.08),
        # Parts of a few hundred trials (tiny federation, large epsilon):
        # still above, looser (the Binomial's heavy tails at small counts).
        (2, 5, 40, 1.0, 1.7),
        (2, 5, 40, 0.5, 1.7),
    ],
)
def test_the_vecsum_figure_covers_the_extreme_shifts(tmp_path: Path, m: int, batch: int, horizon: int, eps: float, looser: float) -> None:
    text = VECSUM.format(m=m, batch=batch, horizon=horizon, eps=eps)
    row = run(tmp_path, text).row(0, named=True)
    figure, delta = row["acct_epsilon"], 1e-3
    # The dominating pair is in the row (README's recipe recomputes the
    # figure from it); no zCDP pair (the noise is not Gaussian).
    assert figure is not None and row["acct_mu"] > 0 and 0 < row["acct_tail"] < 1e-5 and row["acct_epsilon_zcdp"] is None
    # The substitute relation's tight sensitivity at L = 1 (a 60 degree pair).
    d, sens = 2, math.sqrt(4.5)
    log_t = math.log(d * d / delta)
    spread_plan, single_plan = [], []
    for n, g in levels(d, m, batch, horizon):
        b = max(1.0, math.ceil(g * g * log_t * log_t / (eps * eps * n)))
        trials = n * int(b)
        spread, single = extreme_shifts(d, g, sens)
        spread_plan.append((trials, spread))
        single_plan.append((trials, single))
    # Lower estimates of each shift's true figure: the engine must be above.
    for name, plan in (("spread", spread_plan), ("single", single_plan)):
        below = candidate(plan, delta, pessimistic=False)
        assert figure >= below, f"{name}: engine {figure} below dp-accounting {below}"
    top = max(candidate(spread_plan, delta, True), candidate(single_plan, delta, True))
    print(f"m={m} eps={eps}: engine {figure:.4f}, extreme shifts (dp-accounting) {top:.4f}, ratio {figure / top:.3f}")
    assert figure <= looser * top, f"engine {figure} looser than {looser} x {top}"

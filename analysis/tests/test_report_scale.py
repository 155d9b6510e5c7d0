"""Issue 53: the report reads a study right. On synthetic studies with a
known answer (planted.py), read as the engine's users ran theirs (4
repetitions, one hard problem instance per repetition shared by every
cell): a x4 effect of epsilon is found and ranked first, a pure product of
two axes reports no interaction while a real one is detected; and on a
small real run with two protocols, every figure that compares variants
shows both."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import planted
import polars as pl
import pytest
from fedbandits_analysis import report as rep
from fedbandits_analysis import report_plots
from fedbandits_analysis.contrasts import interactions
from fedbandits_analysis.effects import Axis, main_effect, ranking

ROOT = Path(__file__).resolve().parents[2]
#: As the issue's study: 4 repetitions.
REPS = 4
EPS = [0.5, 2.0, 8.0]
M = [2, 20]


def _markdown(s, tmp_path: Path) -> str:
    return rep.to_markdown(rep.job_report(s, tmp_path))


def _instances(seed: int) -> tuple[np.random.Generator, np.ndarray]:
    """Per-repetition instance factors: ln-sd 1.0, so one repetition's
    problem is often 5x harder than another's (linear_sphere's theta*)."""
    rng = np.random.default_rng(seed)
    return rng, np.exp(rng.normal(0.0, 1.0, REPS))


def _cells(rng, inst, value) -> list[dict]:
    """private_fedlinucb over epsilon x m x confidence_scale with final
    regret value(eps, m) x the repetition's instance x a cell's own noise
    (ln-sd 0.15)."""
    rows = []
    for eps, m, c in itertools.product(EPS, M, [0.98, 1.0, 1.02]):
        own = np.exp(rng.normal(0.0, 0.15, REPS))
        v = value(eps, m)
        rows.append(
            {
                "algorithm": "private_fedlinucb",
                "cell": {"epsilon": eps, "m": m, "confidence_scale": c},
                "value": lambda r, v=v, o=own: v * inst[r] * o[r],
            }
        )
    return rows


AXES = [Axis("epsilon", EPS, True, False), Axis("m", M, True, False), Axis("confidence_scale", [0.98, 1.0, 1.02], True, False)]
PARAMS = ["epsilon", "m", "confidence_scale"]


def test_a_x4_effect_under_strong_instance_variation_is_found_and_ranked_first(tmp_path: Path) -> None:
    rng, inst = _instances(531)
    # regret ~ epsilon^-1/2: x4 from 0.5 to 8; m a small x1.1; confidence_scale none.
    s = planted.study(
        _cells(rng, inst, lambda e, m: 2.0e4 * (e / 0.5) ** -0.5 * (1.1 if m == 20 else 1.0)),
        AXES,
        PARAMS,
        {"private_fedlinucb"},
        reps=REPS,
    )
    ranked = ranking(s, {a.name: main_effect(s, a) for a in s.axes})
    top = ranked.row(0, named=True)
    assert top["axis"] == "epsilon" and top["flat"] is False
    # the fold range and the paired ratio of the extreme levels: x4
    assert top["score"] == pytest.approx(4.0, rel=0.1)
    assert top["extreme_lo"] < 4.0 < top["extreme_hi"] and top["extreme_lo"] > 3.0
    assert ranked.filter(pl.col("axis") == "confidence_scale")["flat"].to_list() == [True]
    md = _markdown(s, tmp_path)
    assert "Axis `epsilon` shows no effect" not in md
    assert "Axis `confidence_scale` shows no effect" in md
    assert md.index("| 1 | `epsilon` |") < md.index("`confidence_scale` |")


def test_a_pure_product_reports_no_interaction_and_a_real_one_is_detected(tmp_path: Path) -> None:
    rng, inst = _instances(532)
    # More agents help x3.16 at every epsilon: no interaction on the ratio
    # scale, a large one on the additive scale.
    product = planted.study(_cells(rng, inst, lambda e, m: 2.0e4 * e**-0.5 * m**-0.5), AXES, PARAMS, {"private_fedlinucb"}, reps=REPS)
    md = _markdown(product, tmp_path / "product")
    section = md[md.index("## Interactions within each variant") : md.index("## The cost of privacy")]
    assert "| private_fedlinucb | `epsilon` x `m` |" not in section and "None detected" in section
    assert "3 pair(s) of axes" in section  # the multiple-comparison statement
    found = interactions(product.final, product.axes, product.metric, product.scale)
    assert len(found) == 3 and [f for f in found if f.detected] == []
    # The benefit of m: x3 at epsilon 0.5, none at epsilon 8: detected.
    rng, inst = _instances(533)
    real = planted.study(
        _cells(rng, inst, lambda e, m: 2.0e4 * e**-0.5 * ((1 / 3 if m == 20 else 1.0) if e < 1 else 1.0)),
        AXES,
        PARAMS,
        {"private_fedlinucb"},
        reps=REPS,
    )
    found = interactions(real.final, real.axes, real.metric, real.scale)
    first = found[0]
    assert first.detected and {first.a.name, first.b.name} == {"epsilon", "m"}
    md = _markdown(real, tmp_path / "real")
    assert "| private_fedlinucb | `epsilon` x `m` |" in md


TWO_PROTOCOLS = """\
name: protocols
seed: 53
repetitions: 3
horizon: 2000
checkpoints: {log_points: 12}
algorithm: [independent, fedlinucb, private_fedlinucb]
environment: linear_sphere
params: {d: 4, k: 10, delta: 0.1}
grid:
  epsilon: [1, 8]
  m: [2, 4]
  protocol: [ldp, sdp_vecsum]
"""


def _engine(*args: str) -> None:
    exe = Path(os.environ.get("FEDBANDITS_BIN", ROOT / "target" / "release" / "fedbandits"))
    assert exe.exists(), f"{exe} not built: run `cargo build --release` (.ci/run does) or set FEDBANDITS_BIN"
    subprocess.run([str(exe), *args], check=True, capture_output=True)


def test_a_study_with_two_protocols_shows_both_in_every_figure(tmp_path: Path, monkeypatch) -> None:
    job = tmp_path / "protocols.yaml"
    job.write_text(TWO_PROTOCOLS)
    _engine("run", str(job), "--out", str(tmp_path), "--quiet")
    drawn: dict[str, list[str]] = {}
    save = report_plots.save

    def recording(fig, out):
        drawn[Path(out).name] = [t for ax in fig.axes for t in ax.get_legend_handles_labels()[1]]
        return save(fig, out)

    monkeypatch.setattr(report_plots, "save", recording)
    md = rep.report(tmp_path / "protocols", tmp_path / "out").read_text()
    protocols = ("protocol=ldp", "protocol=sdp_vecsum")
    comparing = [n for n in drawn if re.search(r"_(effect|frr|matched|privacy_cost|communication)", n)]
    assert len(comparing) >= 6, sorted(drawn)
    for name in comparing:
        labels = " | ".join(drawn[name])
        assert all(p in labels for p in protocols), (name, labels)
    # each protocol's own curves, and the privacy table's rows
    assert all(any(p.replace("=", "_") in n and "_curves_" in n for n in drawn) for p in protocols)
    privacy = md[md.index("## Privacy") : md.index("\n## ", md.index("## Privacy") + 1)]
    assert all(f"| private_fedlinucb ({p}) |" in privacy for p in protocols)


LATE = """\
name: late
seed: 7
repetitions: 3
horizon: 100000
checkpoints: {log_points: 40}
algorithm: [feducb_centralized, fedlinucb]
environment: linear_sphere
params: {d: 4, k: 10, delta: 0.1, m: 10}
grid:
  epsilon: [0.5, 8]
"""


def test_the_linear_stretch_is_the_engines_and_a_late_learner_is_warned(tmp_path: Path) -> None:
    """Private FedUCB's first sync comes late: its regret grows linearly for
    two decades and more, which the
    report's stall check (phases.py) and
    the engine's run summary (algo::curve::linear_stretch) both find, at the
    same checkpoints; FedLinUCB, syncing every 25 rounds, has no long one."""
    from fedbandits_analysis.effects import load_studies
    from fedbandits_analysis.phases import linear_phases

    job = tmp_path / "late.yaml"
    job.write_text(LATE)
    exe = Path(os.environ.get("FEDBANDITS_BIN", ROOT / "target" / "release" / "fedbandits"))
    out = subprocess.run([str(exe), "run", str(job), "--out", str(tmp_path)], check=True, capture_output=True, text=True).stdout
    printed = {int(m[1]): (float(m[2]), float(m[3])) for m in re.finditer(r"^ +(\d+) .*\[linear t = (\d+)-(\d+)\]", out, re.M)}
    (s,) = load_studies(tmp_path / "late")
    phases = linear_phases(s.lf, s.metric).join(s.cells.select("cell_id", "cell_index", "algorithm"), on="cell_id")
    long = {r["cell_index"]: (r["t_from"], r["t_to"]) for r in phases.filter(pl.col("long")).iter_rows(named=True)}
    assert long == printed and set(long) == {0, 1}  # the two private FedUCB cells
    assert all(b / a >= 100 for a, b in long.values())
    md = rep.report(tmp_path / "late", tmp_path / "out").read_text()
    assert "Regret grows linearly over half the horizon's decades or more in 2 of 3 cells" in md
    comms = md[md.index("## Communication and baselines") :]
    # FedLinUCB syncs every 25 rounds: its first sync by the checkpoint after t = 25
    fed = comms[comms.index("### fedlinucb") :]
    assert re.search(r"\| - \| 4,000 \| 80,000 \| <= 2\d \|", fed), fed[:400]


def test_break_even_epsilon_first_sync_and_clipping_gap() -> None:
    """Planted: a private variant's regret is independent's x (2 / epsilon)
    (ratio 1 at epsilon = 2 exactly, ln-linear in ln epsilon), so the
    break-even epsilon is 2; one that loses at every epsilon is 'beyond the
    grid'; a private cell clipping 25% of its observations against its
    counterpart's 0% is warned."""
    from fedbandits_analysis import report_comms as comms

    rng, inst = _instances(534)
    rows = [{"algorithm": "independent", "cell": {"m": 4}, "value": lambda r: 500.0 * inst[r]}]
    rows.append({"algorithm": "fedlinucb", "cell": {"m": 4}, "value": lambda r: 300.0 * inst[r], "clipped": 0.0})
    for eps in [0.5, 1.0, 4.0, 8.0]:
        for proto, scale in (("ldp", 1.0), ("sdp_vecsum", 100.0)):
            own = np.exp(rng.normal(0.0, 0.02, REPS))
            rows.append(
                {
                    "algorithm": "private_fedlinucb",
                    "cell": {"m": 4, "epsilon": eps, "protocol": proto},
                    "value": lambda r, e=eps, c=scale, o=own: 500.0 * inst[r] * (2.0 / e) * c * o[r],
                    "clipped": 0.25,
                }
            )
    axes = [Axis("epsilon", [0.5, 1.0, 4.0, 8.0], True, False)]
    s = planted.study(rows, axes, ["m", "epsilon", "protocol"], {"private_fedlinucb"}, reps=REPS)
    ratios = comms.pair_ratios(s, comms.baseline_pairs(s))
    found = {r[0]: r[3] for r in comms.break_even(s, ratios)}
    ldp = found["private_fedlinucb (protocol=ldp)"]
    assert float(ldp.split(" ")[0]) == pytest.approx(2.0, rel=0.02), ldp
    assert found["private_fedlinucb (protocol=sdp_vecsum)"].startswith("beyond the grid (> 8)")
    first = comms.first_syncs(s)
    assert {first[c]["first_sync"] for c in s.cells.filter(pl.col("algorithm") == "fedlinucb")["cell_id"].to_list()} == {30.0}
    warned = comms.clipping_warnings(s)
    assert len(warned) == 1 and warned[0].startswith("8 private cell(s) clip a larger share") and "25% (counterpart 0%)" in warned[0]

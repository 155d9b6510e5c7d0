"""The four papers' claims on the bundled `_small` jobs (the CI scale),
each with the verdict it must get (`fedbandits_analysis.claims`), and one
mutation per paper that must change a verdict: a claims test that a broken
engine or a changed job would still pass would pin nothing.

Verdicts are resolved by 95% intervals of differences paired by repetition
(the cells of a job share their random numbers per repetition); the
`_small` jobs' repetitions are what resolves them (Solanki et al.'s raised
to 20 for it).
"""

from __future__ import annotations

import pytest
import yaml
from conftest import SMALL_JOBS, run_job
from fedbandits_analysis.claims import NOT_REPRODUCED, NOT_VISIBLE, REPRODUCED, all_claims, evaluate
from fedbandits_analysis.figures import split_job_name
from fedbandits_analysis.load import scan
from tiny import ROOT

R, N, V = REPRODUCED, NOT_REPRODUCED, NOT_VISIBLE

#: The verdict of every claim on every `_small` job.
EXPECTED = {
    ("dubey_fig1a_small", "1A-eps"): V,
    ("dubey_fig1a_small", "1A-M"): V,
    ("dubey_fig1a_small", "1A-competitive"): V,
    ("dubey_fig1a_small", "onset-sync"): R,
    ("dubey_fig1a_small", "onset-before"): R,
    ("dubey_fig1a_small", "onset-largest"): V,
    ("dubey_fig1a_small", "onset-smallest"): V,
    ("dubey_fig1b_small", "1B-tradeoff"): R,
    ("dubey_fig1b_small", "1B-privacy"): R,
    ("dubey_fig1c_small", "1C-grows"): R,
    ("dubey_fig1c_small", "1C-quadratic"): V,
    ("zhou_fig2a_small", "2a-amp"): N,
    ("zhou_fig2a_small", "2a-flat"): R,
    ("zhou_fig2b_small", "2b-vecsum"): R,
    ("zhou_fig2c_small", "2c-order"): R,
    ("zhu_fig1a_small", "1a-ratios"): R,
    ("zhu_fig1a_small", "1a-eps"): R,
    ("zhu_fig1a_small", "1a-order"): R,
    ("zhu_fig1b_small", "1b-ratios"): R,
    ("zhu_fig1b_small", "1b-eps"): R,
    ("zhu_fig1b_small", "1b-order"): R,
    ("solanki_exp1_small", "EXP1-order"): R,
    ("solanki_exp1_small", "EXP1-fcb"): R,
    ("solanki_exp1_small", "EXP1-excess"): N,
    ("solanki_exp2_small", "EXP2-eps"): R,
    ("solanki_exp3_small", "EXP3-n"): R,
    ("solanki_exp3_small", "EXP3-after"): N,
}


def _claim(figure: str, key: str):
    return next(c for c in all_claims() if c.figure == figure and c.key == key)


def test_every_claim_of_a_small_job_is_pinned():
    figures = {split_job_name(j)[0]: j for j in SMALL_JOBS}
    wanted = {(figures[c.figure], c.key) for c in all_claims() if c.figure in figures}
    assert wanted == set(EXPECTED), f"pin these: {sorted(wanted - set(EXPECTED))}; stale pins: {sorted(set(EXPECTED) - wanted)}"
    # Every paper has claims that are checked, not only "not visible".
    for paper in ("dubey", "zhou", "zhu", "solanki"):
        assert any(v == R for (j, _), v in EXPECTED.items() if j.startswith(paper)), paper


@pytest.mark.parametrize(("job", "key"), sorted(EXPECTED))
def test_claim_verdict_on_small_job(small_results, job, key):
    df = scan(small_results / job).collect()
    out = evaluate(_claim(split_job_name(job)[0], key), df)
    assert out.verdict == EXPECTED[(job, key)], f"{job} {key}: {out.verdict} ({out.ours})"


#: One mutation per paper (a changed job parameter): the job, what changes
#: in its YAML, the claim and the verdict the mutation must give.
MUTATIONS = {
    # Syncing every round puts the first sync at t = 1, not at a fraction of T.
    "dubey": ("dubey_fig1a_small", {"params": {"sync": "every_round"}}, "onset-sync", N),
    # At epsilon 1 and 10 the protocols learn: the curves are not flat.
    "zhou": ("zhou_fig2a_small", {"grid": {"epsilon": [1, 10]}}, "2a-flat", N),
    # A UCB bonus a tenth of the paper's: the oracle loses its lead over
    # Gossip_UCB (both under-explore alike).
    "zhu": ("zhu_fig1a_small", {"params": {"confidence_scale": 0.1}}, "1a-order", N),
    # Without noise P-FCB's epsilon changes only the message window.
    "solanki": ("solanki_exp2_small", {"params": {"noise": False}}, "EXP2-eps", N),
}


def _merged(doc: dict, change: dict) -> dict:
    for k, v in change.items():
        doc[k] = _merged(dict(doc.get(k) or {}), v) if isinstance(v, dict) else v
    return doc


@pytest.mark.parametrize("paper", sorted(MUTATIONS))
def test_a_mutated_job_changes_a_claims_verdict(tmp_path, paper):
    job, change, key, verdict = MUTATIONS[paper]
    assert EXPECTED[(job, key)] != verdict
    doc = _merged(yaml.safe_load((ROOT / "jobs" / f"{job}.yaml").read_text()), change)
    doc["name"] = f"{job}_mutated"
    path = tmp_path / f"{job}_mutated.yaml"
    path.write_text(yaml.safe_dump(doc))
    run_job(path, tmp_path / "out")
    out = evaluate(_claim(split_job_name(job)[0], key), scan(tmp_path / "out" / f"{job}_mutated").collect())
    assert out.verdict == verdict, f"{paper}: {job} with {change}: {key} is {out.verdict} ({out.ours})"

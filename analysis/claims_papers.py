"""The claims of the four papers (and this report's own findings) as
`fedbandits_analysis.claims.Claim`s: Dubey & Pentland Fig. 1A-1C, Zhou &
Chowdhury Fig. 2a-2c, Zhu et al. Fig. 1a/1b, Solanki et al. EXP1-3.

A claim quoted from a paper gives the paper's number where its text states
one (`../shared/seeds/`: Zhu et al.'s "1 : 1/2 : 1/5" at t = 6e5, Solanki
et al.'s 136%, 233%, 235%, 394%); the papers' figures are not readable
there, so a claim read off a figure says "not stated". Each check's
tolerance is in its text.
"""

from __future__ import annotations

import math

import polars as pl

from .claims import (
    LINEAR_GAP_LEVEL,
    NOT_REPRODUCED,
    NOT_VISIBLE,
    REPRODUCED,
    Claim,
    Outcome,
    all_less,
    finals,
    horizon,
    less,
    levels,
    mean_of,
    needs_horizon,
    select,
    within_factor,
)
from .stats import scalar

INF = math.inf


def pairs(xs: list) -> list[tuple]:
    """Neighbouring pairs of a sorted list: [(x0, x1), (x1, x2), ...]."""
    return list(zip(xs, xs[1:], strict=False))


def _window_rate(df: pl.DataFrame, frm: float, **where) -> pl.DataFrame:
    """Per cell and repetition: the regret per round between the checkpoint
    nearest `frm` x T and T."""
    return _window_rate_between(df, frm, 1.0, **where)


# --- Dubey & Pentland --------------------------------------------------------


def _dubey_eps_falls(df: pl.DataFrame) -> Outcome:
    hidden = needs_horizon(df, 10**6, "before its first sync private FedUCB plays at the no-learning level (the onset claim)")
    if hidden:
        return hidden
    f = finals(df)
    parts = []
    for m in levels(f, "m"):
        eps = levels(f, "epsilon", m=m, private=True)
        parts += [less(f, {"m": m, "epsilon": b}, {"m": m, "epsilon": a}, (f"eps {b:g}", f"eps {a:g} (M {m})")) for a, b in pairs(eps)]
    return all_less(parts, "two private epsilons")


def _dubey_m_falls(df: pl.DataFrame) -> Outcome:
    f = finals(df)
    ms = levels(f, "m")
    if len(ms) < 2:
        return Outcome(NOT_VISIBLE, f"the job runs M = {ms} only")
    hidden = needs_horizon(df, 10**6, "private FedUCB has not synced yet, whatever M")
    if hidden:
        return hidden
    parts = [
        less(f, {"m": b, "epsilon": e}, {"m": a, "epsilon": e}, (f"M {b}", f"M {a} (eps {e:g})"))
        for e in levels(f, "epsilon", private=True)
        for a, b in pairs(ms)
    ]
    return all_less(parts, "two values of M")


def _dubey_competitive(df: pl.DataFrame) -> Outcome:
    f = finals(df)
    if _none_private(f):
        return Outcome(NOT_VISIBLE, "the job has no non-private cell")
    e = max(levels(f, "epsilon", private=True))
    ratio = mean_of(f, private=True, epsilon=e) / mean_of(f, private=False)
    verdict = REPRODUCED if ratio <= 2 else NOT_REPRODUCED
    return Outcome(verdict, f"private at eps {e:g} / non-private = {ratio:.4g} (mean final regret per agent)")


def _none_private(f: pl.DataFrame) -> bool:
    return f.filter(~pl.col("private")).height == 0


def _first_syncs(df: pl.DataFrame) -> pl.DataFrame:
    """Per private cell and repetition: the first checkpoint with a sync."""
    synced = df.filter(pl.col("private") & (pl.col("sync_rounds") > 0))
    return synced.group_by(["cell_id", "repetition", "epsilon"]).agg(pl.col("t").min().alias("first"))


def _dubey_sync_late(df: pl.DataFrame) -> Outcome:
    first = _first_syncs(df)
    cells = df.filter(pl.col("private")).select("cell_id", "repetition").unique().height
    frac = scalar((first["first"].cast(pl.Float64) / horizon(df)).min()) if first.height else None
    never = cells - first.height
    ok = frac is None or frac >= 0.05
    text = f"earliest first-sync checkpoint {frac:.3g} T" if frac is not None else "no private cell synced"
    return Outcome(REPRODUCED if ok else NOT_REPRODUCED, f"{text}; {never} of {cells} private repetitions never synced")


def _dubey_before_sync(df: pl.DataFrame) -> Outcome:
    w = _window_rate_between(df, 0.0, 0.05, private=True)
    lo, hi = scalar(w["rate"].min()), scalar(w["rate"].max())
    ok = 0.9 * LINEAR_GAP_LEVEL <= lo and hi <= 1.1 * LINEAR_GAP_LEVEL
    return Outcome(
        REPRODUCED if ok else NOT_REPRODUCED, f"regret per round over [0, 0.05 T], every private cell and repetition: {lo:.4g} to {hi:.4g}"
    )


def _window_rate_between(df: pl.DataFrame, frm: float, to: float, **where) -> pl.DataFrame:
    """Per cell and repetition: the regret per round between the checkpoints
    nearest `frm` x T (0: round 0) and `to` x T."""
    ts = sorted(set(df["t"].to_list()))
    t_hi = min(ts, key=lambda t: abs(t - to * horizon(df)))
    sel = select(df, **where)
    hi = sel.filter(pl.col("t") == t_hi)
    if frm <= 0:
        return hi.with_columns((pl.col("agent_regret") / t_hi).alias("rate"))
    t_lo = min(ts, key=lambda t: abs(t - frm * horizon(df)))
    lo = sel.filter(pl.col("t") == t_lo).select(["cell_id", "repetition", pl.col("agent_regret").alias("lo")])
    return hi.join(lo, on=["cell_id", "repetition"]).with_columns(((pl.col("agent_regret") - pl.col("lo")) / (t_hi - t_lo)).alias("rate"))


def _dubey_onset(df: pl.DataFrame, largest: bool) -> Outcome:
    hidden = needs_horizon(df, 10**6, "before its first sync (0.1-0.5 T) no private cell learns")
    if hidden:
        return hidden
    eps = levels(df, "epsilon", private=True)
    e = eps[-1] if largest else eps[0]
    w = _window_rate(df, 0.3, private=True, epsilon=e)
    if largest:
        rate = scalar(w["rate"].max())
        ok, word = rate < 0.5 * LINEAR_GAP_LEVEL, "at most"
    else:
        rate = scalar(w["rate"].min())
        ok, word = rate >= 0.9 * LINEAR_GAP_LEVEL, "at least"
    return Outcome(
        REPRODUCED if ok else NOT_REPRODUCED, f"eps {e:g}: regret per round over [0.3 T, T] {word} {rate:.4g} (every repetition)"
    )


def _onset_claims(fig: str) -> list[Claim]:
    return [
        Claim(
            fig,
            "onset-sync",
            "private FedUCB's first sync comes at a fraction of the horizon, not after a fixed number of rounds: in every "
            "private cell and repetition at or after the checkpoint nearest 0.05 T",
            "ours",
            "not stated",
            _dubey_sync_late,
        ),
        Claim(
            fig,
            "onset-before",
            "before it (over [0, 0.05 T]) no private cell learns: regret per round within 10% of the no-learning level 0.2",
            "ours",
            "not stated",
            _dubey_before_sync,
        ),
        Claim(
            fig,
            "onset-largest",
            "from T = 1e6 private FedUCB at the largest epsilon has learned: regret per round over [0.3 T, T] below half the "
            "no-learning level 0.2",
            "ours",
            "not stated",
            lambda df: _dubey_onset(df, True),
        ),
        Claim(
            fig,
            "onset-smallest",
            "at the smallest epsilon (0.1) it has not learned even at T = 1e7: regret per round over [0.3 T, T] at least 0.9x "
            "the no-learning level",
            "ours",
            "not stated",
            lambda df: _dubey_onset(df, False),
        ),
    ]


def _dubey_tradeoff(df: pl.DataFrame) -> Outcome:
    f = finals(df)
    order = ["every_round", "sqrt_m", "log"]
    parts = [less(f, {"private": False, "sync": a}, {"private": False, "sync": b}, (a, b)) for a, b in pairs(order)]
    return all_less(parts, "non-private cell of every sync regime")


def _dubey_privacy_costs(df: pl.DataFrame) -> Outcome:
    f = finals(df)
    parts = [
        less(f, {"private": False, "sync": s}, {"private": True, "sync": s}, (f"non-private {s}", "private")) for s in levels(f, "sync")
    ]
    return all_less(parts, "private and non-private cell")


def _dubey_d_grows(df: pl.DataFrame) -> Outcome:
    f = finals(df)
    ds = levels(f, "d")
    parts = [less(f, {"d": ds[0]}, {"d": d}, (f"d {ds[0]}", f"d {d}")) for d in ds[1:]]
    return all_less(parts, "two values of d")


def _dubey_quadratic(df: pl.DataFrame) -> Outcome:
    hidden = needs_horizon(df, 10**6, "private FedUCB has not synced yet: regret is the no-learning level whatever d")
    if hidden:
        return hidden
    f = finals(df)
    ds = levels(f, "d")
    slope = math.log(mean_of(f, d=ds[-1]) / mean_of(f, d=ds[0])) / math.log(ds[-1] / ds[0])
    verdict = REPRODUCED if slope >= 1.5 else NOT_REPRODUCED
    return Outcome(verdict, f"log-log slope of mean final regret against d from {ds[0]} to {ds[-1]}: {slope:.3g}")


DUBEY = [
    Claim(
        "dubey_fig1a",
        "1A-eps",
        "per-agent regret falls as epsilon grows, at every M (paired, every pair of neighbouring epsilons resolved)",
        "paper",
        "not stated",
        _dubey_eps_falls,
    ),
    Claim(
        "dubey_fig1a", "1A-M", "per-agent regret is lower for larger M, at every epsilon (paired)", "paper", "not stated", _dubey_m_falls
    ),
    Claim(
        "dubey_fig1a",
        "1A-competitive",
        '"competitive even at large privacy budget": private regret at the largest epsilon within 2x the non-private (our reading)',
        "paper",
        "not stated",
        _dubey_competitive,
    ),
    Claim(
        "dubey_fig1b",
        "1B-tradeoff",
        "without privacy, more communication gives less regret: every_round < sqrt_m < log (paired; Remark 1's trade-off)",
        "paper",
        "not stated",
        _dubey_tradeoff,
    ),
    Claim("dubey_fig1b", "1B-privacy", "privacy costs regret in every sync regime (paired)", "paper", "not stated", _dubey_privacy_costs),
    Claim(
        "dubey_fig1c",
        "1C-grows",
        "per-agent regret grows with d (paired, the smallest d against each larger)",
        "paper",
        "not stated",
        _dubey_d_grows,
    ),
    Claim(
        "dubey_fig1c",
        "1C-quadratic",
        '"essentially a quadratic dependence" on d: log-log slope of mean final regret against d at least 1.5',
        "paper",
        "not stated",
        _dubey_quadratic,
    ),
    *_onset_claims("dubey_fig1a"),
    *_onset_claims("dubey_onset"),
]


# --- Zhou & Chowdhury --------------------------------------------------------


def _zhou_amp_below(df: pl.DataFrame) -> Outcome:
    f = finals(df)
    parts = [
        less(f, {"protocol": "sdp_amp", "epsilon": e}, {"protocol": "ldp", "epsilon": e}, ("sdp_amp", f"ldp (eps {e:g})"))
        for e in levels(f, "epsilon")
    ]
    return all_less(parts, "sdp_amp and ldp cell")


def _zhou_none_learns(df: pl.DataFrame) -> Outcome:
    w = _window_rate(df, 0.5)
    early = _window_rate(df, 0.1)
    drop = scalar(w["rate"].mean()) / scalar(early["rate"].mean())
    verdict = REPRODUCED if drop >= 0.9 else NOT_REPRODUCED
    return Outcome(verdict, f"regret per round over [T/2, T] / over [T/10, T], mean of every cell: {drop:.4g}")


def _zhou_vecsum_below(df: pl.DataFrame) -> Outcome:
    f = finals(df)
    return all_less([less(f, {"protocol": "sdp_vecsum"}, {"protocol": "ldp"}, ("sdp_vecsum", "ldp"))], "sdp_vecsum and ldp cell")


def _zhou_eps_order(df: pl.DataFrame) -> Outcome:
    f = finals(df)
    eps = levels(f, "epsilon", algorithm="private_fedlinucb")
    parts = [
        less(f, {"algorithm": "fedlinucb"}, {"algorithm": "private_fedlinucb", "epsilon": eps[-1]}, ("non-private", f"ldp eps {eps[-1]:g}"))
    ]
    parts += [
        less(
            f,
            {"algorithm": "private_fedlinucb", "epsilon": b},
            {"algorithm": "private_fedlinucb", "epsilon": a},
            (f"eps {b:g}", f"eps {a:g}"),
        )
        for a, b in pairs(eps)
    ]
    return all_less(parts, "non-private and private cell")


ZHOU = [
    Claim("zhou_fig2a", "2a-amp", "sdp_amp's regret below ldp's at each epsilon (paired)", "paper", "not stated", _zhou_amp_below),
    Claim(
        "zhou_fig2a",
        "2a-flat",
        "at epsilon 1e-4 and 1e-3 neither protocol learns by T: regret per round over [T/2, T] at least 0.9x that over [T/10, T]",
        "ours",
        "not stated",
        _zhou_none_learns,
    ),
    Claim("zhou_fig2b", "2b-vecsum", "sdp_vecsum's regret below ldp's (paired)", "paper", "not stated", _zhou_vecsum_below),
    Claim(
        "zhou_fig2c",
        "2c-order",
        "non-private lowest, and regret grows as epsilon falls (paired)",
        "paper",
        "not stated",
        _zhou_eps_order,
    ),
]


# --- Zhu et al. ---------------------------------------------------------------

#: Zhu et al.: "the ratios of regret with epsilon in {1, 2, 5} are
#: approximately 1 : 1/2 : 1/5" at t = 6e5.
ZHU_RATIOS = {2.0: 0.5, 5.0: 0.2}
ZHU_T = 600_000


def _zhu_ratios(df: pl.DataFrame) -> Outcome:
    ts = sorted(set(df["t"].to_list()))
    t = min(ts, key=lambda x: abs(x - min(ZHU_T, horizon(df))))
    at = df.filter(pl.col("t") == t)
    base = mean_of(at, algorithm="fed_ucb_gossip", epsilon=INF)
    sel: dict[str, object] = {"algorithm": "fed_ucb_gossip", "c_priv": 0.05, "clip": False}
    part = {e: mean_of(at, "agent_regret", epsilon=e, **sel) - base for e in (1.0, *ZHU_RATIOS)}
    if any(math.isnan(v) for v in part.values()):
        return Outcome(NOT_VISIBLE, "the job has no c_priv 0.05, clip false cells at epsilon 1, 2, 5")
    ratios = {e: part[e] / part[1.0] for e in ZHU_RATIOS}
    ok = all(within_factor(ratios[e], r, 1.5) for e, r in ZHU_RATIOS.items())
    text = f"t = {t:.3g}: 1 : {ratios[2.0]:.3g} : {ratios[5.0]:.3g} (private parts {part[1.0]:.4g}, {part[2.0]:.4g}, {part[5.0]:.4g})"
    return Outcome(REPRODUCED if ok else NOT_REPRODUCED, text)


def _zhu_order(df: pl.DataFrame) -> Outcome:
    f = finals(df)
    parts = [
        less(f, {"algorithm": "oracle_ucb"}, {"algorithm": "fed_ucb_gossip", "epsilon": INF}, ("oracle_ucb", "Gossip_UCB")),
        less(f, {"algorithm": "fed_ucb_gossip", "epsilon": INF}, {"algorithm": "local_ucb"}, ("Gossip_UCB", "local_ucb")),
    ]
    return all_less(parts, "oracle_ucb, Gossip_UCB and local_ucb cell")


def _zhu_eps_falls(df: pl.DataFrame) -> Outcome:
    f = finals(df)
    sel = {"algorithm": "fed_ucb_gossip", "c_priv": 0.05, "clip": False}
    eps = [1.0, 2.0, 5.0]
    parts = [less(f, {**sel, "epsilon": b}, {**sel, "epsilon": a}, (f"eps {b:g}", f"eps {a:g}")) for a, b in pairs(eps)]
    parts.append(less(f, {"algorithm": "fed_ucb_gossip", "epsilon": INF}, {**sel, "epsilon": 5.0}, ("Gossip_UCB", "eps 5")))
    return all_less(parts, "c_priv 0.05, clip false cell")


def _zhu(fig: str) -> list[Claim]:
    return [
        Claim(
            fig,
            f"{fig[-2:]}-ratios",
            '"the ratios of regret with epsilon in {1, 2, 5} are approximately 1 : 1/2 : 1/5" at t = 6e5: the private part '
            "(regret minus Gossip_UCB's) at c_priv 0.05 without clipping, at the checkpoint nearest min(6e5, T), each ratio "
            "within x/÷1.5 of the paper's",
            "paper",
            "1 : 0.5 : 0.2",
            _zhu_ratios,
        ),
        Claim(
            fig,
            f"{fig[-2:]}-eps",
            "Fed_UCB's regret falls as epsilon grows, to Gossip_UCB's (paired)",
            "paper",
            "not stated",
            _zhu_eps_falls,
        ),
        Claim(fig, f"{fig[-2:]}-order", "oracle_ucb < Gossip_UCB < local_ucb (paired)", "ours", "not stated", _zhu_order),
    ]


ZHU = [*_zhu("zhu_fig1a"), *_zhu("zhu_fig1b")]


# --- Solanki et al. -------------------------------------------------------------

#: Solanki et al., EXP1: "Compared to FCB, P-FCB (epsilon = 1) and
#: Non-federated incurs 136%, 233% more regret respectively for uniform
#: sampling and 235%, 394% more regret respectively for normal sampling."
SOLANKI_EXCESS = {
    ("uniform", "p_fcb"): 1.36,
    ("uniform", "non_federated"): 2.33,
    ("normal", "p_fcb"): 2.35,
    ("normal", "non_federated"): 3.94,
}


def _solanki_order(df: pl.DataFrame) -> Outcome:
    f = finals(df)
    parts = []
    for kind in levels(f, "instance_kind"):
        parts.append(
            less(f, {"instance_kind": kind, "algorithm": "fcb"}, {"instance_kind": kind, "algorithm": "p_fcb"}, ("fcb", f"p_fcb ({kind})"))
        )
        parts.append(
            less(
                f,
                {"instance_kind": kind, "algorithm": "p_fcb"},
                {"instance_kind": kind, "algorithm": "non_federated"},
                ("p_fcb", f"non_federated ({kind})"),
            )
        )
    return all_less(parts, "instance kind with all three algorithms")


def _solanki_fcb(df: pl.DataFrame) -> Outcome:
    f = finals(df)
    parts = [
        less(
            f, {"instance_kind": k, "algorithm": "fcb"}, {"instance_kind": k, "algorithm": "non_federated"}, ("fcb", f"non_federated ({k})")
        )
        for k in levels(f, "instance_kind")
    ]
    return all_less(parts, "instance kind with fcb and non_federated")


def _solanki_excess(df: pl.DataFrame) -> Outcome:
    f = finals(df)
    texts, ok = [], True
    for (kind, algo), paper in SOLANKI_EXCESS.items():
        fcb = mean_of(f, instance_kind=kind, algorithm="fcb")
        ours = mean_of(f, instance_kind=kind, algorithm=algo) / fcb - 1
        ok &= within_factor(ours, paper, 1.5)
        texts.append(f"{algo} {kind} {100 * ours:+.3g}% (paper +{100 * paper:.0f}%)")
    return Outcome(REPRODUCED if ok else NOT_REPRODUCED, "; ".join(texts))


def _solanki_eps(df: pl.DataFrame) -> Outcome:
    f = finals(df)
    eps = levels(f, "epsilon", algorithm="p_fcb")
    sel = {"algorithm": "p_fcb"}
    return all_less(
        [less(f, {**sel, "epsilon": eps[-1]}, {**sel, "epsilon": eps[0]}, (f"eps {eps[-1]:g}", f"eps {eps[0]:g}"))], "two epsilons"
    )


def _solanki_n(df: pl.DataFrame) -> Outcome:
    f = finals(df)
    ms = levels(f, "m")
    parts = [
        less(f, {"algorithm": "p_fcb", "m": b}, {"algorithm": "p_fcb", "m": a}, (f"n {b}", f"n {a}"), value="agent_regret")
        for a, b in pairs(ms)
    ]
    return all_less(parts, "two values of n")


def _solanki_n_after(df: pl.DataFrame) -> Outcome:
    f = finals(df).with_columns((pl.col("regret_after_exploration") / pl.col("m").cast(pl.Float64)).alias("after"))
    ms = levels(f, "m")
    ends = ((f"n {ms[-1]}", f"n {ms[0]}"),)
    fcb = less(f, {"algorithm": "fcb", "m": ms[-1]}, {"algorithm": "fcb", "m": ms[0]}, *ends, value="after")
    pfcb = less(f, {"algorithm": "p_fcb", "m": ms[-1]}, {"algorithm": "p_fcb", "m": ms[0]}, *ends, value="after")
    if fcb is None or pfcb is None:
        return Outcome(NOT_VISIBLE, "the job has no fcb and p_fcb cells at two values of n")
    ok = fcb.holds is True and pfcb.holds is not True
    return Outcome(REPRODUCED if ok else NOT_REPRODUCED, f"fcb: {fcb}; p_fcb: {pfcb}")


SOLANKI = [
    Claim(
        "solanki_exp1",
        "EXP1-order",
        "total regret per agent: fcb < p_fcb < non_federated on each instance kind (paired; the paper's ordering)",
        "paper",
        "p_fcb +136% / +235%, non_federated +233% / +394% over fcb",
        _solanki_order,
    ),
    Claim(
        "solanki_exp1",
        "EXP1-fcb",
        "total regret per agent: fcb < non_federated on each instance kind (paired)",
        "paper",
        "non_federated +233% / +394% over fcb",
        _solanki_fcb,
    ),
    Claim(
        "solanki_exp1",
        "EXP1-excess",
        "P-FCB's and non_federated's excess regret over FCB within x/÷1.5 of the paper's percentages",
        "paper",
        "+136%, +233% (uniform); +235%, +394% (normal)",
        _solanki_excess,
    ),
    Claim(
        "solanki_exp2",
        "EXP2-eps",
        '"the regret decreases as privacy budget is increased": P-FCB at the largest epsilon below the smallest (paired)',
        "paper",
        "not stated",
        _solanki_eps,
    ),
    Claim(
        "solanki_exp3",
        "EXP3-n",
        '"an approximately linear decrease in per agent regret as the number of learning agents increases": P-FCB\'s total '
        "regret per agent falls at every step of n (paired)",
        "paper",
        "not stated",
        _solanki_n,
    ),
    Claim(
        "solanki_exp3",
        "EXP3-after",
        "after exploration only FCB's regret per agent falls with n: resolved lower at the largest n than at the smallest "
        "for fcb, not for p_fcb (paired)",
        "ours",
        "not stated",
        _solanki_n_after,
    ),
]

# --- Long horizons --------------------------------------------------------------


def _long_reward_on(df: pl.DataFrame, kind: str) -> Outcome:
    f = finals(df)
    if "reward_on" not in f.columns or set(levels(f, "reward_on")) != {"raw", "normalized"}:
        return Outcome(NOT_VISIBLE, "the job does not cross reward_on raw and normalized")
    e = f.filter(pl.col("reward_on") == kind)["regret_exponent"]
    linear = int((e >= 0.9).sum())
    ok = linear > 0 if kind == "raw" else linear == 0
    return Outcome(
        REPRODUCED if ok else NOT_REPRODUCED,
        f"{linear} of {e.len()} {kind} repetitions at regret_exponent >= 0.9 (largest {scalar(e.max()):.3g})",
    )


LONG = [
    Claim(
        "long",
        "raw-stalls",
        "under `reward_on: raw` some repetition stalls: its regret grows linearly over the last decade (regret_exponent >= 0.9)",
        "ours",
        "not stated",
        lambda df: _long_reward_on(df, "raw"),
    ),
    Claim(
        "long",
        "normalized-learns",
        "under `reward_on: normalized` (the default) no repetition does",
        "ours",
        "not stated",
        lambda df: _long_reward_on(df, "normalized"),
    ),
]

CLAIMS = [*DUBEY, *ZHOU, *ZHU, *SOLANKI, *LONG]

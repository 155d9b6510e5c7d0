"""The generated blocks of REPRODUCTION.md, rendered from one job's results
(`job_block`) or from `fedbandits plan` for a job not run here
(`plan_block`). `fedbandits_analysis.reproduction` places them between
their markers and checks them.

A job's block holds, in order: what ran (job file, scale, identity, engine
semantics, repetitions, horizon); one `Run:` line (commit, cost, machine:
what a rerun cannot reproduce, left out of `--check`'s comparison); the
final regret per agent of every cell, with the paper's number where its
text states one; the tables its figure calls for (windows of regret per
round for the Dubey onset, the private part for Zhu et al., the FRR for
Solanki et al., growth exponents for the long runs); the verdict of every
claim of its figure (`fedbandits_analysis.claims`); and the provenance of
the committed figures drawn from it (their PNG text chunks).
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl

from .claims import all_claims, evaluate, finals
from .figures import PAPER_FIGURES, split_job_name
from .load import federated_regret_ratio, private_regret, swept_columns, window_regret
from .stats import scalar

SCALES = {
    "small": "`_small` (CI scale)",
    "medium": "`_medium` (a workstation)",
    "vm": "`_vm` (what fits the 2-core development VM)",
    "": "full (the paper's)",
}

#: Paper numbers beside a cell, where the paper's text states one: (figure,
#: algorithm, instance_kind) -> the quote. Solanki et al., EXP1.
PAPER_CELLS = {
    ("solanki_exp1", "p_fcb", "uniform"): "+136% over fcb",
    ("solanki_exp1", "non_federated", "uniform"): "+233% over fcb",
    ("solanki_exp1", "p_fcb", "normal"): "+235% over fcb",
    ("solanki_exp1", "non_federated", "normal"): "+394% over fcb",
}


def num(x) -> str:
    """A number as the blocks print it: 4 significant digits, `inf`, `-`."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "-"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return f"{x:.4g}"
    return str(x)


def table(head: list[str], rows: list[list]) -> list[str]:
    """A Markdown table."""
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    out += ["| " + " | ".join(num(v) for v in r) + " |" for r in rows]
    return out


def _cells(df: pl.DataFrame, job_yaml: str | None) -> list[str]:
    cols = swept_columns(df, job_yaml) if job_yaml else swept_columns(df)
    return [c for c in cols if c in df.columns]


def cell_table(df: pl.DataFrame, base: str, cols: list[str]) -> list[str]:
    """Final regret per agent of every cell: mean, sd, n, and the paper's."""
    f = finals(df)
    extra: list[str] = [c for c in ("regret_after_exploration", "sync_rounds", "messages") if _shown(base, c) and c in f.columns]
    extra += [c for c in ("acct_epsilon", "acct_epsilon_sums") if c in f.columns and f[c].is_not_null().any()]
    aggs = [pl.len().alias("n"), pl.col("agent_regret").mean().alias("mean"), pl.col("agent_regret").std().alias("sd")]
    aggs += [
        (pl.col(c).cast(pl.Float64) / (pl.col("m").cast(pl.Float64) if c == "regret_after_exploration" else 1.0)).mean().alias(c)
        for c in extra
    ]
    g = f.group_by(cols, maintain_order=True).agg(aggs).sort(cols, nulls_last=True)
    over = _over_fcb(g) if base == "solanki_exp1" else {}
    head = [*cols, "n", "regret per agent (mean)", "sd", *[_label(c) for c in extra], *(["over fcb"] if over else []), "paper"]
    rows = []
    for r in g.iter_rows(named=True):
        key = (r.get("algorithm"), r.get("instance_kind"))
        paper = PAPER_CELLS.get((base, str(key[0]), str(key[1])), "not stated")
        mine = [over.get(key, "-")] if over else []
        rows.append([*[r[c] for c in cols], r["n"], r["mean"], r["sd"], *[r[c] for c in extra], *mine, paper])
    return table(head, rows)


def _over_fcb(g: pl.DataFrame) -> dict[tuple, str]:
    """Solanki et al.'s measure: each algorithm's excess regret over FCB's
    on the same instance kind."""
    fcb = {r["instance_kind"]: r["mean"] for r in g.iter_rows(named=True) if r["algorithm"] == "fcb"}
    return {
        (r["algorithm"], r["instance_kind"]): f"{100 * (r['mean'] / fcb[r['instance_kind']] - 1):+.3g}%"
        for r in g.iter_rows(named=True)
        if r["algorithm"] != "fcb" and r["instance_kind"] in fcb
    }


def _shown(base: str, column: str) -> bool:
    if column == "regret_after_exploration":
        return base.startswith("solanki") or base == "long"
    return base in ("dubey_fig1b", "dubey_onset", "dubey_fig1a")


def _label(column: str) -> str:
    names = {"regret_after_exploration": "after exploration per agent", "sync_rounds": "syncs", "messages": "messages"}
    return names.get(column, f"`{column}`")


def onset_table(df: pl.DataFrame, cols: list[str]) -> list[str]:
    """Regret per round between checkpoints (Dubey & Pentland's onset), and
    repetition 0's first sync."""
    t = int(scalar(df["horizon"].max()))
    edges = [e for e in (0, 2 * 10**4, 10**5, 3 * 10**5, 10**6, 3 * 10**6, 10**7) if e <= t]
    if edges[-1] != t:
        edges.append(t)
    w = window_regret(df.lazy(), edges, cols)
    spans = sorted({(a, b) for a, b in zip(w["t_from"].to_list(), w["t_to"].to_list(), strict=True)})
    first = _first_sync(df, cols)
    head = [*cols, *[f"{num(float(a))}-{num(float(b))}" for a, b in spans], "first sync (rep 0)", "paper"]
    rows = []
    for key, part in w.group_by(cols, maintain_order=True):
        k = key if isinstance(key, tuple) else (key,)
        by = dict(zip(zip(part["t_from"].to_list(), part["t_to"].to_list(), strict=True), part["mean"].to_list(), strict=True))
        rows.append([*k, *[by.get(s) for s in spans], first.get(tuple(k), "none"), "not stated"])
    rows.sort(key=lambda r: tuple((v is None, str(v)) for v in r[: len(cols)]))
    return ["Regret per round per agent between checkpoints (mean over repetitions):", "", *table(head, rows)]


def _first_sync(df: pl.DataFrame, cols: list[str]) -> dict[tuple, str]:
    out = {}
    rep0 = df.filter(pl.col("repetition") == 0).sort("t")
    for key, part in rep0.group_by(cols, maintain_order=True):
        ts, syncs = part["t"].to_list(), part["sync_rounds"].to_list()
        hit = next((i for i, s in enumerate(syncs) if s and s > 0), None)
        k = key if isinstance(key, tuple) else (key,)
        out[tuple(k)] = "none" if hit is None else f"{num(float(ts[hit - 1]) if hit else 0.0)}-{num(float(ts[hit]))}"
    return out


def zhu_table(df: pl.DataFrame) -> list[str]:
    """Fed_UCB's private part at T per c_priv and clip, with its ratios."""
    p = private_regret(df.lazy())
    paper = {1.0: "1", 2.0: "1/2 (at t = 6e5)", 5.0: "1/5 (at t = 6e5)"}
    rows = [
        [r["c_priv"], r["clip"], r["epsilon"], r["regret"], r["private"], r["ratio"], paper.get(r["epsilon"], "not stated")]
        for r in p.iter_rows(named=True)
    ]
    head = ["c_priv", "clip", "epsilon", "regret per agent at T", "private part", "ratio to epsilon 1", "paper"]
    return ["Fed_UCB's private part at T (its regret minus Gossip_UCB's):", "", *table(head, rows)]


def frr_table(df: pl.DataFrame) -> list[str]:
    """Solanki et al.'s FRR, of total regret and after exploration."""
    tot = federated_regret_ratio(df.lazy())
    after = federated_regret_ratio(df.lazy(), column="regret_after_exploration")
    rows = [
        [a["algorithm"], a["epsilon"], a["frr"], b["frr"], "not stated"]
        for a, b in zip(tot.iter_rows(named=True), after.iter_rows(named=True), strict=True)
    ]
    return [
        "Federated Regret Ratio (mean regret / non_federated's, at T):",
        "",
        *table(["algorithm", "epsilon", "FRR total", "FRR after exploration", "paper"], rows),
    ]


def exponent_table(df: pl.DataFrame, cols: list[str]) -> list[str]:
    """Each repetition's `regret_exponent` per cell."""
    f = finals(df).sort([*cols, "repetition"], nulls_last=True)
    rows = []
    for key, part in f.group_by(cols, maintain_order=True):
        k = key if isinstance(key, tuple) else (key,)
        rows.append([*k, " ".join(num(v) for v in part["regret_exponent"].to_list()), "not stated"])
    return [
        "Growth exponent of each repetition over the last decade (`regret_exponent`; 0.9 or more: growing linearly):",
        "",
        *table([*cols, "regret_exponent", "paper"], rows),
    ]


CLAIMS_HEAD = "Claims (`fedbandits_analysis.claims`):"


def claims_table(df: pl.DataFrame, base: str) -> list[str]:
    """The verdict of every claim of the job's figure."""
    rows = []
    for c in all_claims():
        if c.figure == base:
            o = evaluate(c, df)
            rows.append([c.key, c.text, c.source, c.paper, o.ours, f"**{o.verdict}**"])
    if not rows:
        return []
    return [CLAIMS_HEAD, "", *table(["claim", "checked", "source", "paper", "ours", "verdict"], rows)]


def figure_lines(job: str, figures: Path, meta: dict) -> list[str]:
    """The committed figures drawn from this job, with their provenance."""
    from .figures import read_provenance

    lines = []
    for png in sorted(figures.glob("*.png")):
        prov = read_provenance(png)
        if prov.get("fedbandits.job_name") != job:
            continue
        same = prov.get("fedbandits.job_identity") == meta["identity"] and prov.get("fedbandits.semantics_version") == meta["semantics"]
        lines.append(
            f"- `figures/{png.name}`: semantics {prov.get('fedbandits.semantics_version', '?')}, job identity "
            f"`{prov.get('fedbandits.job_identity', '?')}`, commit {prov.get('fedbandits.git_commit', '?')[:10]}"
            + ("" if same else " (**drawn from other results than this block's**)")
        )
    return ["Figures drawn from these results (PNG text chunks):", "", *lines] if lines else []


def job_block(df: pl.DataFrame, meta: dict, figures: Path, machine: str) -> list[str]:
    """The block of one job's results (module doc)."""
    job = meta["job"]
    base = split_job_name(job)[0]
    cols = _cells(df, meta.get("job_yaml"))
    reps = df["repetition"].n_unique()
    cost = float(finals(df)["wall_seconds"].sum())
    out = [
        f"Job `{meta['path']}`, scale {scale_label(job)}: engine semantics {meta['semantics']}, job identity "
        f"`{meta['identity']}`, {df['cell_id'].n_unique()} cells x {reps} repetitions, T = {num(scalar(df['horizon'].max()))}.",
        "",
        f"Run: commit {meta['commit'][:10]}, {cost:.0f} CPU-s (the repetitions' `wall_seconds` summed), {machine}.",
        "",
        *cell_table(df, base, cols),
        "",
    ]
    extra: list[str] = []
    if base in ("dubey_fig1a", "dubey_onset"):
        extra = onset_table(df, cols)
    elif base in ("zhu_fig1a", "zhu_fig1b"):
        extra = zhu_table(df)
    elif base == "solanki_exp2":
        extra = frr_table(df)
    elif base == "long":
        extra = exponent_table(df, cols)
    for part in (extra, claims_table(df, base), figure_lines(job, figures, meta)):
        if part:
            out += [*part, ""]
    return out[:-1] if out and out[-1] == "" else out


def plan_block(job_path: str, plan_text: str, error: str = "") -> list[str]:
    """The block of a job not run here: `fedbandits plan`'s cost and the
    one-command cluster run (or what `plan` says is missing)."""
    if error:
        return [f"Not run here. `fedbandits plan --tasks 100 {job_path}` says:", "", "```", *error.splitlines(), "```"]
    lines = [ln for ln in plan_text.splitlines() if ln.startswith(("time per task", "slurm request"))]
    return [
        f"Not run here. `fedbandits plan --tasks 100 {job_path}` (the built-in CPU time model):",
        "",
        "```",
        *lines,
        "```",
        "",
        f"On a Slurm cluster, one command: `FEDBANDITS_TASKS=100 slurm/submit.sh {job_path}` (slurm/README.md).",
    ]


def audit_block(df: pl.DataFrame, meta: dict, machine: str) -> list[str]:
    """The block of one `fedbandits audit` table (`_audit/audit.parquet`)."""
    cost = float(df["wall_seconds"].sum())
    labels = _short_labels(df["label"].to_list())
    keys = ["view", "mechanism", "acct_epsilon", "acct_figure", "audit_delta", "trials", "epsilon_lb", "verdict"]
    rows = [[labels[i], *[r[k] for k in keys], "not stated"] for i, r in enumerate(df.iter_rows(named=True))]
    head = ["cell", "view", "mechanism", "acct_epsilon", "figure", "audit delta", "trials", "audit lower bound", "verdict", "paper"]
    return [
        f"Audit of `{meta['path']}` (`fedbandits audit`, {num(float(df['confidence'][0]))} confidence, noise as calibrated): engine "
        f"semantics {meta['semantics']}, job identity `{meta['identity']}`.",
        "",
        f"Run: commit {meta['commit'][:10]}, {cost:.0f} CPU-s (the rows' `wall_seconds` summed), {machine}.",
        "",
        *table(head, rows),
    ]


def _short_labels(labels: list[str]) -> list[str]:
    """Audit cell labels without the `key=value` words every row shares."""
    words = [lb.split() for lb in labels]
    common = set.intersection(*(set(w) for w in words)) if words else set()
    return [" ".join(x for x in w if "=" not in x or x not in common) for w in words]


def scale_label(job: str) -> str:
    """What scale a job name says it is (module doc)."""
    base, scale = split_job_name(job)
    if base not in PAPER_FIGURES:
        return "its own (not a paper figure's)"
    return SCALES.get(scale, "its own (a probe job)")


#: The summary's columns: a job's scale suffix -> its column.
SUMMARY_SCALES = {"small": "`_small`", "medium": "`_medium`", "vm": "`_vm`", "": "full"}


def claims_summary(bs) -> list[str]:
    """Every claim's verdict at every scale, read from the job blocks'
    claims tables (`bs`: the report's blocks), one row per claim."""
    rows: dict[tuple[str, str], dict] = {}
    for b in bs:
        if b.kind != "job":
            continue
        base, scale = split_job_name(b.name)
        col = SUMMARY_SCALES.get(scale, "probe jobs")
        body = b.body[b.body.index(CLAIMS_HEAD) + 4 :] if CLAIMS_HEAD in b.body else []
        for line in body:
            if not line.startswith("| "):
                break
            key, _, source, paper, _, verdict = [c.strip() for c in line.strip("|").split(" | ")]
            row = rows.setdefault((base, key), {"source": source, "paper": paper})
            v = verdict.strip("*")
            row[col] = f"{row[col]}; {v} ({b.name})" if col in row else (f"{v} ({b.name})" if col == "probe jobs" else v)
    cols = [c for c in [*SUMMARY_SCALES.values(), "probe jobs"] if any(c in r for r in rows.values())]
    out = [[f, k, r["source"], r["paper"], *[r.get(c, "-") for c in cols]] for (f, k), r in rows.items()]
    return [
        "Every claim's verdict at every scale (from the blocks below; -: no job of that scale):",
        "",
        *table(["figure", "claim", "source", "paper", *cols], out),
    ]

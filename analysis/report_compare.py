"""The sections of a sensitivity report that answer the study's question
(`fedbandits_analysis.report`): algorithms compared with each other per
stratum (its first section, and `contrasts.csv`), the cost of the algorithm
apart from the cost of privacy, and each family's facts. `compare.py` and
`costs.py` define what is computed; the tables and `contrasts.csv` are
rendered from the same frame."""

from __future__ import annotations

import math
import os
from pathlib import Path

import polars as pl

from . import report_plots as plots
from . import stats
from .compare import fmt_ratio_ci, is_estimate, strata_of, summary
from .contrasts import fmt_value
from .costs import describe_part, shares, split
from .effects import Study, fmt

Block = tuple
#: Contrasts drawn as a forest plot (the first, in the report's order).
MAX_FOREST = 4
#: Contrasts shown with their full table (the rest: their headline).
MAX_TABLES = 12
#: Why each kind of contrast is formed, for its heading.
KINDS = {
    "declared": "declared in the job's `compare:`",
    "baseline": "against the family's baseline (not federating)",
    "algorithms": "two algorithms of one family",
    "variant": "two variants of one algorithm",
}


def _levels(by: dict) -> str:
    """`graph: ring x0.497-x0.951 (x0.74), complete x1-x1.06 (x1.03)`."""
    out = []
    for c, levels in by.items():
        parts = [f"{fmt(v)} {stats.fmt_ratio(lo)}" + (f"-{stats.fmt_ratio(hi)}" if hi != lo else "") for v, lo, hi, _ in levels]
        out.append(f"`{c}`: " + ", ".join(parts))
    return "; ".join(out)


def headline(part: pl.DataFrame, strata: list[str]) -> str:
    """One contrast's sentence: its strata, range, resolved counts and the
    range at each level of each stratum column."""
    h = summary(part, strata)
    if h["min"] is None:
        return f"{h['strata']} strata, no paired repetitions."
    span = stats.fmt_ratio(h["min"]) if h["min"] == h["max"] else f"{stats.fmt_ratio(h['min'])} to {stats.fmt_ratio(h['max'])}"
    rest = h["strata"] - h["lower"] - h["higher"]
    text = (
        f"{h['strata']} strat{'um' if h['strata'] == 1 else 'a'}, {span}; resolved below x1 in {h['lower']}, above x1 in "
        f"{h['higher']}, no resolved difference in {rest}."
    )
    if h["by"]:
        text += " Range at each level: " + _levels(h["by"]) + "."
    return text


def _table(part: pl.DataFrame, strata: list[str]) -> Block:
    rows = [
        [*[fmt_value(r[c]) for c in strata], fmt_ratio_ci(r["ratio"], r["lo"], r["hi"]), str(r["repetitions"] or 0), r["verdict"]]
        for r in part.iter_rows(named=True)
    ]
    return ("table", [*[f"`{c}`" for c in strata], "ratio [95% interval]", "repetitions", "verdict"], rows)


def compare_blocks(s: Study, out: Path, frame: pl.DataFrame) -> list[Block]:
    """The report's first section: every contrast (compare.py), declared
    ones first, each with its headline, its table per stratum and (the
    first few) a forest plot."""
    blocks: list[Block] = [("h2", "The study's question: algorithms compared")]
    if not frame.height:
        return blocks + [("p", "No two algorithms (or variants) of one family share a cell of this job: nothing to compare.")]
    blocks.append(
        (
            "p",
            "Each contrast A / B pairs every cell of A with the cells of B that agree with it on every swept axis both "
            "read (an axis one side does not read, as `graph` for centralized FedUCB, matches any value), and gives the "
            "paired ratio of their final "
            f"{s.regret_word()} per stratum: repetition r of one against repetition r of the other (common random "
            "numbers), never pooled over strata. Below x1: A has the lower regret. "
            + ("The job declares its question (`compare:`): those contrasts come first. " if (frame["kind"] == "declared").any() else "")
            + stats.scale_note(s.scale)
            + " The same rows are in `contrasts.csv`.",
        )
    )
    drawn = 0
    for k, (name, part) in enumerate(frame.group_by("contrast", maintain_order=True)):
        name = name[0]
        kind = part["kind"][0]
        strata = strata_of(part, s)
        blocks += [("h3", f"{name} ({KINDS.get(kind, kind)})"), ("p", headline(part, strata))]
        if k >= MAX_TABLES and kind not in ("declared", "baseline"):
            continue
        blocks.append(_table(part, strata))
        if drawn < MAX_FOREST and part.height > 1:
            file = f"{s.job}_contrast_{drawn + 1}.png"
            plots.forest_plot(part, strata, out / file, f"{s.job}: {name}, paired ratio per stratum")
            blocks.append(("img", file, f"{name} per stratum"))
            drawn += 1
    return blocks


def write_csv(frames: list[pl.DataFrame], out: Path) -> Path:
    """`contrasts.csv` (README): one row per (job, contrast, stratum),
    written atomically."""
    head = ["job", "contrast", "kind", "numerator", "denominator"]
    tail = ["ratio", "lo", "hi", "repetitions", "verdict", "metric", "num_cell", "den_cell"]
    parts = [f for f in frames if f.height]
    path = out / "contrasts.csv"
    if parts:
        table = pl.concat([f.with_columns(pl.all().exclude("job").cast(pl.String, strict=False)) for f in parts], how="diagonal")
        middle = [c for c in table.columns if c not in head and c not in tail]
        table = table.select([*head, *middle, *tail])
    else:
        table = pl.DataFrame(schema={c: pl.String for c in [*head, *tail]})
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        table.write_csv(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def split_blocks(s: Study) -> list[Block]:
    """Each private cell's cost against its non-private sibling, split
    into its noise, the registry's further parts and the rest of the
    algorithm (costs.py), and what each costs over the cells."""
    if not s.privacy.get("cells"):
        return []
    frame, chains = split(s)
    blocks: list[Block] = [("h2", "Cost of the algorithm and cost of privacy")]
    if not chains:
        return []
    labels = {r["cell_id"]: s.label(r) for r in s.final.unique("cell_id", keep="first").iter_rows(named=True)}
    parts = list(dict.fromkeys(frame["part"].to_list())) if frame.height else []
    order = [p for p in parts if p != "total"] + (["total"] if "total" in parts else [])
    got = {(r["cell_id"], r["part"]): r for r in frame.iter_rows(named=True)}
    rows = []
    for ch in chains:
        cid = ch["cell"]["cell_id"]
        row = [
            labels[cid],
            labels[ch["twin"]["cell_id"]] if ch["twin"] else "none",
            labels[ch["sibling"]["cell_id"]] if ch["sibling"] else "none",
        ]
        row += [fmt_ratio_ci(got[(cid, p)]["frr"], got[(cid, p)]["lo"], got[(cid, p)]["hi"]) if (cid, p) in got else "" for p in order]
        rows.append(row)
    blocks.append(
        (
            "p",
            "Each private cell p against its noise-free twin n (the same cell with `noise: false`, which draws no noise "
            "and keeps every other part of the private algorithm; for P-FCB also its cell at `epsilon: .inf`) and its "
            "non-private sibling c (`private: false`, or the algorithm the family registry names: P-FCB -> FCB, "
            "Fed_UCB -> Gossip_UCB): noise = p / n is the cost of privacy proper, the parts after it (the registry's, "
            "one at a time, where the study has their cells) and the rest of the algorithm = n / c its cost of the "
            "algorithm; they multiply to the total p / c. Paired by repetition (compare.py). " + stats.scale_note(s.scale),
        )
    )
    blocks.append(("table", ["private cell", "noise-free twin", "non-private sibling", *order], rows))
    blocks += _split_summary(s, frame, chains, order)
    return blocks


def _split_summary(s: Study, frame: pl.DataFrame, chains: list[dict], order: list[str]) -> list[Block]:
    """The geometric mean of each part over the cells that have it, the
    missing twins and parts, and the acceptance shares with and without
    noise (P-FCB)."""
    out: list[Block] = []
    means = []
    for p in order:
        v = [x for x in frame.filter(pl.col("part") == p)["frr"].to_list() if is_estimate(x) and x > 0]
        if v:
            means.append(describe_part(p, math.exp(sum(math.log(x) for x in v) / len(v))))
    if means:
        out.append(("p", "Geometric mean over the private cells of each part: " + "; ".join(means) + "."))
    no_twin = [s.label(ch["cell"]) for ch in chains if ch["twin"] is None]
    if no_twin:
        out.append(
            (
                "p",
                f"{len(no_twin)} private cell(s) have no noise-free twin, so their cost of privacy cannot be told from "
                "their cost of the algorithm: add `noise: [true, false]` to the grid (it keeps every earlier cell). "
                "E.g. " + "; ".join(no_twin[:3]) + ".",
            )
        )
    missing = sorted({m for ch in chains for m in ch["missing"]})
    if missing:
        out.append(("p", "Parts not priced (their noise-free cells are not in the study): " + "; ".join(missing) + "."))
    ids = [c["cell_id"] for ch in chains for c in (ch["cell"], ch["twin"]) if c]
    share = shares(s, ids)
    pairs = [(ch["cell"], ch["twin"]) for ch in chains if ch["twin"] and ch["cell"]["cell_id"] in share and ch["twin"]["cell_id"] in share]
    if pairs:
        text = "; ".join(
            f"{s.label(p)}: {100 * share[p['cell_id']]:.3g}% with noise, {100 * share[n['cell_id']]:.3g}% without" for p, n in pairs
        )
        out.append(("p", f"Accepted share of the messages (accepted / (accepted + rejected), at t = T): {text}."))
    return out


def facts_blocks(s: Study) -> list[Block]:
    """The families' facts: the combinatorial exploration phase's length
    and cost per cell (`fedbandits.facts`)."""
    facts = _facts(s)
    if not facts or "agent_regret" not in s.final.columns:
        return []
    rows = []
    final = s.final.filter(pl.col("cell_id").is_in(list(facts)))
    if "regret_after_exploration" not in final.columns:
        return []
    cost = (
        final.with_columns(
            explore=pl.col("agent_regret") - pl.col("regret_after_exploration") / pl.col("m").cast(pl.Float64),
            total=pl.col("agent_regret"),
        )
        .group_by("cell_id")
        .agg(pl.col("explore").mean(), pl.col("total").mean(), pl.col("cell_index").first())
        .sort("cell_index")
    )
    for r in cost.iter_rows(named=True):
        f = facts[r["cell_id"]]
        share = r["explore"] / r["total"] if r["total"] else float("nan")
        rows.append([s.label(_cell(s, r["cell_id"])), f"{f['exploration_rounds']:,.0f}", f"{r['explore']:.4g}", f"{100 * share:.3g}%"])
    return [
        ("h2", "Family facts"),
        (
            "p",
            "The combinatorial family's exploration phase: every agent procures from every producer for "
            "ceil(3 ln(nT) / (2 n zeta^2)) rounds whatever the algorithm (the engine's figure, `fedbandits.facts`); its "
            "regret per agent (mean over repetitions) and its share of the total. The report's final value counts the "
            "rounds after it; this phase is why every algorithm's total regret falls with the number of agents n.",
        ),
        ("table", ["cell", "exploration rounds", "exploration regret per agent", "share of total regret"], rows),
    ]


def _facts(s: Study) -> dict:
    import json

    try:
        raw = json.loads(s.meta.get("facts", "{}") or "{}")
    except json.JSONDecodeError:
        return {}
    return {k: v for k, v in raw.items() if isinstance(v, dict) and "exploration_rounds" in v}


def _cell(s: Study, cell_id: str) -> dict:
    return s.final.filter(pl.col("cell_id") == cell_id).row(0, named=True)

"""A private algorithm's cost against its non-private sibling, split
(`fedbandits_analysis.report`'s "Cost of the algorithm and cost of
privacy"): its noise (the cost of privacy proper), each further private
part the family registry names (Fed_UCB's width term and clipping) and the
rest of the algorithm. `compare.py`'s module doc defines the noise-free
twin, the non-private sibling and the parts; the ratios are paired by
repetition on the study's scale (stats.py).
"""

from __future__ import annotations

import math

import polars as pl

from .compare import agree, cell_rows, is_estimate, paired, stratum_columns
from .effects import Study

#: Stratum columns a private cell and its sibling are not matched on: the
#: sibling has no privacy.
UNMATCHED = ("private", "noise", "sampler", "epsilon", "delta", "neighbours", "calibration", "budget", "budget_split", "clip", "c_priv")


def _noisy(study: Study, cells: list[dict]) -> list[dict]:
    """The private cells that draw their noise: listed by the accountant,
    `noise` not false, a finite epsilon."""
    listed = {c["cell_id"] for c in study.privacy.get("cells", [])}
    return [
        c
        for c in cells
        if c["cell_id"] in listed and c.get("noise") is not False and (c.get("epsilon") is None or math.isfinite(c["epsilon"]))
    ]


def _same_but(cells: list[dict], cell: dict, params: list[str], changed: dict) -> dict | None:
    """The cell equal to `cell` on every parameter column but those of
    `changed`, which take its values."""
    for c in cells:
        if c["algorithm"] != cell["algorithm"] or c["environment"] != cell["environment"] or c["cell_id"] == cell["cell_id"]:
            continue
        if all(_equal(c.get(k), v) for k, v in changed.items()) and all(c.get(k) == cell.get(k) for k in params if k not in changed):
            return c
    return None


def _equal(value, wanted) -> bool:
    """A column's value against a registry's word (`0`, `false`)."""
    if isinstance(wanted, str) and not isinstance(value, str):
        if isinstance(value, bool):
            return str(value).lower() == wanted
        try:
            return value is not None and float(value) == float(wanted)
        except ValueError:
            return False
    return value == wanted


def twin(study: Study, cells: list[dict], cell: dict) -> tuple[dict | None, str]:
    """The noise-free twin of a private cell and how it was found."""
    found = _same_but(cells, cell, study.params, {"noise": False})
    if found:
        return found, "noise: false"
    inf = {a for f in study.families.values() for a in f.get("noiseless_at_inf", [])}
    if cell["algorithm"] in inf:
        strata = [k for k in stratum_columns(study) if k not in ("epsilon", "noise")]
        for c in cells:
            if c["algorithm"] == cell["algorithm"] and c.get("epsilon") is not None and math.isinf(c["epsilon"]) and agree(c, cell, strata):
                return c, "epsilon: .inf"
    return None, ""


def sibling(study: Study, cells: list[dict], cell: dict) -> dict | None:
    """The non-private sibling of a private cell (compare.py)."""
    mapping = {a: n for f in study.families.values() for a, n in (f.get("non_private") or {}).items()}
    strata = [k for k in stratum_columns(study) if k not in UNMATCHED]
    listed = {c["cell_id"] for c in study.privacy.get("cells", [])}
    plain = [c for c in cells if c["cell_id"] not in listed and agree(c, cell, strata)]
    same = [c for c in plain if c["algorithm"] == cell["algorithm"] and c.get("private") is False]
    if same:
        return same[0]
    other = mapping.get(cell["algorithm"])
    return next((c for c in plain if c["algorithm"] == other), None)


def chains(study: Study) -> list[dict]:
    """Per private cell with its noise: the cells of its split, as
    (name, numerator cell, denominator cell) steps: `noise`, each part the
    study has, `rest of the algorithm`, and `total` (private / sibling);
    with `twin_how` and the parts not measured (their cells are missing)."""
    cells = cell_rows(study)
    parts = [p for f in study.families.values() for p in f.get("parts", [])]
    out = []
    for p in _noisy(study, cells):
        n, how = twin(study, cells, p)
        sib = sibling(study, cells, p)
        steps, missing = [], []
        if n is not None:
            steps.append(("noise", p, n))
            current = n
            for part in (x for x in parts if x["algorithm"] == p["algorithm"]):
                if _equal(current.get(part["param"]), part["off"]):
                    continue  # already off in this cell: nothing to price
                nxt = _same_but(cells, current, study.params, {part["param"]: part["off"]})
                if nxt is None:
                    missing.append(f"{part['what']} (`{part['param']}: {part['off']}`)")
                    continue
                steps.append((part["what"], current, nxt))
                current = nxt
            if sib is not None:
                steps.append(("rest of the algorithm", current, sib))
        if sib is not None:
            steps.append(("total", p, sib))
        out.append({"cell": p, "twin": n, "twin_how": how, "sibling": sib, "steps": steps, "missing": missing})
    return out


def split(study: Study) -> tuple[pl.DataFrame, list[dict]]:
    """The split of every private cell (`chains`) as rows: cell_id, part,
    numerator and denominator cell ids, ratio, lo, hi, reps; and the
    chains themselves."""
    found = chains(study)
    links: list = []
    meta: list = []
    for ch in found:
        for name, a, b in ch["steps"]:
            links.append((len(meta), a["cell_id"], b["cell_id"]))
            meta.append({"cell_id": ch["cell"]["cell_id"], "part": name, "num_cell": a["cell_id"], "den_cell": b["cell_id"]})
    ratios = paired(study, links)
    frame = pl.DataFrame(meta, schema={"cell_id": pl.String, "part": pl.String, "num_cell": pl.String, "den_cell": pl.String})
    frame = frame.with_row_index("key").with_columns(pl.col("key").cast(pl.Int64)).join(ratios, on="key", how="left").drop("key")
    return frame, found


def shares(study: Study, cell_ids: list[str]) -> dict[str, float]:
    """P-FCB's accepted share of its messages per cell (accepted / (accepted
    + rejected), mean over repetitions at t = T), where the columns exist."""
    if "messages_accepted" not in study.final.columns or "messages_rejected" not in study.final.columns:
        return {}
    acc = pl.col("messages_accepted").cast(pl.Float64)
    total = acc + pl.col("messages_rejected").cast(pl.Float64)
    rows = study.final.filter(pl.col("cell_id").is_in(cell_ids)).group_by("cell_id").agg(share=(acc / total).mean())
    return {r["cell_id"]: r["share"] for r in rows.iter_rows(named=True) if is_estimate(r["share"])}


def describe_part(name: str, ratio) -> str:
    """`noise x1.1` for a headline sentence."""
    return f"{name} x{ratio:.3g}" if is_estimate(ratio) else f"{name} n/a"

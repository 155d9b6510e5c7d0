"""The papers' figures from fedbandits results.

    python -m fedbandits_analysis.figures RESULTS_DIR --out figures/

renders every figure whose data are present: for each job found under
RESULTS_DIR, the figure its name calls for (dubey_fig1a: final regret
against epsilon per M and against M per epsilon; dubey_fig1b: regret curves and communication rounds per
sync regime; dubey_fig1c: regret curves per d and final regret against d; zhou_fig2a/2b/2c:
time-average regret curves per protocol or algorithm; zhu_fig1a/1b:
regret curves and the private regret against epsilon with the paper's
1/epsilon slope; zhu_diabetes: regret curves; solanki_exp1: regret curves
per algorithm and instance kind; solanki_exp2: the Federated Regret Ratio
against epsilon; solanki_exp3: final regret per agent against n; anything
dubey_onset: regret per round between checkpoints, where learning shows;
long_*: every repetition's regret on log-log axes with its
`regret_exponent`; anything else: regret curves per cell). A suffix after the figure's name
(`_small`: the CI's scale, `_medium`: a workstation's, `_vm`: what fits in
an hour or two on the 2-core development VM) selects the same figure and is
named in its title. Curves show the mean over repetitions with a 95% band.
Every figure is 900 x 500 pixels with the legend outside the axes.
"""

from __future__ import annotations

import argparse
import contextvars
import math
import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402

from .load import (  # noqa: E402
    LINEAR_GROWTH_EXPONENT,
    ResultsError,
    federated_regret_ratio,
    per_round_regret,
    private_regret,
    scan,
    summarize,
    time_average_regret,
)
from .stats import scalar  # noqa: E402

WIDTH_PX, HEIGHT_PX, DPI = 900, 500, 100


def _figure(title: str):
    fig, ax = plt.subplots(figsize=(WIDTH_PX / DPI, HEIGHT_PX / DPI), dpi=DPI)
    fig.subplots_adjust(left=0.1, right=0.66, top=0.9, bottom=0.13)
    ax.set_title(title, fontsize=11)
    ax.grid(True, alpha=0.3)
    return fig, ax


#: The provenance `figures_for_job` stamps on every PNG it writes: the
#: results' engine semantics, job name, job identity and commit, as PNG text
#: chunks (`read_provenance` reads them back; REPRODUCTION.md shows them).
_PROVENANCE: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("provenance", default=None)
PROVENANCE_KEYS = ("fedbandits.semantics_version", "fedbandits.job_name", "fedbandits.job_identity", "fedbandits.git_commit")


def provenance(results: str | Path) -> dict[str, dict[str, str]]:
    """Job name -> the provenance of its results (PROVENANCE_KEYS), read
    from the first part of each job found under `results`."""
    import pyarrow.parquet as pq

    from .load import parquet_files

    out: dict[str, dict[str, str]] = {}
    for f in parquet_files(results):
        md = pq.read_metadata(f).metadata or {}
        job = md.get(b"fedbandits.job_name", b"").decode()
        if job and job not in out:
            out[job] = {k: md.get(k.encode(), b"").decode() for k in PROVENANCE_KEYS}
    return out


def read_provenance(png: str | Path) -> dict[str, str]:
    """The text chunks of a PNG `figures` wrote (empty for one without)."""
    from PIL import Image

    with Image.open(png) as im:
        return {k: v for k, v in getattr(im, "text", {}).items() if k.startswith("fedbandits.")}


def _save(fig, out: Path) -> Path:
    """Writes `fig` to `out` through a temporary file renamed into place
    (never a half-written PNG), with the results' provenance."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        fig.savefig(tmp, dpi=DPI, format="png", metadata=dict(_PROVENANCE.get() or {}))
        os.replace(tmp, out)
    except BaseException:
        # A full disk (or an interrupt) leaves no temporary file behind.
        tmp.unlink(missing_ok=True)
        raise
    finally:
        plt.close(fig)
    return out


def _label(row: dict, by: list[str]) -> str:
    parts = []
    for k in by:
        v = row.get(k)
        if v is None:
            continue
        if isinstance(v, float):
            v = f"{v:g}"
        parts.append(v if k == "algorithm" else f"{k}={v}")
    return ", ".join(str(p) for p in parts) or "all"


def _legend(ax) -> None:
    """The legend right of the axes, and the axes widened to the figure's
    right edge less the legend's width (no empty margin); a legend wider
    than 35% of the figure goes below the axes instead, so that long
    labels never squeeze the plot."""
    leg = ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
    fig = ax.figure
    fig.canvas.draw()
    width = leg.get_window_extent().width / fig.bbox.width if leg.get_texts() else 0.0
    if width > 0.35:
        leg.remove()
        labels = ax.get_legend_handles_labels()[1]
        ncol = 1 if max(len(x) for x in labels) > 70 else 2
        rows = math.ceil(len(labels) / ncol)
        fig.set_size_inches(fig.get_size_inches()[0], fig.get_size_inches()[1] + 0.18 * rows)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=ncol, fontsize=7, frameon=False)
        fig.subplots_adjust(right=0.97, bottom=min(0.5, 0.16 + 0.05 * rows))
        return
    left = fig.subplotpars.left
    fig.subplots_adjust(right=max(left + 0.3, 0.98 - width - 0.02 * fig.subplotpars.right))


_DASHES = ["-", "--", ":", "-."]


def _styles(groups: list[dict], by: list[str]) -> list[dict]:
    """Line styles that keep coinciding series visible. With two or more
    grouping keys, the first key picks the line style and width (solid and
    wide underneath, dashed and thin on top) and the others the colour, so
    that, e.g., private and non-private syncing every round, which coincide,
    show as a dashed line over a wide pale one of the same colour."""
    if len(by) < 2:
        return [{"lw": 1.5} for _ in groups]
    first = list(dict.fromkeys(str(g.get(by[0])) for g in groups))
    rest = list(dict.fromkeys(tuple(str(g.get(k)) for k in by[1:]) for g in groups))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    out = []
    for g in groups:
        i = first.index(str(g.get(by[0])))
        j = rest.index(tuple(str(g.get(k)) for k in by[1:]))
        # The wide solid lines underneath are pale so that a dashed line of
        # the same colour on top of them shows.
        out.append(
            {
                "ls": _DASHES[i % len(_DASHES)],
                "lw": max(3.5 - 1.5 * i, 1.5),
                "color": colors[j % len(colors)],
                "alpha": 0.45 if i == 0 else 1.0,
                "zorder": 2 + i,
            }
        )
    return out


def varying(lf: pl.LazyFrame, candidates: list[str] | None = None) -> list[str]:
    """Parameter columns taking more than one (non-null) value across cells."""
    cols = candidates or [
        "algorithm",
        "environment",
        "m",
        "d",
        "k",
        "epsilon",
        "delta",
        "protocol",
        "sync",
        "private",
        "graph",
        "gamma",
        "batch_size",
    ]
    schema = lf.collect_schema()
    cols = [c for c in cols if c in schema]
    cells = lf.select(cols).unique().collect()
    return [c for c in cols if cells[c].drop_nulls().n_unique() > 1]


#: y-axis label of each value `regret_curves` can draw.
CURVE_VALUES = {
    "agent_regret": "cumulative regret per agent",
    "time_avg_regret": "time-average regret per agent (regret / t)",
    "round_regret": "regret per round per agent (between checkpoints)",
}


def regret_curves(lf: pl.LazyFrame, by: list[str], out: Path, title: str, value: str = "agent_regret", logx: bool = True) -> Path:
    """Per-agent regret against t, mean and 95% band: cumulative
    (`agent_regret`), time-average (`time_avg_regret`) or per round between
    checkpoints (`round_regret`)."""
    s = summarize(per_round_regret(time_average_regret(lf)), by, value)
    fig, ax = _figure(title)
    groups = s.select(by).unique(maintain_order=True).to_dicts() if by else [{}]
    for g, style in zip(groups, _styles(groups, by), strict=True):
        part = s
        for k, v in g.items():
            part = part.filter(pl.col(k).is_null() if v is None else pl.col(k) == v)
        t = part["t"].to_numpy()
        (line,) = ax.plot(t, part["mean"].to_numpy(), label=_label(g, by), **style)
        ax.fill_between(t, part["lo"].to_numpy(), part["hi"].to_numpy(), color=line.get_color(), alpha=0.2, lw=0)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel("round t")
    ax.set_ylabel(CURVE_VALUES[value])
    _legend(ax)
    return _save(fig, out)


def growth_curves(lf: pl.LazyFrame, out: Path, title: str) -> Path:
    """Every repetition's per-agent regret against t on log-log axes, one
    colour per cell (its label lists its repetitions' `regret_exponent`),
    repetitions whose exponent is 0.9 or more drawn wide, and a dotted
    line of slope 1 (linear growth) for reference. The regret is the one
    the exponent measures: `regret_after_exploration` where the family
    writes it (combinatorial), else `group_regret`, per agent."""
    after = "regret_after_exploration" in lf.collect_schema().names()
    value = (
        "regret_after_exploration"
        if after and lf.select(pl.col("regret_after_exploration").is_not_null().any()).collect().item()
        else "group_regret"
    )
    by = varying(lf, ["algorithm", "epsilon", "reward_on"]) or ["algorithm"]
    df = (
        lf.with_columns((pl.col(value) / pl.col("m").cast(pl.Float64)).alias("y"))
        .select([*by, "cell_index", "repetition", "t", "y", "regret_exponent", "horizon"])
        .sort(["cell_index", "repetition", "t"])
        .collect()
    )
    fig, ax = _figure(title)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, cell in enumerate(df.partition_by("cell_index", maintain_order=True)):
        color = colors[i % len(colors)]
        exps = cell.filter(pl.col("regret_exponent").is_not_null()).sort("repetition")["regret_exponent"].to_list()
        first = cell.row(0, named=True)
        name = ", ".join(f"{first[k]:g}" if isinstance(first[k], float) else str(first[k]) for k in by if first[k] is not None)
        label = f"{name}: " + " ".join(f"{e:.2f}" for e in exps)
        for j, rep in enumerate(cell.partition_by("repetition", maintain_order=True)):
            rep = rep.filter(pl.col("y") > 0)
            e = rep["regret_exponent"].drop_nulls()
            wide = bool(len(e)) and e[0] >= LINEAR_GROWTH_EXPONENT
            ax.plot(
                rep["t"].to_numpy(), rep["y"].to_numpy(), color=color, lw=2.6 if wide else 1.0, alpha=0.85, label=label if j == 0 else None
            )
    horizon = scalar(df["horizon"].max())
    top = scalar(df["y"].max())
    ax.plot([horizon / 1e3, horizon], [top / 1e3, top], ls=":", color="0.4", lw=1.2, label="slope 1 (linear growth)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("round t")
    ax.set_ylabel("cumulative regret per agent" + (" after exploration" if value != "group_regret" else ""))
    ax.text(0.01, 0.98, "labels: regret_exponent of each repetition; wide: >= 0.9", transform=ax.transAxes, fontsize=7, va="top")
    _legend(ax)
    return _save(fig, out)


def final_vs(lf: pl.LazyFrame, x: str, by: list[str], out: Path, title: str, logx: bool = False) -> Path:
    """Final per-agent regret (t = T) against parameter `x`, one line per `by` group, 95% error bars."""
    final = lf.filter(pl.col("t") == pl.col("horizon"))
    s = summarize(final, [*by, x]).sort([*by, x])
    fig, ax = _figure(title)
    # Cells without `x` (non-private cells have no epsilon) are reference
    # levels: a dashed horizontal line with their 95% band.
    for row in s.filter(pl.col(x).is_null()).iter_rows(named=True):
        line = ax.axhline(row["mean"], ls="--", lw=1, color="0.4", label=f"{_label(row, by) or 'reference'}: no {x}")
        ax.axhspan(row["lo"], row["hi"], color=line.get_color(), alpha=0.15, lw=0)
    s = s.filter(pl.col(x).is_not_null())
    groups = s.select(by).unique(maintain_order=True).to_dicts() if by else [{}]
    for g in groups:
        part = s
        for k, v in g.items():
            part = part.filter(pl.col(k).is_null() if v is None else pl.col(k) == v)
        xs = part[x].to_numpy()
        m = part["mean"].to_numpy()
        ax.errorbar(xs, m, yerr=[m - part["lo"].to_numpy(), part["hi"].to_numpy() - m], marker="o", capsize=3, label=_label(g, by))
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel("final cumulative regret per agent")
    _legend(ax)
    return _save(fig, out)


def communication(lf: pl.LazyFrame, by: list[str], out: Path, title: str) -> Path:
    """Synchronization rounds against t (mean over repetitions)."""
    s = summarize(lf, by, "sync_rounds")
    fig, ax = _figure(title)
    groups = s.select(by).unique(maintain_order=True).to_dicts()
    for g, style in zip(groups, _styles(groups, by), strict=True):
        part = s
        for k, v in g.items():
            part = part.filter(pl.col(k) == v)
        ax.plot(part["t"].to_numpy(), part["mean"].to_numpy(), label=_label(g, by), **style)
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("round t")
    ax.set_ylabel("synchronization rounds so far")
    _legend(ax)
    return _save(fig, out)


def private_ratio(lf: pl.LazyFrame, out: Path, title: str) -> Path:
    """Zhu et al.'s private regret, regret(eps) - regret(inf), against
    epsilon (log-log) per (c_priv, clip), with the paper's 1/epsilon slope
    through each line's first point."""
    df = private_regret(lf)
    fig, ax = _figure(title)
    for g in df.select("c_priv", "clip").unique(maintain_order=True).to_dicts():
        part = df.filter((pl.col("c_priv") == g["c_priv"]) & (pl.col("clip") == g["clip"]))
        eps, val = part["epsilon"].to_numpy(), part["private"].to_numpy()
        (line,) = ax.plot(eps, val, marker="o", label=_label(g, ["c_priv", "clip"]))
        ax.plot(eps, val[0] * eps[0] / eps, ls=":", color=line.get_color(), lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.minorticks_off()
    xs = sorted(df["epsilon"].unique().to_list())
    ax.set_xticks(xs, [f"{v:g}" for v in xs])
    ax.set_xlabel("epsilon")
    ax.set_ylabel("regret(eps) - regret(inf) per agent")
    ax.plot([], [], ls=":", color="gray", label="1/epsilon (paper)")
    _legend(ax)
    return _save(fig, out)


def frr_vs(lf: pl.LazyFrame, x: str, out: Path, title: str, logx: bool = False) -> Path:
    """Federated Regret Ratio (final regret over non_federated's) against `x`."""
    df = federated_regret_ratio(lf, by=(x,) if x != "epsilon" else ())
    fig, ax = _figure(title)
    for algo in df["algorithm"].unique(maintain_order=True).to_list():
        part = df.filter(pl.col("algorithm") == algo).sort(x)
        swept = part.filter(pl.col(x).is_not_null())
        if swept.height:
            ax.plot(swept[x].to_numpy(), swept["frr"].to_numpy(), marker="o", label=algo)
        elif part.height:
            # An algorithm without the parameter (fcb has no epsilon): a level.
            ax.axhline(part["frr"][0], ls="--", lw=1.2, label=f"{algo} (no {x})")
    ax.axhline(1.0, color="gray", ls=":", lw=1, label="non_federated")
    if logx:
        ax.set_xscale("log")
        ax.minorticks_off()
        xs = sorted(df[x].drop_nulls().unique().to_list())
        ax.set_xticks(xs, [f"{v:g}" for v in xs])
    ax.set_xlabel(x)
    ax.set_ylabel("Federated Regret Ratio (regret / non_federated's)")
    _legend(ax)
    return _save(fig, out)


#: The paper figures `figures_for_job` knows, by job-name prefix.
PAPER_FIGURES = (
    "dubey_fig1a",
    "dubey_fig1b",
    "dubey_fig1c",
    "dubey_onset",
    "zhou_fig2a",
    "zhou_fig2b",
    "zhou_fig2c",
    "zhu_fig1a",
    "zhu_fig1b",
    "zhu_diabetes",
    "solanki_exp1",
    "solanki_exp2",
    "solanki_exp3",
    "long",
)


def split_job_name(job: str) -> tuple[str, str]:
    """(paper figure, scale) of a job name: `dubey_fig1a_vm` -> ("dubey_fig1a",
    "vm"), `zhou_fig2b` -> ("zhou_fig2b", ""); a name with no known prefix is
    its own base."""
    for base in PAPER_FIGURES:
        if job == base:
            return base, ""
        if job.startswith(base + "_"):
            return base, job[len(base) + 1 :]
    return job, ""


def figures_for_job(lf: pl.LazyFrame, job: str, out: Path, stamp: dict[str, str] | None = None) -> list[Path]:
    """The figures a job's name calls for (see the module docs), each
    carrying `stamp` (the job's `provenance`) in its PNG text chunks."""
    token = _PROVENANCE.set(stamp or {})
    try:
        return _figures_for_job(lf, job, out)
    finally:
        _PROVENANCE.reset(token)


def _figures_for_job(lf: pl.LazyFrame, job: str, out: Path) -> list[Path]:
    # <paper>_<figure>[_<scale>]: the same figure at the CI (`_small`), a
    # workstation (`_medium`), the development VM (`_vm`) or the paper's
    # scale (no suffix).
    base, scale = split_job_name(job)
    small = f" ({scale})" if scale else ""
    made = []
    if base == "dubey_fig1a":
        made.append(final_vs(lf, "epsilon", ["m"], out / f"{job}.png", f"Dubey & Pentland Fig. 1A{small}: regret vs epsilon", logx=True))
        if "m" in varying(lf, ["m"]):
            made.append(final_vs(lf, "m", ["epsilon"], out / f"{job}_vs_m.png", f"Dubey & Pentland Fig. 1A{small}: regret vs M"))
        made.append(
            regret_curves(
                lf,
                varying(lf, ["m", "private", "epsilon"]),
                out / f"{job}_round.png",
                f"Dubey & Pentland Fig. 1A{small}: regret per round",
                value="round_regret",
            )
        )
    elif base == "dubey_onset":
        made.append(
            regret_curves(
                lf,
                varying(lf, ["m", "private", "epsilon"]),
                out / f"{job}.png",
                f"Dubey & Pentland: learning onset{small}",
                value="round_regret",
            )
        )
    elif base == "dubey_fig1b":
        # The paper's Fig. 1B and 1C: regret curves against T on linear axes.
        made.append(
            regret_curves(lf, ["private", "sync"], out / f"{job}_regret.png", f"Dubey & Pentland Fig. 1B{small}: regret", logx=False)
        )
        made.append(
            communication(lf, ["private", "sync"], out / f"{job}_communication.png", f"Dubey & Pentland Fig. 1B{small}: communication")
        )
    elif base == "dubey_fig1c":
        made.append(regret_curves(lf, ["d"], out / f"{job}.png", f"Dubey & Pentland Fig. 1C{small}: regret per d", logx=False))
        made.append(final_vs(lf, "d", [], out / f"{job}_vs_d.png", f"Dubey & Pentland Fig. 1C{small}: final regret vs d"))
    elif base in ("zhou_fig2a", "zhou_fig2b"):
        # The authors' plot script: time-average regret against the round
        # on linear axes (their band is +-1 standard error; ours 95%).
        by = ["protocol", "epsilon"]
        made.append(
            regret_curves(lf, by, out / f"{job}.png", f"Zhou & Chowdhury Fig. {base[-2:]}{small}", value="time_avg_regret", logx=False)
        )
    elif base == "zhou_fig2c":
        made.append(
            regret_curves(
                lf,
                ["algorithm", "epsilon"],
                out / f"{job}.png",
                f"Zhou & Chowdhury Fig. 2c{small} (synthetic data)",
                value="time_avg_regret",
                logx=False,
            )
        )
    elif base in ("zhu_fig1a", "zhu_fig1b"):
        size = small
        fig = base[-2:]
        # One regret figure per c_priv, in the paper's setting (no clipping),
        # with Gossip_UCB (epsilon = inf) and oracle_ucb: the paper's curves.
        # local_ucb's regret grows linearly (tens of thousands at T = 1e6)
        # and would flatten every other curve; its numbers are in the report.
        # Clipping's effect is in the private-regret figure.
        for c_priv, suffix in ((0.05, ""), (4.0, "_cpriv4")):
            sel = lf.filter(
                (pl.col("algorithm") == "oracle_ucb")
                | ((pl.col("algorithm") == "fed_ucb_gossip") & pl.col("epsilon").is_infinite())
                | ((pl.col("algorithm") == "fed_ucb_gossip") & (pl.col("c_priv") == c_priv) & ~pl.col("clip"))
            )
            made.append(
                regret_curves(
                    sel,
                    ["algorithm", "epsilon"],
                    out / f"{job}{suffix}.png",
                    f"Zhu et al. Fig. {fig}{size}: regret, c_priv = {c_priv:g}, no clipping",
                    logx=False,
                )
            )
        made.append(private_ratio(lf, out / f"{job}_private.png", f"Zhu et al. Fig. {fig}{size}: private regret vs epsilon"))
    elif base == "solanki_exp1":
        # Per instance kind: total regret, and the regret after the
        # exploration phase (which dominates the total and is the same for
        # every algorithm).
        after = lf.with_columns((pl.col("regret_after_exploration") / pl.col("m").cast(pl.Float64)).alias("agent_regret"))
        for kind in ("uniform", "normal"):
            kind_is = pl.col("instance_kind") == kind
            made.append(
                regret_curves(
                    lf.filter(kind_is),
                    ["algorithm"],
                    out / f"{job}_{kind}.png",
                    f"Solanki et al. EXP1{small}: {kind} instances, total regret",
                    logx=False,
                )
            )
            made.append(
                regret_curves(
                    after.filter(kind_is),
                    ["algorithm"],
                    out / f"{job}_{kind}_after.png",
                    f"Solanki et al. EXP1{small}: {kind}, regret after exploration",
                    logx=False,
                )
            )
    elif base == "solanki_exp2":
        made.append(frr_vs(lf, "epsilon", out / f"{job}.png", f"Solanki et al. EXP2{small}: FRR vs epsilon", logx=True))
    elif base == "solanki_exp3":
        made.append(final_vs(lf, "m", ["algorithm"], out / f"{job}.png", f"Solanki et al. EXP3{small}: regret per agent vs n"))
    elif base == "long":
        made.append(growth_curves(lf, out / f"{job}.png", f"Long horizon ({scale}): regret of every repetition, log-log"))
    elif base == "zhu_diabetes":
        made.append(regret_curves(lf, ["algorithm", "epsilon"], out / f"{job}.png", "Zhu et al. Fig. 1c: UCI diabetes", logx=False))
    else:
        made.append(regret_curves(lf, varying(lf) or ["algorithm"], out / f"{job}.png", f"{job}: regret"))
    return made


def main(argv: list[str] | None = None) -> int:
    """The command line (`python -m fedbandits_analysis.figures RESULTS
    --out DIR`): every paper figure the results can draw; 0 on success."""
    p = argparse.ArgumentParser(prog="python -m fedbandits_analysis.figures", description=__doc__.split("\n\n")[0])
    p.add_argument("results", help="results directory (one job's or a root of several)")
    p.add_argument("--out", default="figures", help="where to write the PNG files (default: figures/)")
    a = p.parse_args(argv)
    try:
        lf = scan(a.results)
    except ResultsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = Path(a.out)
    jobs = sorted(lf.select("job").unique().collect()["job"].to_list())
    stamps = provenance(a.results)
    try:
        for job in jobs:
            for path in figures_for_job(lf.filter(pl.col("job") == job), job, out, stamps.get(job)):
                print(path, flush=True)
    except BrokenPipeError:
        pass  # the reader went away (`| head`); the figures are written
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Load a fedbandits results directory as a tidy Polars LazyFrame.

`scan(path)` accepts a job's results directory (`results/<job>/`), a root
holding several jobs (`results/`), or a single Parquet file. It checks the
schema and the engine's semantics version and raises `ResultsError` with a
message saying what is wrong and what to do.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

#: Columns every fedbandits file has, with their Polars types.
REQUIRED = {
    "job": pl.String,
    "cell_id": pl.String,
    "algorithm": pl.String,
    "environment": pl.String,
    "horizon": pl.UInt64,
    "repetition": pl.UInt32,
    "t": pl.UInt64,
    "group_regret": pl.Float64,
    "agent_regret": pl.Float64,
    "agent_regret_max": pl.Float64,
    "sync_rounds": pl.UInt64,
    "messages": pl.UInt64,
    "backend": pl.String,
}

#: Engine semantics versions this loader understands.
SUPPORTED_SEMANTICS = {"1", "2", "3", "4"}


class ResultsError(Exception):
    """A results directory cannot be loaded."""


def parquet_files(path: str | Path) -> list[Path]:
    """The part files (`part-*.parquet`) under `path`, sorted; hidden and
    underscore paths (`.units/`, `_audit/`) are not results."""
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.exists():
        raise ResultsError(f"{p}: no such results directory (run `fedbandits run JOB.yaml` first)")
    files = sorted(
        f
        for f in p.rglob("part-*.parquet")
        if not any(part.startswith((".", "_")) for part in f.relative_to(p).parts)
    )
    if not files:
        raise ResultsError(f"{p}: no Parquet part files found (expected part-*.parquet from `fedbandits run`)")
    return files


#: The metadata key holding the XXH64 of a file's bytes before its footer.
CHECKSUM_KEY = b"fedbandits.data_xxh64"


def data_checksum(f: Path) -> int:
    """XXH64 of a Parquet file's bytes before its footer (what the engine
    writes under `fedbandits.data_xxh64`)."""
    import xxhash

    raw = f.read_bytes()
    if len(raw) < 12 or raw[-4:] != b"PAR1":
        raise ResultsError(f"{f}: not a Parquet file")
    footer = int.from_bytes(raw[-8:-4], "little")
    return xxhash.xxh64(raw[: len(raw) - 8 - footer]).intdigest()


def check_file(f: Path) -> dict[bytes, bytes]:
    """Raises ResultsError if `f` is not a compatible, intact fedbandits
    file; returns its key-value metadata."""
    try:
        md = pq.read_metadata(f).metadata or {}
        schema = pq.read_schema(f)
    except Exception as e:  # pyarrow raises several types for corrupt files
        raise ResultsError(f"{f}: not a readable Parquet file ({e})") from e
    stated = md.get(CHECKSUM_KEY)
    if stated is not None and int(stated.decode(), 16) != data_checksum(f):
        raise ResultsError(
            f"{f}: checksum mismatch (the file is damaged): move it away and rerun the job (only its units are recomputed)"
        )
    version = md.get(b"fedbandits.semantics_version", b"").decode()
    if version not in SUPPORTED_SEMANTICS:
        raise ResultsError(
            f"{f}: written by an incompatible engine (semantics version {version or 'missing'}; "
            f"this loader reads {sorted(SUPPORTED_SEMANTICS)}): rerun the job or update analysis/"
        )
    names = set(schema.names)
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise ResultsError(f"{f}: missing columns {missing}: not a fedbandits results file")
    return md


def check_overlap(files: list[Path], metadata: list[dict[bytes, bytes]]) -> None:
    """Raises ResultsError when two files hold the same (job, cell,
    repetition): part files of two shard layouts (or a copied file) in one
    directory would otherwise be counted twice."""
    owner: dict[tuple[str, str], tuple[Path, str]] = {}
    for f, md in zip(files, metadata):
        job = md.get(b"fedbandits.job_name", b"").decode()
        shard = md.get(b"fedbandits.shard", b"?").decode()
        units = md.get(b"fedbandits.units", b"").decode()
        for unit in filter(None, units.split(",")):
            prev = owner.setdefault((job, unit), (f, shard))
            if prev[0] != f:
                cell, _, rep = unit.partition(":")
                raise ResultsError(
                    f"{prev[0]} (shard {prev[1]}) and {f} (shard {shard}) both hold job {job!r} cell {cell} "
                    f"repetition {rep}: the directory mixes shard layouts or copies; keep one layout's part "
                    f"files (move the others away) and run `fedbandits merge` on the directory"
                )


def check_manifests(files: list[Path]) -> None:
    """Verifies the checksum line of each `_manifest.yaml` beside the files."""
    import xxhash

    for d in sorted({f.parent for f in files}):
        m = d / "_manifest.yaml"
        if not m.exists():
            continue
        text = m.read_text()
        body, sep, last = text.rpartition("checksum_xxh64: ")
        stated = last.strip().strip('"')
        if not sep or f"{xxhash.xxh64(body.encode()).intdigest():016x}" != stated:
            raise ResultsError(f"{m}: checksum mismatch (damaged or edited): rerun `fedbandits merge {d}`")


def scan(path: str | Path) -> pl.LazyFrame:
    """All results under `path` as one LazyFrame (one row per cell, repetition, t).
    Files are checked (checksum, engine version, columns) and refused when
    two of them hold the same repetition."""
    files = parquet_files(path)
    check_overlap(files, [check_file(f) for f in files])
    check_manifests(files)
    lf = pl.scan_parquet([str(f) for f in files])
    schema = lf.collect_schema()
    for col, dtype in REQUIRED.items():
        if schema[col] != dtype:
            raise ResultsError(f"{path}: column {col} has type {schema[col]}, expected {dtype}")
    return lf


def families(path: str | Path) -> dict[str, dict[str, list[str]]]:
    """The engine's family registry, as written into the results' metadata:
    {family: {"algorithms": [...], "environments": [...], "columns": [...]}},
    where "columns" are the output columns only that family fills."""
    import json

    merged: dict[str, dict[str, list[str]]] = {}
    for f in parquet_files(path):
        md = pq.read_metadata(f).metadata or {}
        raw = md.get(b"fedbandits.families")
        if raw is None:
            raise ResultsError(f"{f}: no family registry in the metadata (written by an engine before semantics 3)")
        merged.update(json.loads(raw.decode()))
    return merged


def scan_family(path: str | Path, family: str) -> pl.LazyFrame:
    """The rows of one family's algorithms, without the columns only other
    families fill."""
    reg = families(path)
    if family not in reg:
        raise ResultsError(f"{path}: unknown family {family!r}; the results' engine knows {sorted(reg)}")
    others = {c for name, f in reg.items() if name != family for c in f["columns"]} - set(reg[family]["columns"])
    lf = scan(path).filter(pl.col("algorithm").is_in(reg[family]["algorithms"]))
    return lf.drop([c for c in lf.collect_schema().names() if c in others])


def private_regret(lf: pl.LazyFrame, by: tuple[str, ...] = ("c_priv", "clip")) -> pl.DataFrame:
    """The private part of Fed_UCB's regret (Zhu et al.): for each setting of
    `by` and finite epsilon, mean final per-agent regret of `fed_ucb_gossip`
    minus that at epsilon = inf (Gossip_UCB, whose `by` columns are null),
    and its ratio to the value at the smallest epsilon (the paper: close to
    1 : 1/2 : 1/5 for epsilon 1, 2, 5). Columns: by..., epsilon, regret,
    private, ratio."""
    final = lf.filter((pl.col("algorithm") == "fed_ucb_gossip") & (pl.col("t") == pl.col("horizon")))
    means = final.group_by([*by, "epsilon"]).agg(regret=pl.col("agent_regret").mean()).collect()
    inf = means.filter(pl.col("epsilon").is_infinite())
    if inf.height != 1:
        raise ResultsError("private_regret needs exactly one fed_ucb_gossip cell with epsilon = .inf")
    base = inf["regret"][0]
    private = means.filter(pl.col("epsilon").is_finite()).with_columns(private=pl.col("regret") - base)
    return private.sort([*by, "epsilon"]).with_columns(
        ratio=pl.col("private") / pl.col("private").first().over(list(by))
    )


def federated_regret_ratio(
    lf: pl.LazyFrame, by: tuple[str, ...] = (), baseline: str = "non_federated", column: str = "agent_regret"
) -> pl.DataFrame:
    """Solanki et al.'s Federated Regret Ratio: each algorithm's mean final
    `column` (per-agent regret, or `regret_after_exploration`) divided by the
    baseline's (`non_federated`) in the same `by` group (e.g. instance_kind,
    m); the baseline's own cells are dropped unless `by` separates them.
    Columns: by..., algorithm, epsilon, regret, baseline, frr."""
    final = lf.filter(pl.col("t") == pl.col("horizon"))
    means = final.group_by([*by, "algorithm", "epsilon"]).agg(regret=pl.col(column).mean()).collect()
    base = means.filter(pl.col("algorithm") == baseline).select([*by, pl.col("regret").alias("baseline")])
    if base.height == 0:
        raise ResultsError(f"federated_regret_ratio needs {baseline} cells beside the federated ones")
    joined = means.filter(pl.col("algorithm") != baseline)
    joined = joined.join(base, on=list(by), how="left") if by else joined.join(base, how="cross")
    return joined.with_columns(frr=pl.col("regret") / pl.col("baseline")).sort([*by, "algorithm", "epsilon"])


def time_average_regret(lf: pl.LazyFrame, column: str = "agent_regret") -> pl.LazyFrame:
    """Adds `time_avg_regret` = `column` / t: the time-average regret (Zhou &
    Chowdhury's metric: cumulative per-agent regret divided by the rounds
    played), which tends to 0 for a learner and to the per-round gap of a
    policy that does not learn."""
    return lf.with_columns((pl.col(column) / pl.col("t").cast(pl.Float64)).alias("time_avg_regret"))


def per_round_regret(lf: pl.LazyFrame, column: str = "agent_regret") -> pl.LazyFrame:
    """Adds `round_regret`: the regret per round over each window between
    consecutive checkpoints of a repetition, (`column`(t) - `column`(t')) /
    (t - t'), and `column` / t for the first checkpoint. A policy that does
    not learn keeps it at its per-round gap; learning shows as the curve
    falling below that level (Dubey & Pentland's learning onset, issue 15)."""
    keys = ["job", "cell_id", "repetition"]
    t = pl.col("t").cast(pl.Float64)
    window = pl.col(column).diff().over(keys) / t.diff().over(keys)
    return lf.sort([*keys, "t"]).with_columns(window.fill_null(pl.col(column) / t).alias("round_regret"))


def window_regret(lf: pl.LazyFrame, edges: list[int], by: list[str], column: str = "agent_regret") -> pl.DataFrame:
    """Regret per round over windows of the horizon: for consecutive `edges`
    (rounds, e.g. [0, 10**5, 10**6]) the increase of `column` between the
    checkpoints nearest to each edge divided by the rounds between them, per
    repetition, then the mean and sd over repetitions per `by` group.
    Columns: by..., t_from, t_to, n, mean, sd (the window's actual
    checkpoints, t_from = 0 for an edge of 0)."""
    df = lf.select(list(dict.fromkeys([*by, "job", "cell_id", "repetition", "t", column]))).collect()
    ts = sorted(set(df["t"].to_list()))
    if not ts:
        raise ResultsError("window_regret: no rows")

    def nearest(e: int) -> int:
        return 0 if e <= 0 else min(ts, key=lambda t: abs(t - e))

    rows = []
    for a, b in zip(edges, edges[1:]):
        ta, tb = nearest(a), nearest(b)
        if tb <= ta:
            raise ResultsError(f"window_regret: edges {a} and {b} map to the same checkpoint {tb}")
        lo = df.filter(pl.col("t") == ta).select(["job", "cell_id", "repetition", pl.col(column).alias("lo")]) if ta else None
        hi = df.filter(pl.col("t") == tb)
        w = hi.join(lo, on=["job", "cell_id", "repetition"]) if lo is not None else hi.with_columns(lo=pl.lit(0.0))
        w = w.with_columns(((pl.col(column) - pl.col("lo")) / float(tb - ta)).alias("w"))
        g = w.group_by(by).agg(pl.len().alias("n"), pl.col("w").mean().alias("mean"), pl.col("w").std().alias("sd"))
        rows.append(g.with_columns(t_from=pl.lit(ta, pl.UInt64), t_to=pl.lit(tb, pl.UInt64)))
    out = pl.concat(rows)
    return out.select([*by, "t_from", "t_to", "n", "mean", "sd"]).sort([*by, "t_from"])


def to_pandas(path: str | Path):
    """The same data as a pandas DataFrame (needs pandas installed), with
    pandas' nullable types as `pd.read_parquet(..., dtype_backend=
    "numpy_nullable")` gives them: a parameter that is null for some cells
    stays Int64 / boolean instead of becoming float64 / object."""
    import pandas as pd
    import pyarrow as pa

    mapping = {
        pa.bool_(): pd.BooleanDtype(),
        pa.float32(): pd.Float32Dtype(),
        pa.float64(): pd.Float64Dtype(),
        pa.string(): pd.StringDtype(),
        pa.large_string(): pd.StringDtype(),
    }
    if hasattr(pa, "string_view"):  # pyarrow >= 16; polars may export it
        mapping[pa.string_view()] = pd.StringDtype()
    for bits in (8, 16, 32, 64):
        mapping[getattr(pa, f"int{bits}")()] = pd.api.types.pandas_dtype(f"Int{bits}")
        mapping[getattr(pa, f"uint{bits}")()] = pd.api.types.pandas_dtype(f"UInt{bits}")
    return scan(path).collect().to_arrow().to_pandas(types_mapper=mapping.get)


def summarize(lf: pl.LazyFrame, by: list[str], value: str = "agent_regret") -> pl.DataFrame:
    """Mean over repetitions of `value` per (by..., t) with a 95% normal band
    (mean +- 1.96 sd / sqrt(n)); columns: by..., t, n, mean, sd, lo, hi."""
    out = (
        lf.group_by([*by, "t"])
        .agg(pl.len().alias("n"), pl.col(value).mean().alias("mean"), pl.col(value).std().alias("sd"))
        .with_columns(pl.col("sd").fill_null(0.0))
        .with_columns(
            (pl.col("mean") - 1.96 * pl.col("sd") / pl.col("n").sqrt()).alias("lo"),
            (pl.col("mean") + 1.96 * pl.col("sd") / pl.col("n").sqrt()).alias("hi"),
        )
        .sort([*by, "t"])
    )
    return out.collect()

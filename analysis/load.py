"""Load a fedbandits results directory as a tidy Polars LazyFrame.

`scan(path)` accepts a job's results directory (`results/<job>/`), a root
holding several jobs (`results/`), or a single Parquet file. It trusts a
directory only as far as it can check it (`checked_files`), and raises
`ResultsError` with a message saying what is wrong and the command that
fixes it:
- every file: readable, its data checksum, the engine's semantics version,
  the required columns;
- every job directory: one job identity throughout (no two versions of a
  job mixed), the job name of every part equal to the directory's name, no
  repetition in two parts;
- completeness: the parts present are exactly those `_manifest.yaml` lists
  (when `fedbandits merge` wrote one), and it says `complete: true`; without
  a manifest, a complete set of one shard layout (`part-00000-of-N` to
  `part-(N-1)-of-N`); a single file given by path must be a whole run
  (`-of-00001`).

`unchecked_footers=True` (`scan`, `checked_files`, `to_pandas`) also reads
files of semantics 17 without a footer checksum (written by the first
engines of that semantics), with a warning naming each; without it they
are refused, since a damaged footer can lose its checksum entry.

`allow_partial=True` (every entry point takes it) reads an incomplete run
on purpose: the completeness checks are skipped, the others kept, and the
frame gets a Boolean column `results_complete`, false on the rows of every
job directory (or file) that failed a completeness check.
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from .stats import scalar

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
SUPPORTED_SEMANTICS = {"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "17", "18", "19", "20", "21"}

#: Columns an engine added since semantics 9, with their types, the
#: column they follow and the semantics that added them: `scan` gives each
#: file of an older engine each as nulls, in the engine's order
#: (`regret_exponents` computes the exponent from any file's curves). A
#: newer file lacks a column only where its families do not fill it (a
#: job's files carry their own families' columns): that stays absent from
#: the file and null in the union.
ADDED_COLUMNS = {
    "regret_exponent": (pl.Float64, "agent_regret_max", 10),
    "acct_mu": (pl.Float64, "acct_epsilon", 11),
    "acct_epsilon_sums": (pl.Float64, "acct_epsilon_pure", 11),
    "estimate_error": (pl.Float64, "consensus_error", 16),
    "acct_sensitivity": (pl.Float64, "acct_noise_multiplier", 17),
    "paper_epsilon_spent": (pl.Float64, "messages_rejected", 17),
    "paper_delta_spent": (pl.Float64, "paper_epsilon_spent", 17),
    "acct_lattice_step": (pl.Float64, "acct_epsilon_sums", 18),
    "acct_tail": (pl.Float64, "acct_lattice_step", 18),
    "acct_epsilon_composed": (pl.Float64, "acct_tail", 18),
}

#: `regret_exponent` at or above this: regret growing linearly over the
#: last decade of the horizon (the engine's run summary and the report).
LINEAR_GROWTH_EXPONENT = 0.9


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
    files = sorted(f for f in p.rglob("part-*.parquet") if not any(part.startswith((".", "_")) for part in f.relative_to(p).parts))
    if not files:
        raise ResultsError(f"{p}: no Parquet part files found (expected part-*.parquet from `fedbandits run`){_grown_hint(p)}")
    return files


def _grown_hint(d: Path) -> str:
    """Where the study a job directory grew from stays loadable while the
    grown job runs (`fedbandits` moves the superseded parts and their
    manifest to `.superseded/<job>/` and `merge` removes them once the
    grown study is complete); empty when there is none."""
    old = d / ".superseded" / d.name
    if not any(old.glob("part-*.parquet")):
        return ""
    return f"; this study is being grown: the study it grew from stays loadable at {old} until `fedbandits merge {d}` completes this one"


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


#: The metadata key holding the XXH64 of a file's footer and tail, hashed
#: with its own value as sixteen '0's (the engine's `FOOTER_KEY`, since
#: semantics 17): with the data checksum, every byte of the file.
FOOTER_KEY = b"fedbandits.footer_xxh64"


def check_footer(f: Path) -> bool:
    """Checks the footer checksum on the raw bytes, before any Parquet
    decoder reads the footer (a damaged one could rename columns silently,
    panic polars or abort the interpreter in pyarrow); False says the file
    has no entry (`check_file` then refuses it unless its semantics predate
    the checksum or the caller asked for unchecked reads). Raises
    ResultsError naming `f`."""
    import xxhash

    raw = f.read_bytes()
    damaged = f"{f}: its footer is damaged (checksum mismatch): move it away and rerun the job (only its units are recomputed)"
    if len(raw) < 12 or raw[-4:] != b"PAR1":
        raise ResultsError(f"{f}: not a Parquet file")
    start = len(raw) - 8 - int.from_bytes(raw[-8:-4], "little")
    if start < 4:
        raise ResultsError(damaged)
    tail = raw[start:]
    pos = tail.find(FOOTER_KEY)
    if pos < 0:
        return False
    at = pos + len(FOOTER_KEY)
    if tail[at : at + 2] != b"\x18\x10" or len(tail) < at + 18:
        raise ResultsError(damaged)
    want = xxhash.xxh64(tail[: at + 2] + b"0" * 16 + tail[at + 18 :]).hexdigest().encode()
    if tail[at + 2 : at + 18] != want:
        raise ResultsError(damaged)
    return True


#: Metadata keys every part file has (`job_name` and `shard` since the
#: first part files; the others in every file with a footer checksum):
#: without one a file cannot be placed, and the loader's advice would name
#: nothing.
REQUIRED_KEYS = ("job_name", "shard")
SEALED_KEYS = ("job_name", "shard", "units", "job_identity", "job_yaml", "semantics_version")

#: The first semantics whose files carry the footer checksum (files of
#: semantics 17 written before it was added lack it).
FOOTER_SINCE = 17


def check_file(f: Path, unchecked_footers: bool = False) -> dict[bytes, bytes]:
    """Raises ResultsError if `f` is not a compatible, intact fedbandits
    file; returns its key-value metadata. A file of semantics 17 or later
    without a footer checksum is refused: one changed byte of the key's
    name removes the entry, and the footer could then rename or swap
    columns unseen. The first engines of semantics 17 wrote files without
    it; `unchecked_footers=True` reads those, with a warning that names
    each file read unchecked."""
    sealed = check_footer(f)
    try:
        md = pq.read_metadata(f).metadata or {}
        schema = pq.read_schema(f)
        # Polars decodes the footer itself (scan reads with it): a damaged
        # footer can make its Rust decoder panic, which reaches Python as
        # pyo3's PanicException, a BaseException that `except Exception`
        # misses; here it becomes this loader's error.
        pl.read_parquet_schema(f)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # pyarrow raises several types; polars may panic
        raise ResultsError(f"{f}: not a readable Parquet file ({type(e).__name__}: {e}): it is damaged") from None
    version = md.get(b"fedbandits.semantics_version", b"").decode()
    if version not in SUPPORTED_SEMANTICS:
        raise ResultsError(
            f"{f}: written by an incompatible engine (semantics version {version or 'missing'}; "
            f"this loader reads {sorted(SUPPORTED_SEMANTICS)}): rerun the job or update analysis/"
        )
    if not sealed and not (version.isdigit() and int(version) < FOOTER_SINCE):
        if not unchecked_footers:
            raise ResultsError(
                f"{f}: has no {FOOTER_KEY.decode()} entry, which every file of semantics {FOOTER_SINCE} or later "
                f"carries (it says {version or 'no semantics'}): its footer is damaged (a changed byte of the key's "
                f"name removes the entry, and the footer could then rename or swap columns unseen): move it away and "
                f"rerun the job (only its units are recomputed); a file written by a first engine of semantics "
                f"{FOOTER_SINCE}, before footer checksums, is read unchecked with unchecked_footers=True"
            )
        import warnings

        warnings.warn(f"{f}: read unchecked (no footer checksum): its column names and metadata are not verified", stacklevel=2)
    if sealed and version.isdigit() and int(version) < FOOTER_SINCE:
        raise ResultsError(
            f"{f}: says semantics {version} but has a {FOOTER_KEY.decode()} entry, which no engine before semantics "
            f"{FOOTER_SINCE} wrote (its metadata was edited): move it away and rerun the job (only its units are "
            f"recomputed)"
        )
    for key in SEALED_KEYS if sealed else REQUIRED_KEYS:
        if f"fedbandits.{key}".encode() not in md:
            raise ResultsError(
                f"{f}: its metadata lacks fedbandits.{key}, which every fedbandits part has (rewritten by another "
                f"tool, or damaged): move it away and rerun the job (only its units are recomputed)"
            )
    stated = md.get(CHECKSUM_KEY)
    if stated is None:
        # Every file the engine writes carries it (`fedbandits merge` refuses
        # a part without it too): a file without it was rewritten by another
        # tool, and its data cannot be trusted.
        raise ResultsError(
            f"{f}: no {CHECKSUM_KEY.decode()} checksum in its metadata (rewritten by another tool, or not written by "
            f"fedbandits): move it away and rerun the job (only its units are recomputed)"
        )
    if stated.decode() != f"{data_checksum(f):016x}":
        raise ResultsError(f"{f}: checksum mismatch (the file is damaged): move it away and rerun the job (only its units are recomputed)")
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
    for f, md in zip(files, metadata, strict=True):
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


MANIFEST = "_manifest.yaml"


def _meta(md: dict[bytes, bytes], key: str, default: str = "") -> str:
    return md.get(f"fedbandits.{key}".encode(), default.encode()).decode()


def read_manifest(d: Path) -> dict | None:
    """The `_manifest.yaml` of job directory `d` after checking its checksum
    line, as {"job", "job_identity", "complete", "expected", "present",
    "parts": {file name: shard}}; None when there is none."""
    import re

    import xxhash

    m = d / MANIFEST
    if not m.exists():
        return None
    text = m.read_text()
    body, sep, last = text.rpartition("checksum_xxh64: ")
    stated = last.strip().strip('"')
    if not sep or f"{xxhash.xxh64(body.encode()).intdigest():016x}" != stated:
        raise ResultsError(f"{m}: checksum mismatch (damaged or edited): rerun `fedbandits merge {d}`")

    def field(name: str) -> str:
        found = re.search(rf"^{name}: (.*)$", body, re.M)
        return found.group(1).strip().strip('"') if found else ""

    parts = dict(re.findall(r'^  - \{file: (.*), shard: "(.*)"\}$', body, re.M))
    return {
        "job": field("job"),
        "job_identity": field("job_identity"),
        "complete": field("complete") == "true",
        "expected": field("expected_units"),
        "present": field("present_units"),
        "parts": parts,
    }


def _rerun(md: dict[bytes, bytes], root: Path, shard: str) -> str:
    """The command that (re)computes one shard of the job `md` describes:
    the job file named in its folder (`job_dir`) when the run was given a
    relative path, so that it works from any working directory."""
    job_path = _meta(md, "job_path", f"{_meta(md, 'job_name', 'JOB')}.yaml")
    folder = _meta(md, "job_dir")
    if folder and not Path(job_path).is_absolute():
        job_path = str(Path(folder) / Path(job_path).name)
    return f"fedbandits run {job_path} --out {root} --shard {shard}"


def _row_jobs(f: Path) -> set[str]:
    """The job names in a part's `job` column: from the row groups'
    statistics where every group states one, else read."""
    meta = pq.read_metadata(f)
    names: set[str] = set()
    j = meta.schema.to_arrow_schema().get_field_index("job")
    for g in range(meta.num_row_groups):
        st = meta.row_group(g).column(j).statistics
        if st is None or not st.has_min_max or st.min != st.max:
            return {str(v) for v in pq.read_table(f, columns=["job"]).column("job").unique().to_pylist()}
        names.add(st.min.decode() if isinstance(st.min, bytes) else str(st.min))
    return names


def _check_one_job(d: Path, files: list[Path], mds: list[dict[bytes, bytes]]) -> None:
    """One job directory holds one version of one job: the same identity in
    every part, and every part's job name the directory's."""
    first = _meta(mds[0], "job_identity", "none")
    semantics = _meta(mds[0], "semantics_version")
    for f, md in zip(files, mds, strict=True):
        if _meta(md, "semantics_version") != semantics:
            raise ResultsError(
                f"{d}: mixes engine semantics: {files[0].name} was written by semantics {semantics}, {f.name} by "
                f"{_meta(md, 'semantics_version')} (their cells and figures differ): keep one engine's parts, move "
                f"the others away, and rerun the job into that directory"
            )
        ident = _meta(md, "job_identity", "none")
        if ident != first:
            raise ResultsError(
                f"{d}: mixes two versions of job {_meta(md, 'job_name')!r}: {files[0].name} has job identity "
                f"{first}, {f.name} has {ident} (the job was edited between runs: seed, grid, horizon, ...). "
                f"Move the parts of the version you do not want out of {d}, then `fedbandits merge {d}` lists "
                f"what the other needs"
            )
        name = _meta(md, "job_name")
        rows = _row_jobs(f) - {name}
        if rows:
            raise ResultsError(
                f"{f}: its rows belong to job {sorted(rows)[0]!r}, its metadata to {name!r} (units reused under another "
                f"job's name): move the directory away and rerun the job {name!r} into a new one"
            )
        if name != d.name:
            raise ResultsError(
                f"{f}: holds results of job {name!r} but lies in directory {d.name!r} (copied or moved): move it "
                f"back to the results directory of {name!r}, or rename the directory to {name!r}"
            )


def _completeness(d: Path, files: list[Path], mds: list[dict[bytes, bytes]]) -> str | None:
    """Why the parts of job directory `d` are not a complete run (None when
    they are): checked against `_manifest.yaml`, or without one against
    the shard layout the parts were written with."""
    manifest = read_manifest(d)
    identity = _meta(mds[0], "job_identity", "none")
    if manifest is not None and manifest["job_identity"] != identity:
        raise ResultsError(
            f"{d / MANIFEST}: written for job identity {manifest['job_identity']}, but the parts have {identity} "
            f"(another version of the job): rerun `fedbandits merge {d}`"
        )
    present = {f.name for f in files}
    if manifest is not None:
        listed = manifest["parts"]
        # The manifest names each part's shard: a part of another layout
        # copied over a listed name is not the part it lists.
        for f, md in zip(files, mds, strict=True):
            want = listed.get(f.name)
            got = _meta(md, "shard", "?")
            if want is not None and got != want:
                raise ResultsError(
                    f"{f}: holds shard {got} but {MANIFEST} lists it as shard {want} (a part of another shard "
                    f"layout copied over it): move it away and recompute it with `{_rerun(mds[0], d.parent, want)}`, "
                    f"then `fedbandits merge {d}`"
                )
        missing = sorted(set(listed) - present)
        if missing:
            cmds = "; ".join(_rerun(mds[0], d.parent, listed[m]) for m in missing)
            return (
                f"{d}: {', '.join(missing)} listed in {MANIFEST} but missing: restore it, or recompute it with "
                f"`{cmds}`, then `fedbandits merge {d}`"
            )
        extra = sorted(present - set(listed))
        if extra:
            return f"{d}: {', '.join(extra)} not in {MANIFEST} (written after the last merge): run `fedbandits merge {d}`"
        units = sum(len([u for u in _meta(md, "units").split(",") if u]) for md in mds)
        if manifest["present"].isdigit() and units != int(manifest["present"]):
            raise ResultsError(
                f"{d}: its parts hold {units} repetition units, {MANIFEST} says {manifest['present']}: a part was "
                f"replaced after the merge; run `fedbandits merge {d}`"
            )
        if not manifest["complete"]:
            return (
                f"{d}: {MANIFEST} says the run is incomplete ({manifest['present']} of {manifest['expected']} "
                f"repetition units present): `fedbandits merge {d}` prints the commands that complete it"
            )
        return None
    layouts = sorted({_meta(md, "shard", "?").partition("/")[2] for md in mds})
    if len(layouts) != 1 or not layouts[0].isdigit():
        return f"{d}: parts of several shard layouts (of {', '.join(layouts)}): keep one layout's parts and run `fedbandits merge {d}`"
    count = int(layouts[0])
    have = {_meta(md, "shard").partition("/")[0] for md in mds}
    missing_shards = [i for i in range(count) if str(i) not in have]
    if missing_shards:
        names = ", ".join(f"part-{i:05d}-of-{count:05d}.parquet" for i in missing_shards)
        cmds = "; ".join(_rerun(mds[0], d.parent, f"{i}/{count}") for i in missing_shards)
        return f"{d}: shard(s) missing: {names}; compute them with `{cmds}`, then `fedbandits merge {d}`"
    return None


def _checked_groups(p: Path, unchecked_footers: bool = False) -> list[tuple[list[Path], str | None]]:
    """Every check of the module doc but completeness on the part files
    under `p`, then the files grouped by job directory (or the single file),
    each group with why it is not a complete run (None when it is). `p` is
    resolved first, so that `scan(".")` inside a job directory knows the
    directory's name."""
    p = p.resolve() if p.exists() else p
    files = parquet_files(p)
    mds = [check_file(f, unchecked_footers) for f in files]
    dirs = [] if p.is_file() else sorted({f.parent for f in files})
    by_dir = {d: ([f for f in files if f.parent == d], [m for f, m in zip(files, mds, strict=True) if f.parent == d]) for d in dirs}
    for d, (fs, ms) in by_dir.items():
        _check_one_job(d, fs, ms)
    check_overlap(files, mds)
    if p.is_file():
        shard = _meta(mds[0], "shard", "0/1")
        why = None if shard.endswith("/1") else f"{p}: one shard (shard {shard}) of a sharded run; scan its directory"
        return [(files, why)]
    groups = [(fs, d, _completeness(d, fs, ms)) for d, (fs, ms) in by_dir.items()]
    return [(fs, why and why + _grown_hint(d)) for fs, d, why in groups]


def checked_files(path: str | Path, allow_partial: bool = False, unchecked_footers: bool = False) -> tuple[list[Path], dict[Path, bool]]:
    """The part files under `path` after every check of the module doc, and
    for each whether its job directory (or, for a single file, the file) is
    a complete run. Raises ResultsError on the first failed check, and on a
    failed completeness check only when `allow_partial` is false."""
    groups = _checked_groups(Path(path), unchecked_footers)
    complete: dict[Path, bool] = {}
    for fs, why in groups:
        if why is not None and not allow_partial:
            raise ResultsError(f"{why} (or read what is there with allow_partial=True)")
        complete.update({f: why is None for f in fs})
    return sorted(f for fs, _ in groups for f in fs), complete


def incomplete_runs(path: str | Path) -> dict[Path, str]:
    """For each job directory (or single file) under `path` that is not a
    complete run, why not and the command that completes it (what
    `checked_files` raises without `allow_partial`); empty when every run
    is complete. The other checks of the module doc still raise."""
    return {fs[0].parent if fs else Path(path): why for fs, why in _checked_groups(Path(path)) if why is not None}


def scan(path: str | Path, allow_partial: bool = False, unchecked_footers: bool = False) -> pl.LazyFrame:
    """All results under `path` as one LazyFrame (one row per cell, repetition, t),
    after the checks of the module doc. With `allow_partial=True` an
    incomplete run is read as it is, and the Boolean column
    `results_complete` says which rows come from a complete one."""
    files, complete = checked_files(path, allow_partial, unchecked_footers)
    names = {f: pq.read_schema(f).names for f in files}

    def semantics(f: Path) -> int:
        raw = (pq.read_metadata(f).metadata or {}).get(b"fedbandits.semantics_version", b"0").decode()
        return int(raw) if raw.isdigit() else 0

    missing = {f: [c for c in ADDED_COLUMNS if c not in names[f]] for f in files}
    missing = {f: [c for c in cs if semantics(f) < ADDED_COLUMNS[c][2]] if cs else cs for f, cs in missing.items()}
    if allow_partial or any(missing.values()) or len({tuple(n) for n in names.values()}) > 1:

        def one(f: Path) -> pl.LazyFrame:
            lf = pl.scan_parquet(str(f))
            cols = list(names[f])
            for c in missing[f]:
                # In the engine's column order (after the column it follows;
                # at the end when an older file lacks that one too).
                dtype, after, _ = ADDED_COLUMNS[c]
                at = cols.index(after) + 1 if after in cols else len(cols)
                cols = [*cols[:at], c, *cols[at:]]
                lf = lf.with_columns(pl.lit(None, dtype).alias(c))
            lf = lf.select(cols)
            return lf.with_columns(results_complete=pl.lit(complete[f])) if allow_partial else lf

        # The union of the files' columns (a job's files carry its own
        # families' columns; engines may order them differently), each
        # column null in the files that lack it.
        lf = pl.concat([one(f) for f in files], how="diagonal")
    else:
        lf = pl.scan_parquet([str(f) for f in files])
    schema = lf.collect_schema()
    for col, dtype in REQUIRED.items():
        if schema[col] != dtype:
            raise ResultsError(f"{path}: column {col} has type {schema[col]}, expected {dtype}")
    return lf


def families(path: str | Path, allow_partial: bool = False) -> dict[str, dict[str, list[str]]]:
    """The engine's family registry, as written into the results' metadata:
    {family: {"algorithms": [...], "environments": [...], "columns": [...]}},
    where "columns" are the output columns only that family fills."""
    import json

    merged: dict[str, dict[str, list[str]]] = {}
    for f in checked_files(path, allow_partial)[0]:
        md = pq.read_metadata(f).metadata or {}
        raw = md.get(b"fedbandits.families")
        if raw is None:
            raise ResultsError(f"{f}: no family registry in the metadata (written by an engine before semantics 3)")
        merged.update(json.loads(raw.decode()))
    return merged


def scan_family(path: str | Path, family: str, allow_partial: bool = False) -> pl.LazyFrame:
    """The rows of one family's algorithms, without the columns only other
    families fill."""
    reg = families(path, allow_partial)
    if family not in reg:
        raise ResultsError(f"{path}: unknown family {family!r}; the results' engine knows {sorted(reg)}")
    others = {c for name, f in reg.items() if name != family for c in f["columns"]} - set(reg[family]["columns"])
    lf = scan(path, allow_partial).filter(pl.col("algorithm").is_in(reg[family]["algorithms"]))
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
    return private.sort([*by, "epsilon"]).with_columns(ratio=pl.col("private") / pl.col("private").first().over(list(by)))


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
    falling below that level (Dubey & Pentland's learning onset, REPRODUCTION.md)."""
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
    for a, b in zip(edges, edges[1:], strict=False):
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


def growth_exponent(ts, regrets, horizon: int) -> float | None:
    """The growth exponent of cumulative regret over the last decade of the
    horizon, as the engine writes it in `regret_exponent` (analysis/README.md,
    "Long horizons"): (ln R(T) - ln R(T/10)) / ln 10, with R(T/10)
    at a checkpoint or interpolated in (log t, log R) between the two
    around it; None when the checkpoints do not span the decade (none at T,
    none at or before T/10, the two around it more than a factor 2 apart)
    or the regret at either end is not positive. `ts` ascending."""
    pts = dict(zip(ts, regrets, strict=True))
    if horizon not in pts:
        return None
    t0 = horizon / 10
    lo = max((t for t in ts if t <= t0), default=None)
    hi = min((t for t in ts if t >= t0), default=None)
    if lo is None or hi is None or hi > 2 * lo:
        return None
    end, r_lo, r_hi = pts[horizon], pts[lo], pts[hi]
    if not all(r > 0 and math.isfinite(r) for r in (end, r_lo, r_hi)):
        return None
    if hi == lo:
        ln_r0 = math.log(r_lo)
    else:
        w = (math.log(t0) - math.log(lo)) / (math.log(hi) - math.log(lo))
        ln_r0 = math.log(r_lo) + w * (math.log(r_hi) - math.log(r_lo))
    return (math.log(end) - ln_r0) / math.log(10)


def regret_exponents(lf: pl.LazyFrame, column: str = "group_regret") -> pl.DataFrame:
    """`growth_exponent` of `column` per repetition, from the curves (for
    files written before semantics 10, which have no `regret_exponent`, or
    as a check of it). The engine measures the family's `growth_regret`
    (`families()`: `group_regret`, the combinatorial family's
    `regret_after_exploration`). Columns: job, cell_id, repetition,
    exponent."""
    keys = ["job", "cell_id", "repetition"]
    curves = lf.select([*keys, "horizon", "t", column]).sort([*keys, "t"]).group_by(keys, maintain_order=True)
    df = curves.agg(pl.col("horizon").first(), pl.col("t"), pl.col(column)).collect()
    exps = [growth_exponent(r["t"], r[column], r["horizon"]) for r in df.iter_rows(named=True)]
    return df.select(keys).with_columns(exponent=pl.Series(exps, dtype=pl.Float64))


def to_pandas(path: str | Path, allow_partial: bool = False, unchecked_footers: bool = False):
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
    return scan(path, allow_partial, unchecked_footers).collect().to_arrow().to_pandas(types_mapper=mapping.get)


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


def swept_columns(frame, job=None) -> list[str]:
    """The columns that tell a study's cells apart: `algorithm`, then the
    axes the job sweeps. Group by them (with `t` for curves) and nothing is
    averaged across a swept parameter: not `ldp` with `sdp_vecsum`, not one
    calibration with another. Takes a Polars LazyFrame or DataFrame, or a
    pandas DataFrame (README, "A first study").

    The axes are read from the data: `environment`, `horizon` and every
    parameter column (those between `horizon` and `repetition`) that takes
    two or more values (null counted) within one algorithm's rows, less
    those the others determine: a parameter null where another switches it
    off (`delta` and `lambda` beside `private`), or derived from another
    (`schedule_cap` from `horizon`) is dropped when the remaining columns
    still tell every cell apart, those with nulls first, then the later
    ones. `job` (a results directory, a job file, or its YAML text): the
    job's own `grid:` keys instead, with any column they leave two cells
    sharing added (and a warning saying which and why)."""
    names = frame.collect_schema().names() if isinstance(frame, pl.LazyFrame) else list(frame.columns)
    if "horizon" not in names or "repetition" not in names:
        raise ResultsError("swept_columns needs a fedbandits frame (columns horizon ... repetition)")
    candidates = ["environment", *names[names.index("horizon") : names.index("repetition")]]
    cells = _cell_keys(frame, candidates)
    varying = [c for c in candidates if cells.group_by("algorithm").agg(pl.col(c).n_unique()).select(pl.col(c).max()).item() > 1]
    if job is not None:
        return ["algorithm", *_declared_axes(cells, varying, _grid_of(job))]
    nulls = {
        c
        for c in varying
        if cells.group_by("algorithm").agg(pl.col(c).null_count().gt(0) & pl.col(c).is_not_null().any()).get_column(c).any()
    }
    keep = list(varying)
    for c in [*[c for c in reversed(varying) if c in nulls], *[c for c in reversed(varying) if c not in nulls]]:
        trial = [k for k in keep if k != c]
        # A column without nulls goes only where the other such columns
        # determine it (`private` is not dropped for `epsilon`, which is
        # null exactly where private is false).
        complete = trial if c in nulls else [k for k in trial if k not in nulls]
        if _separates(cells, trial, varying) and _determines(cells, complete, c):
            keep = trial
    return ["algorithm", *keep]


def _determines(cells: pl.DataFrame, columns: list[str], c: str) -> bool:
    """Whether (algorithm, columns) determines column `c` in every cell."""
    return scalar(cells.group_by(["algorithm", *columns]).agg(n=pl.col(c).n_unique())["n"].max()) <= 1


def _cell_keys(frame, candidates: list[str]) -> pl.DataFrame:
    """One row per distinct (algorithm, candidates): the cells."""
    if isinstance(frame, pl.LazyFrame | pl.DataFrame):
        return frame.lazy().select("algorithm", *candidates).unique().collect()
    return pl.from_pandas(frame[["algorithm", *candidates]].drop_duplicates())


def _separates(cells: pl.DataFrame, columns: list[str], varying: list[str]) -> bool:
    """Whether (algorithm, columns) tells apart every cell that (algorithm,
    varying) does."""
    full = cells.select("algorithm", *varying).unique().height
    return cells.select("algorithm", *columns).unique().height == full


def _grid_of(job) -> list[str]:
    """The `grid:` keys of a results directory's job, a job file or YAML."""
    import yaml

    text = str(job)
    path = Path(text) if "\n" not in text and len(text) < 4096 else None
    if path is not None and path.is_dir():
        files = sorted(f for f in path.rglob("part-*.parquet") if not any(x.startswith(".") for x in f.relative_to(path).parts))
        meta = pq.read_metadata(files[0]).metadata or {} if files else {}
        text = meta.get(b"fedbandits.job_yaml", b"").decode()
    elif path is not None and path.is_file():
        text = path.read_text(encoding="utf-8")
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ResultsError(f"swept_columns: the job text does not parse: {e}") from e
    grid = doc.get("grid") if isinstance(doc, dict) else None
    keys = [str(k) for k in grid] if isinstance(grid, dict) else []
    env = doc.get("environment") if isinstance(doc, dict) else None
    return (["environment"] if isinstance(env, list) and len(env) > 1 else []) + keys


def _declared_axes(cells: pl.DataFrame, varying: list[str], grid: list[str]) -> list[str]:
    """The grid keys that vary, and any varying column they leave two cells
    sharing (warned)."""
    import warnings

    keep = [k for k in grid if k in varying]
    for c in varying:
        if c not in keep and not _separates(cells, keep, varying):
            trial = [*keep, c]
            if cells.select("algorithm", *trial).unique().height > cells.select("algorithm", *keep).unique().height:
                warnings.warn(
                    f"swept_columns: `{c}` added: the job's grid keys leave cells that differ in it sharing one group", stacklevel=3
                )
                keep = trial
    return keep


def final_summary(frame: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """Final per-agent regret of every cell a study tells apart: the rows at
    t = horizon grouped by `swept_columns(frame)`, with the number of
    repetitions `n`, `mean`, `geo_mean` (the geometric mean, the level the
    report reads: regret effects are multiplicative; null where a value is
    0 or below), `median` and `sd` over repetitions. The value is the
    family's final regret per agent: `agent_regret`, and for the
    combinatorial family `regret_after_exploration` / m (its exploration
    phase costs every algorithm alike), as the report reads it."""
    lf = frame.lazy()
    keys = swept_columns(lf)
    value = pl.col("agent_regret")
    if "regret_after_exploration" in lf.collect_schema().names():
        after = pl.col("regret_after_exploration") / pl.col("m").cast(pl.Float64)
        value = pl.when(pl.col("regret_after_exploration").is_not_null()).then(after).otherwise(value)
    final = lf.filter(pl.col("t") == pl.col("horizon")).with_columns(value.alias("final_regret"))
    v = pl.col("final_regret")
    geo = pl.when((v > 0).all()).then(v.log().mean().exp()).otherwise(None)
    out = final.group_by(keys).agg(n=pl.len(), mean=v.mean(), geo_mean=geo, median=v.median(), sd=v.std())
    return out.sort(keys, nulls_last=True).collect()

"""REPRODUCTION.md's numbers, generated from results and checked.

    python -m fedbandits_analysis.reproduction RESULTS... --write analysis/REPRODUCTION.md
    python -m fedbandits_analysis.reproduction --check [RESULTS...]
    python -m fedbandits_analysis.reproduction --numbers

Every number, table and cost of the report sits in a generated block,
between the lines

    <!-- BEGIN generated: job NAME · python -m fedbandits_analysis.reproduction; do not edit by hand -->
    <!-- END generated: job NAME · xxh64 HEX -->

(or `plan NAME` for a job not run here, whose block is `fedbandits plan`'s
cost and the cluster command). `--write` renders the block of every job
found under RESULTS (`fedbandits_analysis.reproduction_blocks`) and of
every `plan` block, and leaves the others as they are; `--machine` names
the machine and threads of the run's cost.

`--check` fails (exit 1), naming the block and the number, when

- a block's text no longer matches its checksum (edited by hand);
- a `_small` block (the CI scale) differs from a fresh run of its job
  (FEDBANDITS_BIN runs it, unless RESULTS hold it), the `Run:` line and
  commits aside (they name where and when it ran, not what);
- a larger block is of an older engine semantics than the engine's, unless
  the line after its end says `<!-- stale: job NAME as of semantics N:
  REASON -->`;
- a `plan` block differs from what `fedbandits plan` prints now;
- a block lists a figure drawn from other results, or a figure the report
  shows has no provenance (PNG text chunks, `figures.read_provenance`);
- a number outside the blocks has no reason (`--numbers` lists each with
  its reason: a quote of a paper, a name, a setting, a constant).
"""

from __future__ import annotations

import argparse
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import xxhash

from .load import ResultsError, parquet_files, scan
from .reproduction_blocks import audit_block, claims_summary, job_block, plan_block
from .reproduction_numbers import prose_numbers

HERE = Path(__file__).resolve().parent
DEFAULT_FILE = HERE / "REPRODUCTION.md"
FIGURES = HERE / "figures"
JOBS = HERE.parent / "jobs"
BEGIN = re.compile(r"^<!-- BEGIN generated: (job|plan|audit|summary) (\S+) · .* -->$")
END = re.compile(r"^<!-- END generated: (job|plan|audit|summary) (\S+) · xxh64 ([0-9a-f]{16}) -->$")
STALE = re.compile(r"^<!-- stale: job (\S+) as of semantics (\d+): (.+) -->$")
COMMIT = re.compile(r"commit [0-9a-f]{7,40}")


class ReproductionError(Exception):
    """A malformed report (an unclosed or duplicated block)."""


@dataclass
class Block:
    """One generated block: its kind (`job` / `plan`), job name, the line
    numbers of its markers (0-based) and its body."""

    kind: str
    name: str
    begin: int
    end: int
    body: list[str]
    checksum: str


def begin_line(kind: str, name: str) -> str:
    """A block's opening marker."""
    return f"<!-- BEGIN generated: {kind} {name} · python -m fedbandits_analysis.reproduction; do not edit by hand -->"


def end_line(kind: str, name: str, body: list[str]) -> str:
    """A block's closing marker, with the checksum of its body."""
    return f"<!-- END generated: {kind} {name} · xxh64 {digest(body)} -->"


def digest(body: list[str]) -> str:
    """The xxh64 of a block's body lines."""
    return xxhash.xxh64("\n".join(body).encode()).hexdigest()


def blocks(lines: list[str]) -> list[Block]:
    """Every generated block of the report, in order."""
    out, seen = [], set()
    i = 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        if not m:
            if END.match(lines[i]):
                raise ReproductionError(f"line {i + 1}: an END marker without its BEGIN")
            i += 1
            continue
        kind, name = m.groups()
        if (kind, name) in seen:
            raise ReproductionError(f"line {i + 1}: a second block for {kind} {name}")
        seen.add((kind, name))
        j = i + 1
        while j < len(lines) and not END.match(lines[j]):
            if BEGIN.match(lines[j]):
                raise ReproductionError(f"line {j + 1}: a BEGIN marker inside block {kind} {name} (line {i + 1})")
            j += 1
        if j == len(lines):
            raise ReproductionError(f"line {i + 1}: block {kind} {name} has no END marker")
        e = END.match(lines[j])
        assert e is not None  # the loop stopped at an END marker
        if e.group(1, 2) != (kind, name):
            raise ReproductionError(f"line {j + 1}: block {kind} {name} ends with the marker of {e.group(1)} {e.group(2)}")
        out.append(Block(kind, name, i, j, lines[i + 1 : j], e.group(3)))
        i = j + 1
    return out


def job_dirs(roots: list[str]) -> dict[str, Path]:
    """Job name -> its results directory, for every job found under the roots."""
    found: dict[str, Path] = {}
    for root in roots:
        try:
            files = parquet_files(root)
        except ResultsError:
            if audit_files([root]):
                continue  # a root of audit tables only
            raise
        for f in files:
            md = pq.read_metadata(f).metadata or {}
            name = md.get(b"fedbandits.job_name", b"").decode()
            if name and name not in found:
                found[name] = f.parent
    return found


def audit_files(roots: list[str]) -> dict[str, Path]:
    """Job name -> its audit table (`<root>/<job>/_audit/audit.parquet`)."""
    found: dict[str, Path] = {}
    for root in roots:
        for f in sorted(Path(root).glob("**/_audit/audit.parquet")):
            found.setdefault(f.parent.parent.name, f)
    return found


def meta_of(d: Path) -> dict:
    """What a job's block says of its results: name, job path, identity,
    semantics, commit, YAML (from the first part's metadata; `d` a job's
    directory or one Parquet file)."""
    md = pq.read_metadata(d if d.is_file() else parquet_files(d)[0]).metadata or {}

    def get(k: str) -> str:
        return md.get(f"fedbandits.{k}".encode(), b"").decode()

    return {
        "job": get("job_name"),
        "path": _repo_path(get("job_path") or f"jobs/{get('job_name')}.yaml"),
        "identity": get("job_identity"),
        "semantics": get("semantics_version"),
        "commit": get("git_commit") or "unknown",
        "job_yaml": get("job_yaml") or None,
    }


def _repo_path(path: str) -> str:
    """A job file's path relative to this checkout when it lies inside it,
    or as `jobs/NAME` when it is a bundled job of another checkout (a run
    started elsewhere records an absolute path)."""
    p = Path(path)
    if not p.is_absolute():
        return path
    try:
        return str(p.resolve().relative_to(JOBS.parent))
    except ValueError:
        # Another checkout's bundled job (a clean clone): named as bundled.
        return f"jobs/{p.name}" if p.parent.name == "jobs" else path


def render_job(d: Path, machine: str, figures: Path = FIGURES) -> list[str]:
    """A job block's body from its results directory."""
    df = scan(d).collect()
    return job_block(df, meta_of(d), figures, machine)


def engine() -> str:
    """The fedbandits binary: FEDBANDITS_BIN, else `fedbandits` on PATH."""
    name = os.environ.get("FEDBANDITS_BIN", "fedbandits")
    return str(Path(name).resolve()) if os.sep in name else name


def render_plan(name: str) -> list[str]:
    """A plan block's body: `fedbandits plan --tasks 100` of the job."""
    path = f"jobs/{name}.yaml"
    try:
        # The built-in time model, not this machine's calibration (an empty
        # cache folder): the block reads the same on every machine.
        env = {**os.environ, "FEDBANDITS_CACHE_DIR": _empty_cache()}
        cmd = [engine(), "plan", "--tasks", "100", str(JOBS / f"{name}.yaml")]
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=JOBS.parent, env=env)
    except OSError as e:
        raise ReproductionError(f"cannot run {engine()} (set FEDBANDITS_BIN to the fedbandits binary): {e}") from e
    if out.returncode != 0:
        return plan_block(path, "", _relative(out.stderr.strip()))
    return plan_block(path, out.stdout)


_CACHE: list[str] = []


def _empty_cache() -> str:
    """A cache folder of this process's own, empty when it is made."""
    if not _CACHE:
        _CACHE.append(tempfile.mkdtemp(prefix="fedbandits-plan-cache-"))
        atexit.register(shutil.rmtree, _CACHE[0], True)
    return _CACHE[0]


def _relative(text: str) -> str:
    """A message with this checkout's absolute paths made relative."""
    return text.replace(str(JOBS.parent) + "/", "")


def replace(lines: list[str], b: Block, body: list[str]) -> list[str]:
    """The report with block `b`'s body replaced."""
    return [*lines[: b.begin + 1], *body, end_line(b.kind, b.name, body), *lines[b.end + 1 :]]


def write(file: Path, roots: list[str], machine: str) -> int:
    """Regenerates the blocks of every job under `roots` and every plan block."""
    lines = file.read_text().splitlines()
    dirs, audits = job_dirs(roots), audit_files(roots)
    done = set()
    for b in reversed(blocks(lines)):
        if b.kind == "job" and b.name in dirs:
            lines = replace(lines, b, render_job(dirs[b.name], machine))
            done.add(b.name)
        elif b.kind == "audit" and b.name in audits:
            lines = replace(lines, b, audit_block(pl.read_parquet(audits[b.name]), meta_of(audits[b.name]), machine))
            done.add(b.name)
        elif b.kind == "plan":
            lines = replace(lines, b, render_plan(b.name))
    lines = with_summary(lines)
    tmp = file.with_name(f".{file.name}.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, file)
    for name in sorted(set(dirs) - done):
        print(f"note: results of {name} ({dirs[name]}) have no block in {file}", file=sys.stderr)
    print(f"{file}: {len(done)} job and audit blocks regenerated ({', '.join(sorted(done)) or 'none'})")
    return 0


def with_summary(lines: list[str]) -> list[str]:
    """The report with its `summary claims` block rebuilt from its job blocks."""
    for b in blocks(lines):
        if b.kind == "summary":
            return replace(lines, b, claims_summary(blocks(lines)))
    return lines


def normalized(body: list[str]) -> list[str]:
    """A block's body as `--check` compares it: no `Run:` line, no commits."""
    return [COMMIT.sub("commit ?", ln) for ln in body if not ln.startswith("Run:")]


def first_difference(ours: list[str], fresh: list[str]) -> str:
    """Where two bodies first differ, with the numbers of the line."""
    for i, (a, b) in enumerate(zip(ours, fresh, strict=False)):
        if a != b:
            na, nb = re.findall(r"[-+]?\d[\d.e+-]*", a), re.findall(r"[-+]?\d[\d.e+-]*", b)
            diff = [(x, y) for x, y in zip(na, nb, strict=False) if x != y]
            what = f"; the report says {diff[0][0]} where a fresh run gives {diff[0][1]}" if diff else ""
            return f"body line {i + 1}{what}\n    report: {a}\n    fresh:  {b}"
    return f"the report has {len(ours)} lines where a fresh run has {len(fresh)}"


def run_small(names: list[str], out: Path) -> None:
    """Runs the `_small` jobs into `out` (FEDBANDITS_BIN)."""
    for name in names:
        cmd = [engine(), "run", str(JOBS / f"{name}.yaml"), "--out", str(out), "--threads", str(os.cpu_count() or 2), "--quiet"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise ReproductionError(f"{' '.join(cmd)} failed: {res.stderr.strip()}")


def _semantics(body: list[str]) -> str | None:
    m = re.search(r"engine semantics (\d+)", body[0]) if body else None
    return m.group(1) if m else None


def check(file: Path, roots: list[str], work: Path) -> list[str]:
    """Every problem `--check` finds (module doc), as messages."""
    lines = file.read_text().splitlines()
    bs = blocks(lines)
    errors = [
        f"block {b.kind} {b.name} (line {b.begin + 1}): "
        + (
            f"never generated: run jobs/{b.name}.yaml and --write it"
            if not b.body
            else f"edited by hand (its text no longer matches its checksum {b.checksum}); regenerate it"
        )
        for b in bs
        if digest(b.body) != b.checksum
    ]
    small = [b.name for b in bs if b.kind == "job" and b.name.endswith("_small")]
    dirs = job_dirs(roots) if roots else {}
    missing = [n for n in small if n not in dirs]
    if missing:
        run_small(missing, work)
        dirs.update(job_dirs([str(work)]))
    current = {meta_of(dirs[n])["semantics"] for n in small if n in dirs}
    stale: dict[str, set[str]] = {}
    for ln in lines:
        if m := STALE.match(ln):
            stale.setdefault(m.group(1), set()).add(m.group(2))
    for b in bs:
        if b.kind == "summary" and b.body != claims_summary(bs):
            errors.append(f"block summary {b.name} (line {b.begin + 1}) differs from the job blocks' claims: regenerate it (--write)")
        errors += _block_errors(b, small, dirs, current, stale)
        errors += [f"block {b.kind} {b.name}: {ln.lstrip('- ')}" for ln in b.body if "drawn from other results" in ln]
    errors += figure_errors(lines, bs)
    errors += [
        f"line {n.line}: the number {n.text!r} outside the generated blocks has no reason ({n.context!r})"
        for n in prose_numbers(lines, bs)
        if not n.reason
    ]
    return errors


def _block_errors(b: Block, small: list[str], dirs: dict[str, Path], current: set[str], stale: dict[str, set[str]]) -> list[str]:
    """What `--check` finds wrong with one block's contents."""
    where = f"block {b.kind} {b.name} (line {b.begin + 1})"
    if b.kind == "summary":
        return []
    if b.kind == "plan":
        now = render_plan(b.name)
        return (
            []
            if normalized(now) == normalized(b.body)
            else [f"{where}: differs from `fedbandits plan` now: {first_difference(b.body, now)}"]
        )
    if b.name in small:
        fresh = normalized(render_job(dirs[b.name], ""))
        return [] if fresh == normalized(b.body) else [f"{where} differs from a fresh run: {first_difference(normalized(b.body), fresh)}"]
    sem = _semantics(b.body)
    if not current or sem in current or sem in stale.get(b.name, set()):
        return []
    return [
        f"{where} is of engine semantics {sem}, the engine's is {'/'.join(sorted(current))}: rerun jobs/{b.name}.yaml and "
        f"regenerate it, or say why not after its END line (<!-- stale: job {b.name} as of semantics {sem}: REASON -->)"
    ]


def figure_errors(lines: list[str], bs: list[Block]) -> list[str]:
    """Figures the report shows without provenance."""
    from .figures import read_provenance

    out = []
    for i, ln in enumerate(lines):
        for name in re.findall(r"\(figures/([\w.-]+\.png)\)", ln):
            png = FIGURES / name
            if not png.exists():
                out.append(f"line {i + 1}: figures/{name} does not exist")
            elif "fedbandits.job_identity" not in read_provenance(png):
                out.append(f"line {i + 1}: figures/{name} carries no provenance (redraw it: python -m fedbandits_analysis.figures)")
    return out


def main(argv: list[str] | None = None) -> int:
    """The command line (module doc); 0 on success, 1 when `--check` fails, 2 on bad input."""
    p = argparse.ArgumentParser(prog="python -m fedbandits_analysis.reproduction", description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="*", help="results roots or job directories")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="FILE", help="regenerate FILE's blocks from the results")
    mode.add_argument("--check", action="store_true", help="check the report (module doc)")
    mode.add_argument("--numbers", action="store_true", help="list every number outside the generated blocks, with its reason")
    p.add_argument("--file", default=str(DEFAULT_FILE), help="the report (default: analysis/REPRODUCTION.md)")
    p.add_argument("--machine", default="2-core development VM, --threads 2", help="the machine and threads the runs' cost was measured on")
    a = p.parse_args(argv)
    try:
        if a.write:
            return write(Path(a.write), a.results, a.machine)
        file = Path(a.file)
        if a.numbers:
            lines = file.read_text().splitlines()
            try:
                for n in prose_numbers(lines, blocks(lines)):
                    print(f"{file.name}:{n.line}: {n.text}: {n.reason or 'NO REASON'}  [{n.context}]")
            except BrokenPipeError:
                pass  # the reader went away (`| head`)
            return 0
        with tempfile.TemporaryDirectory(prefix="fedbandits-reproduction-") as work:
            errors = check(file, a.results, Path(work))
    except (ReproductionError, ResultsError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for err in errors:
        print(f"error: {err}", file=sys.stderr)
    if errors:
        print(f"{file}: {len(errors)} problems", file=sys.stderr)
        return 1
    print(f"{file}: every generated block checks")
    return 0


if __name__ == "__main__":
    sys.exit(main())

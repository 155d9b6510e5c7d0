"""REPRODUCTION.md cannot go stale: `python -m
fedbandits_analysis.reproduction --check` passes on the committed report
against fresh `_small` runs, and fails, naming the block and the number,
after a one-digit edit of a generated block, after a block's semantics
falls behind the engine's, and on a number outside the blocks without a
reason."""

from __future__ import annotations

import re

import pytest
from fedbandits_analysis import reproduction as rp
from tiny import ENGINE

REPORT = rp.DEFAULT_FILE


@pytest.fixture(autouse=True)
def _engine(monkeypatch):
    monkeypatch.setenv("FEDBANDITS_BIN", str(ENGINE))


def _check(file, small_results, capsys) -> tuple[int, str]:
    code = rp.main(["--check", "--file", str(file), str(small_results)])
    return code, capsys.readouterr().err


def test_the_committed_report_checks(small_results, capsys):
    code, err = _check(REPORT, small_results, capsys)
    assert code == 0, err


def _small_block(lines: list[str]) -> rp.Block:
    return next(b for b in rp.blocks(lines) if b.name == "zhou_fig2b_small")


def _edit_digit(lines: list[str], b: rp.Block) -> tuple[list[str], int]:
    """The report with one digit of a regret in block `b`'s table changed."""
    i = next(i for i in range(b.begin + 1, b.end) if lines[i].startswith("| private_fedlinucb"))
    m = re.search(r"\| (\d)(\d*\.?\d*) \|", lines[i])
    digit = str((int(m.group(1)) % 9) + 1)
    lines = list(lines)
    lines[i] = lines[i][: m.start(1)] + digit + lines[i][m.end(1) :]
    return lines, i


def test_a_one_digit_edit_fails_by_checksum_and_by_a_fresh_run(tmp_path, small_results, capsys):
    lines = REPORT.read_text().splitlines()
    edited, _ = _edit_digit(lines, _small_block(lines))
    file = tmp_path / "REPRODUCTION.md"
    file.write_text("\n".join(edited) + "\n")
    code, err = _check(file, small_results, capsys)
    assert code == 1
    assert "block job zhou_fig2b_small" in err and "edited by hand" in err, err
    # A careful forger who also recomputes the checksum is caught by the rerun.
    b = _small_block(edited)
    edited[b.end] = rp.end_line("job", b.name, b.body)
    file.write_text("\n".join(edited) + "\n")
    code, err = _check(file, small_results, capsys)
    assert code == 1
    assert "zhou_fig2b_small" in err and "differs from a fresh run" in err and "the report says" in err, err


def test_a_block_of_an_older_semantics_fails_until_marked_stale(tmp_path, small_results, capsys):
    lines = REPORT.read_text().splitlines()
    b = next(b for b in rp.blocks(lines) if b.kind == "job" and not b.name.endswith("_small"))
    body = [b.body[0].replace(f"engine semantics {rp._semantics(b.body)}", "engine semantics 3"), *b.body[1:]]
    lines = rp.replace(lines, b, body)
    file = tmp_path / "REPRODUCTION.md"
    file.write_text("\n".join(lines) + "\n")
    code, err = _check(file, small_results, capsys)
    assert code == 1 and f"block job {b.name}" in err and "semantics 3" in err, err
    end = rp.blocks(lines)[[x.name for x in rp.blocks(lines)].index(b.name)].end
    lines.insert(end + 1, f"<!-- stale: job {b.name} as of semantics 3: a test -->")
    file.write_text("\n".join(lines) + "\n")
    code, err = _check(file, small_results, capsys)
    assert code == 0, err


def test_a_number_without_a_reason_fails(tmp_path, small_results, capsys):
    file = tmp_path / "REPRODUCTION.md"
    file.write_text(REPORT.read_text() + "\nOur regret was 1234.5 here.\n")
    code, err = _check(file, small_results, capsys)
    assert code == 1 and "'1234.5'" in err, err


def test_every_prose_number_has_a_reason():
    lines = REPORT.read_text().splitlines()
    missing = [n for n in rp.prose_numbers(lines, rp.blocks(lines)) if not n.reason]
    assert not missing, missing


def test_figures_carry_the_provenance_of_their_results(small_results, tmp_path):
    from fedbandits_analysis import figures

    job = small_results / "zhou_fig2c_small"
    assert figures.main([str(job), "--out", str(tmp_path)]) == 0
    meta = rp.meta_of(job)
    prov = figures.read_provenance(tmp_path / "zhou_fig2c_small.png")
    assert prov == {
        "fedbandits.semantics_version": meta["semantics"],
        "fedbandits.job_name": "zhou_fig2c_small",
        "fedbandits.job_identity": meta["identity"],
        "fedbandits.git_commit": meta["commit"],
    }

"""The numbers REPRODUCTION.md keeps outside its generated blocks, each with
its reason (`python -m fedbandits_analysis.reproduction --numbers`).

A number outside a block is allowed where it is not a result: inside a
code span (a job file, a parameter, a command), inside double quotes (a
quote of a paper), in a heading or a link target, after a name it numbers
(Fig. 1A, EXP2, Remark 1, semantics 17), or listed in `REASONS` with why it
may stand there (a constant of an algorithm or environment, a setting the
prose describes). Anything else fails `--check`: measured numbers belong in
blocks, where a rerun regenerates them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NUMBER = re.compile(r"(?<![\w.])(?:\d+(?:[.,]\d+)*(?:e[-+]?\d+)?(?:\^[-\d]+)?%?)(?![\w])")
NAMED = re.compile(r"(?:Fig\.|Figure|Figures|EXP|Remark|Proposition|Lemma|Theorem|Algorithm|Section|semantics|issue|Table|Step|Eq\.)\s*$")

#: Numbers the prose may state, with their reason.
REASONS = {
    "0.2": "the no-learning level of linear_gap: the mean gap of a suboptimal action (claims.LINEAR_GAP_LEVEL)",
    "10^7": "the horizon of the studies the tool is built for and of the long-horizon jobs (a setting)",
    "10^6": "a horizon of the paper jobs (a setting of the job files)",
    "10^5": "Solanki et al.'s horizon (a setting of the job files)",
    "10^4": "Zhou & Chowdhury's horizon (a setting of the job files)",
    "100": "the papers' repetitions or M (a setting of the job files)",
    "2": "a count in prose (two repetitions, two cores, two readings)",
    "3": "a count in prose (three families, three verdicts)",
    "4": "a count in prose (four papers)",
    "1": "epsilon = 1 or a count (a setting of the job files)",
    "1.5": "the tolerance of the claims read from 'approximately' (claims_papers.py)",
    "0.05": "a fraction of the horizon in the onset claims, or Zhu et al.'s c_priv (a setting)",
    "95%": "the level of every interval (stats.LEVEL)",
    "10": "a setting of the job files (M, d or repetitions)",
    "20": "a setting of the job files (M or repetitions)",
    "25": "Zhou & Chowdhury's repetitions (a setting of the job files)",
}


@dataclass(frozen=True)
class Number:
    """One number of the prose: its line (1-based), text, context, reason
    (empty when it has none)."""

    line: int
    text: str
    context: str
    reason: str


def _spans(line: str, quoted: bool) -> tuple[list[tuple[int, int, str]], bool]:
    """Spans of a line where numbers are names or quotes, and whether a
    quote is still open at its end (`quoted`: open at its start)."""
    out = []
    for pat, why in (
        (r"`[^`]*`", "a code span (a job file, parameter or command)"),
        (r"!?\[[^\]]*\]\([^)]*\)", "a figure or link (its caption and target)"),
        (r"<!--.*?-->", "a comment"),
    ):
        out += [(m.start(), m.end(), why) for m in re.finditer(pat, line)]
    start = 0 if quoted else None
    for m in re.finditer('"', line):
        if start is None:
            start = m.start()
        else:
            out.append((start, m.end(), "a quote of a paper"))
            start = None
    if start is not None:
        out.append((start, len(line), "a quote of a paper"))
    return out, start is not None


def prose_numbers(lines: list[str], blocks) -> list[Number]:
    """Every number outside the generated blocks, with its reason."""
    inside: set[int] = set()
    for b in blocks:
        inside.update(range(b.begin, b.end + 1))
    fence = quoted = False
    out = []
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fence = not fence
            continue
        if i in inside or not line.strip():
            quoted = False
            continue
        spans, quoted = _spans(line, quoted)
        for m in NUMBER.finditer(line):
            why = "a code block" if fence else "a heading" if line.startswith("#") else ""
            why = why or next((w for a, b, w in spans if a <= m.start() < b), "")
            if not why and NAMED.search(line[: m.start()]):
                why = "a name (figure, experiment, semantics, issue)"
            why = why or REASONS.get(m.group(0), "")
            ctx = line[max(0, m.start() - 30) : m.end() + 30]
            out.append(Number(i + 1, m.group(0), ctx, why))
    return out

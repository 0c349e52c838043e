"""``devctl why``'s answer for a person: the verdict, one line per piece of evidence, the hint, the warnings.

Within one 80x24 screen (at most 14 pieces of evidence, 4 warnings), wrapped at spaces, not cut, while
the evidence fits (else each piece within its share of the lines left); every string from outside devctl
(the verdict quotes names and messages, the evidence log lines) passes ``escape`` first. The CLI
(``devctl why``) and the TUI (``:why POD``) print the same text.
"""

from __future__ import annotations

import re

from devctl.analyze.why import Evidence, WhyAnswer
from devctl.base.escape import escape

WIDTH = 80
MAX_EVIDENCE = 14  # with the verdict, the hint and a few warnings: one 24-line screen
MAX_WARNINGS = 4
HEIGHT = 24  # one screen


def _cut(text: str, width: int = WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _short_time(time: str | None) -> str:
    if not time:
        return "-"
    if len(time) >= 19 and time[4] == "-" and time[10] == "T":
        return f"{time[5:10]} {time[11:19]}"
    return time


# A log line's own header, shown in the time column already: klog's (``E1203 13:00:00.123456 4242 ``) and
# journalctl short-iso's (``2026-12-03T13:00:00+0000 host kubelet[4242]: ``).
_LOG_HEADER = re.compile(r"^(?:[IWEF]\d{4} [\d:.]+\s+\d+ |\d{4}-\d\d-\d\dT\S+ \S+ \S+\[\d+\]: )")


def _wrap(line: str, width: int, most: int | None = None) -> list[str]:
    """``line`` within ``width`` columns, wrapped at spaces and continued under its own indent plus four; at most
    ``most`` lines, the last then ending in ``…`` (the whole is in ``-o json``)."""
    import textwrap

    indent = " " * (len(line) - len(line.lstrip(" ")) + 4)
    out = [line] if len(line) <= width else textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False)
    out = out or [_cut(line, width)]
    if most is not None and len(out) > most:
        out = [*out[: most - 1], _cut(out[most - 1] + " …", width)]  # ends in "…" either way
    return out


def _evidence_text(e: Evidence) -> str:
    what = _LOG_HEADER.sub("", e.what) if e.source in ("kubelet-log", "journal") else e.what
    return f"  {_short_time(e.time):<14} {escape(e.source):<11} {escape(' '.join(what.split()))}"


def _evidence_lines(evidence: tuple[Evidence, ...], width: int, budget: int) -> list[str]:
    """Each piece wrapped whole when all fit in ``budget`` lines; else each within its even share of them."""
    whole = [_wrap(_evidence_text(e), width) for e in evidence]
    if sum(map(len, whole)) > budget and evidence:
        share = max(1, budget // len(evidence))
        whole = [_wrap(_evidence_text(e), width, share) for e in evidence]
    return [ln for lines in whole for ln in lines]


def why_table(answer: WhyAnswer, width: int = WIDTH, height: int = HEIGHT) -> str:
    """The answer for a person within ``width`` columns (the TUI gives its own) and, for as many pieces of
    evidence as ``MAX_EVIDENCE``, ``height`` lines: verdict, evidence, hint and warnings wrapped, not cut;
    every string from outside escaped."""
    head = _wrap(f"{answer.code}: {escape(' '.join(answer.verdict.split()))}", width)
    tail = _wrap(f"hint: {escape(answer.hint)}", width) if answer.hint else []
    shown = answer.errors[:MAX_WARNINGS]
    tail += [_cut(f"warning: {escape(e.source)}: {escape(' '.join(e.message.split()))}", width) for e in shown]
    if len(answer.errors) > MAX_WARNINGS:
        tail.append(f"warning: … {len(answer.errors) - MAX_WARNINGS} more (-o json)")
    evidence = answer.evidence[:MAX_EVIDENCE]
    more = [f"  … {len(answer.evidence) - MAX_EVIDENCE} more (-o json)"] if len(answer.evidence) > MAX_EVIDENCE else []
    budget = max(len(evidence), height - len(head) - len(tail) - len(more))
    return "\n".join([*head, *_evidence_lines(evidence, width, budget), *more, *tail]) + "\n"

"""``devctl why``'s answer for a person: the verdict, one line per piece of evidence, the hint, the warnings.

Within one 80x24 screen (at most 14 pieces of evidence, 4 warnings); every string from outside devctl
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


def _evidence_line(e: Evidence, width: int) -> str:
    what = _LOG_HEADER.sub("", e.what) if e.source in ("kubelet-log", "journal") else e.what
    return _cut(f"  {_short_time(e.time):<14} {escape(e.source):<11} {escape(' '.join(what.split()))}", width)


def why_table(answer: WhyAnswer, width: int = WIDTH) -> str:
    """The answer for a person within ``width`` columns (the TUI gives its own): verdict, evidence, hint,
    warnings; every string from outside escaped."""
    lines = [_cut(f"{answer.code}: {escape(' '.join(answer.verdict.split()))}", width)]
    lines += [_evidence_line(e, width) for e in answer.evidence[:MAX_EVIDENCE]]
    if len(answer.evidence) > MAX_EVIDENCE:
        lines.append(f"  … {len(answer.evidence) - MAX_EVIDENCE} more (-o json)")
    if answer.hint:
        lines.append(f"hint: {escape(answer.hint)}")
    shown = answer.errors[:MAX_WARNINGS]
    lines += [_cut(f"warning: {escape(e.source)}: {escape(' '.join(e.message.split()))}", width) for e in shown]
    if len(answer.errors) > MAX_WARNINGS:
        lines.append(f"warning: … {len(answer.errors) - MAX_WARNINGS} more (-o json)")
    return "\n".join(lines) + "\n"

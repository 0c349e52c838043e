"""What ``devctl doctor`` finds: a ``Finding`` with its ``Severity``, and the order severities are listed in."""

from __future__ import annotations

from dataclasses import dataclass

from devctl.base.errors import Word


class Severity(Word):
    """How bad a finding is: prints as its word (a table's SEVERITY, JSON's ``severity``, a metric's label)."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


# Most severe first: the order findings are listed in, and ``--fail-on``'s scale.
SEVERITIES = (Severity.ERROR, Severity.WARNING, Severity.INFO)


@dataclass(frozen=True)
class Finding:
    """Something wrong on the node, found by analysis (``devctl doctor``)."""

    severity: Severity
    code: str
    subject: str
    message: str
    hint: str = ""

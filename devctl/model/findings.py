"""What ``devctl doctor`` finds: a ``Finding`` with its severity."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    """Something wrong on the node, found by analysis (``devctl doctor``)."""

    severity: str  # "error" | "warning" | "info"
    code: str
    subject: str
    message: str
    hint: str = ""

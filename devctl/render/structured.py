"""JSON and YAML output: the contract's shapes, with the source errors under ``errors``.

The views are dataclasses whose plain form is the contract's JSON
(``devctl.serial.to_plain``); nothing here reshapes them, so JSON, YAML and
``--from`` snapshots can never drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from devctl.model import SourceError
from devctl.serial import to_plain


def document(body: Any, errors: Iterable[SourceError] | None = None) -> dict[str, Any]:
    """A view (a dataclass, or a dict of them) in plain form, with ``errors`` appended when given."""
    doc = dict(to_plain(body))
    if errors is not None:
        doc["errors"] = to_plain(tuple(errors))
    return doc


def to_json(doc: Any) -> str:
    return json.dumps(to_plain(doc), indent=2) + "\n"


def to_yaml(doc: Any) -> str:
    import yaml  # only `-o yaml` pays for PyYAML's import

    return yaml.safe_dump(to_plain(doc), sort_keys=False, default_flow_style=False, allow_unicode=True)

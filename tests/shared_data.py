"""Where the project's shared test data is: ``../shared/testdata`` beside the checkout, never a copy in it.

The vectors there were taken from public sources or written by real kubelets; the project keeps
only data it wrote itself. A test that needs them skips, saying why, when the directory is absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "testdata"


def shared(*parts: str) -> Path:
    """``../shared/testdata/<parts>``, whether or not it is there."""
    return SHARED.joinpath(*parts)


def needs_shared(*parts: str) -> pytest.MarkDecorator:
    """Skip (with the path in the reason) when ``../shared/testdata/<parts>`` is absent."""
    path = shared(*parts)
    return pytest.mark.skipif(
        not path.exists(), reason=f"shared test data not found at {path} (a checkout without ../shared)"
    )

"""What a final review of ``devctl fit`` found (full-HD): a wrong choice is one line, exit 2."""

from __future__ import annotations

from tests.helpers import devctl


def test_a_wrong_policy_is_one_line_exit_2(tmp_path):
    r = devctl(tmp_path, "fit", "--policy", "wrong", "cpu=1")
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines() == [
        "devctl: --policy: 'wrong' is not one of none, best-effort, restricted, single-numa-node"
    ]
    assert r.stdout == ""


def test_a_wrong_memory_policy_is_one_line(tmp_path):
    r = devctl(tmp_path, "fit", "--memory-policy", "dynamic", "cpu=1")
    assert r.exit_code == 2
    assert r.stderr.strip() == "devctl: --memory-policy: 'dynamic' is not one of None, Static"


def _answer(admit: bool | None, fits_with: tuple[object, ...] = ()) -> object:
    from devctl.core.admission import FitAnswer, FitPolicy

    policy = FitPolicy("restricted", "container", {}, "static", {}, "None", (0, 1), "config", "v1.34.1", "1.34")
    return FitAnswer(admit, "TopologyAffinityError" if admit is False else None, "no NUMA fits", policy, (), fits_with)  # type: ignore[arg-type]


def test_a_rejection_with_no_single_fix_says_so() -> None:
    """A REJECT whose search found no one change still ends with a "fits with" line that says none was found;
    an ADMIT has none."""
    from devctl.render.admission import fit_table

    rejected = fit_table(_answer(False)).splitlines()  # type: ignore[arg-type]
    assert rejected[-1] == "fits with: no single change found"
    assert "fits with" not in fit_table(_answer(True))  # type: ignore[arg-type]

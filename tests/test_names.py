"""One "did you mean" for every command: a resource by its last part or in another case, a close spelling."""

from __future__ import annotations

from devctl.base.names import likely, not_found

KNOWN = ["nvidia.com/gpu", "intel.com/sriov_netdevice", "hardware-vendor.example/foo"]


def test_a_resource_is_found_by_its_last_part_in_any_case_or_spelling():
    for asked in ("gpu", "GPU", "NVIDIA.com/gpu", "nvidia.com/gpus", "amd.com/gpu"):
        assert likely(asked, KNOWN) == "nvidia.com/gpu", asked
    assert likely("foo", KNOWN) == "hardware-vendor.example/foo"


def test_nothing_alike_is_no_guess_and_a_name_is_never_its_own_guess():
    assert likely("bar", KNOWN) is None
    assert likely("nvidia.com/gpu", KNOWN) is None
    assert not_found("resource", "bar", KNOWN) == "resource bar not found"
    assert not_found("resource", "gpu", KNOWN) == "resource gpu not found (did you mean nvidia.com/gpu?)"


def test_two_names_with_the_same_last_part_are_not_guessed_between_by_it():
    assert likely("gpu", ["nvidia.com/gpu", "amd.com/gpu"]) is None

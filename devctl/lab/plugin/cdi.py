"""Transient CDI spec files, one per prepared claim, as DRA drivers write them.

A DRA driver hands the kubelet CDI names in NodePrepareResources; the
container runtime resolves them against spec files in its CDI dirs. Drivers
such as NVIDIA's write one file per claim into the dynamic dir
(``/var/run/cdi/k8s.<driver>-claim_<claimUID>.yaml``, kind
``k8s.<driver>/claim``, devices ``<claimUID>-<device>``) and delete it at
unprepare, so the file exists exactly while the claim is prepared. The CDI
spec format is cncf-tags/container-device-interface's SPEC.md.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

CDI_VERSION = "0.6.0"
DYNAMIC_DIR = os.path.join("var", "run", "cdi")  # under the node root; wins over /etc/cdi


@dataclass(frozen=True)
class CdiDevice:
    """One device of a claim's spec: its CDI device name and the character device node it stands for."""

    name: str  # the part after '=' in vendor/class=name
    path: str  # the node inside the container (and on the host)
    major: int
    minor: int
    env: tuple[str, ...] = ()  # KEY=VALUE


def claim_kind(driver: str) -> str:
    """The CDI kind of a driver's claim specs: ``k8s.<driver>/claim``."""
    return f"k8s.{driver}/claim"


def claim_device_name(claim_uid: str, device: str) -> str:
    return f"{claim_uid}-{device}"


def qualified_name(driver: str, claim_uid: str, device: str) -> str:
    """The fully qualified CDI name the kubelet gets back: ``k8s.<driver>/claim=<claimUID>-<device>``."""
    return f"{claim_kind(driver)}={claim_device_name(claim_uid, device)}"


def claim_spec_path(root: str, driver: str, claim_uid: str) -> str:
    return os.path.join(root, DYNAMIC_DIR, f"k8s.{driver}-claim_{claim_uid}.yaml")


def env_key(text: str) -> str:
    """A string as an environment variable name: upper case, anything else an underscore."""
    return re.sub(r"[^A-Z0-9_]", "_", text.upper())


def write_claim_spec(root: str, driver: str, claim_uid: str, devices: Sequence[CdiDevice]) -> str:
    """Write the claim's spec file atomically and return its path."""
    import yaml

    spec = {
        "cdiVersion": CDI_VERSION,
        "kind": claim_kind(driver),
        "containerEdits": {"env": [f"DEVCTL_DRA_CLAIM_UID={claim_uid}"]},
        "devices": [
            {
                "name": d.name,
                "containerEdits": {
                    "env": list(d.env),
                    "deviceNodes": [
                        {"path": d.path, "hostPath": d.path, "type": "c", "major": d.major, "minor": d.minor}
                    ],
                },
            }
            for d in devices
        ],
    }
    path = claim_spec_path(root, driver, claim_uid)
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".tmp")  # not *.yaml: never read half-written
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            yaml.safe_dump(spec, f, sort_keys=False)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def remove_claim_spec(root: str, driver: str, claim_uid: str) -> bool:
    """Remove the claim's spec file; False when it was not there."""
    try:
        os.unlink(claim_spec_path(root, driver, claim_uid))
    except FileNotFoundError:
        return False
    return True

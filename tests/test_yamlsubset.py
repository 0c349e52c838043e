"""The CDI specs' fast YAML path: the same result as PyYAML's safe loader, or the safe loader itself."""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest
import yaml

from devctl.node import yamlsubset
from devctl.plugin.cdi import CdiDevice, write_claim_spec

GO_YAML = """\
cdiVersion: 0.5.0
kind: k8s.gpu.nvidia.com/claim
devices:
  - name: 3f1c-gpu-0
    containerEdits:
      env:
        - NVIDIA_VISIBLE_DEVICES=0
      deviceNodes:
        - path: /dev/nvidia0
          major: 195
          minor: 0
          permissions: rw
      mounts:
        - hostPath: /usr/lib
          containerPath: /usr/lib
          options:
            - ro
            - nosuid
containerEdits:
  env: []
"""

EDGE_CASES = [
    "",
    "a: 1\nb: 010\nc: 0x1f\nd: 1_000\ne: 1.5\nf: yes\ng: on\nh: ~\ni: null\nj:\nk: 2026-01-01\nl: 0.6.0\n",
    "a: 'quoted'\n",
    'a: "x: y"\n',
    "a: [1, 2]\n",
    "a: {b: 1}\n",
    "a: &x 1\nb: *x\n",
    "a: !!str 1\n",
    "a: |\n  text\n",
    "a: b # comment\n",
    "a:\n  b: 1\n c: 2\n",
    "- a\n- b:\n    c: 1\n  d: 2\n- - x\n",
    "a: b\n  c\n",
    "a: b: c\n",
    "a: 1\na: 2\n",
    "yes: 1\n",
    "---\na: 1\n",
    "a:\n- 1\n- 2\nb: 3\n",
    "a:\n\t- 1\n",
    "a: x\x00y\n",
    "a: x\u2028y\n",
    "plain scalar\n",
    "a: -1\nb: +2\nc: -\nd: - x\n",
    "a: http://x.example/y\n",
    "a:\n  - \n  -\n",
]


def _safe(text: str):
    try:
        return ("ok", yaml.safe_load(text))
    except yaml.YAMLError:
        return ("error", None)


def _fast(text: str):
    try:
        return ("ok", yamlsubset.load(text))
    except yaml.YAMLError:
        return ("error", None)


@pytest.mark.parametrize("text", [GO_YAML, *EDGE_CASES])
def test_every_text_loads_as_the_safe_loader_loads_it(text: str) -> None:
    assert _fast(text) == _safe(text)


def test_a_claim_spec_the_driver_writes(tmp_path) -> None:
    devices = [CdiDevice(f"uid-gpu-{i}", f"/dev/dra/d/gpu-{i}", 240, i, (f"E{i}=p/gpu-{i}",)) for i in range(3)]
    path = write_claim_spec(str(tmp_path), "gpu.example.com", "0f3c-uid", devices)
    text = Path(path).read_text()
    assert yamlsubset.load(text) == yaml.safe_load(text)
    assert yamlsubset._Lines(text).document() == yaml.safe_load(text)  # the fast path itself, no fallback


def _random_value(rng: random.Random, depth: int):
    kind = rng.randrange(6 if depth < 3 else 3)
    if kind == 0:
        return rng.randrange(-5, 400)
    if kind == 1:
        alphabet = string.ascii_letters + string.digits + "/=._-:, "
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
    if kind == 2:
        return rng.choice([True, False, None, 1.5, "0.6.0", "010", "yes", "~", ""])
    if kind == 3:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    keys = ["".join(rng.choice(string.ascii_letters) for _ in range(rng.randrange(1, 8))) for _ in range(4)]
    return {k: _random_value(rng, depth + 1) for k in keys}


def test_what_pyyaml_dumps_loads_back_the_same() -> None:
    rng = random.Random(7)
    for _ in range(300):
        doc = {"k": _random_value(rng, 0), "devices": [_random_value(rng, 1) for _ in range(3)]}
        for flow in (False, None):
            text = yaml.safe_dump(doc, default_flow_style=flow, sort_keys=False)
            assert _fast(text) == _safe(text), text

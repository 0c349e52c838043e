"""The CDI specs' fast YAML path: the same result as PyYAML's safe loader, or the safe loader itself."""

from __future__ import annotations

import random
import re
import string
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from devctl.fast import yamlsubset
from devctl.lab.plugin.cdi import CdiDevice, write_claim_spec

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


def _safe(text: str, loader: type = yaml.SafeLoader):
    try:
        return ("ok", yaml.load(text, Loader=loader))
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
    assert yamlsubset._scan(text) == yaml.safe_load(text)  # the fast path itself, no fallback


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


def test_the_copied_resolvers_are_pyyamls() -> None:
    """The fast path types scalars without importing PyYAML: its copy of the safe loader's resolvers must be exact."""
    theirs = {
        (first or "\0", tag, regexp.pattern)
        for first, resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items()
        for tag, regexp in resolvers
    }
    assert {(first, tag, pattern) for tag, pattern, chars in yamlsubset.RESOLVERS for first in chars} == theirs
    # The copy is compiled verbose; a pattern PyYAML compiles otherwise has no space or # for re.X to change.
    for resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.values():
        for _, regexp in resolvers:
            assert regexp.flags & re.X or not set(regexp.pattern) & set(" \t\n#")


def test_a_driver_spec_is_read_without_importing_pyyaml(tmp_path) -> None:
    devices = [CdiDevice(f"0f3c-gpu-{i}", f"/dev/dra/d/gpu-{i}", 240, i, (f"E{i}=p/gpu-{i}",)) for i in range(2)]
    text = Path(write_claim_spec(str(tmp_path), "gpu.example.com", "0f3c-uid", devices)).read_text()
    code = (
        "import sys; from devctl.fast import yamlsubset; "
        "yamlsubset._scan(sys.stdin.read()); print('yaml' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], input=text, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# Indents the subset does not take (PyYAML decides: an error, or a mapping at the wider column).
INDENTS = ["-  a: 1\n  b: 2\n", "-  a: 1\n   b: 2\n", "-   x\n", "a:\n  - 1\n - 2\n", " a: 1\n", "a: 1\n  b: 2\n"]


@pytest.mark.parametrize("text", INDENTS)
def test_odd_indents_load_as_the_safe_loader_loads_them(text: str) -> None:
    assert _fast(text) == _safe(text)


def test_hostile_edits_of_driver_specs_load_as_the_safe_loader_loads_them() -> None:
    """Each spec shape drivers write, cut, doubled, re-indented or with a character put in: the safe loader's answer."""
    go_v2 = yaml.safe_dump(yaml.safe_load(GO_YAML), sort_keys=True)  # sigs.k8s.io/yaml's: sorted, indentless
    # The loader the fast path hands unusual texts to: libyaml's, which reads a few (tabs) unlike PyYAML's own.
    fallback = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    rng = random.Random(11)
    alphabet = " -:#'\"[]{},?!&*|>\t\r\n\x00\u2028\ufeffaZ09._/=~"
    for base in (GO_YAML, go_v2):
        lines = base.splitlines(keepends=True)
        for _ in range(400):
            edit = list(lines)
            i = rng.randrange(len(edit))
            action = rng.randrange(5)
            if action == 0:
                del edit[i]
            elif action == 1:
                edit.insert(i, edit[rng.randrange(len(edit))])
            elif action == 2:
                edit[i] = " " * rng.choice((1, 2, 3)) + edit[i] if rng.random() < 0.5 else edit[i].lstrip(" ")
            else:
                at = rng.randrange(len(edit[i]))
                edit[i] = edit[i][:at] + rng.choice(alphabet) + edit[i][at:]
            text = "".join(edit)
            assert _fast(text) == _safe(text, fallback), text

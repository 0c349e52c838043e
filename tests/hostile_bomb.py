"""A YAML alias bomb ("billion laughs") and a child process that reads it under a memory bound (FX2's tests).

Nine anchors of nine aliases each: the parser builds nine small shared lists, but the innermost alias stands for
9^9 (387 million) strings, so anything that turns the value to text (``str``, ``repr``) takes gigabytes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

LEVELS = 9


def anchors(indent: str = "") -> str:
    """YAML lines defining anchors ``a`` … ``i``, each a flow list of nine aliases of the one before."""
    lines = [f'{indent}l0: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    names = "abcdefghi"
    for level in range(1, LEVELS):
        aliases = ",".join(f"*{names[level - 1]}" for _ in range(9))
        lines.append(f"{indent}l{level}: &{names[level]} [{aliases}]")
    return "\n".join(lines) + "\n"


# The child: address space capped at 1 GiB (the old code took 1.4-2.5 GB and now dies with MemoryError instead of
# taking the machine), runs CODE, prints its result and its own peak RSS (VmHWM) as one JSON line.
_CHILD = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
sys.path.insert(0, {repo!r})
{code}
# The peak of this process's own memory: VmHWM (ru_maxrss would carry the forking pytest worker's peak across exec).
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({{"result": result, "max_rss_kib": hwm}}))
"""


def run_bounded(code: str, timeout: float = 60.0) -> dict[str, object]:
    """Run ``code`` (which sets ``result``, JSON-able) in a child under the bound; its JSON answer."""
    repo = str(Path(__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, "-c", _CHILD.format(repo=repo, code=code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer

#!/usr/bin/env python3
"""Regenerate devctl/api/ from proto/ with grpcio-tools.

The protos are mapped under the virtual path ``devctl/api`` so that the generated
``*_pb2_grpc.py`` files import their messages as ``devctl.api.…`` (protoc's python
plugin writes absolute imports). ``--check`` regenerates into a temporary tree and
fails when it differs from what is committed, so CI catches stale code.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO = ROOT / "proto"
API = ROOT / "devctl" / "api"
HEADER = '"""Generated from proto/ by scripts/gen_proto.py. Do not edit."""\n'


def generate(out: Path) -> None:
    import grpc_tools
    from grpc_tools import protoc  # dev dependency only

    protos = sorted(p.relative_to(PROTO).as_posix() for p in PROTO.rglob("*.proto"))
    include = str(Path(grpc_tools.__file__).parent / "_proto")
    args = [
        "protoc",
        f"-Idevctl/api={PROTO}",
        f"-I{include}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *(f"{PROTO}/{p}" for p in protos),
    ]
    if protoc.main(args) != 0:
        sys.exit("protoc failed")
    api = out / "devctl" / "api"
    for directory in [api, *(p for p in api.rglob("*") if p.is_dir())]:
        (directory / "__init__.py").write_text(HEADER)


def differences(a: Path, b: Path) -> list[str]:
    cmp = filecmp.dircmp(a, b, ignore=["__pycache__"])
    out = [f"only in one tree: {n}" for n in cmp.left_only + cmp.right_only]
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    out += [f"differs: {a / n}" for n in mismatch + errors]
    for sub in cmp.common_dirs:
        out += differences(a / sub, b / sub)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if devctl/api is stale")
    check = parser.parse_args().check
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        fresh = Path(tmp) / "devctl" / "api"
        if check:
            diff = differences(fresh, API)
            if diff:
                sys.exit("devctl/api is stale; run scripts/gen_proto.py\n" + "\n".join(diff))
            print("devctl/api is fresh")
            return
        shutil.rmtree(API, ignore_errors=True)
        shutil.copytree(fresh, API)
        print(f"regenerated {API.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

"""Start-up stays light: the core imports no UI library, and `devctl --help` loads neither textual nor the stubs.

Checked in a fresh interpreter, because this test process has imported everything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import json, sys
from devctl.cli.{entry} import main
sys.argv = ["devctl", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit:
    pass
with open({out!r}, "w") as f:
    json.dump(sorted(sys.modules), f)
"""


def modules_after(args: list[str], tmp_path, env: dict[str, str] | None = None, entry: str = "app") -> set[str]:
    """The modules loaded after ``devctl ARGS`` through devctl.cli.ENTRY's main (start: the command's own entry)."""
    out = tmp_path / "modules.json"
    subprocess.run(
        [sys.executable, "-c", PROBE.format(out=str(out), entry=entry), json.dumps(args)],
        check=False,
        capture_output=True,
        timeout=60,
        env=env,
    )
    return set(json.loads(out.read_text()))


def heavy(modules: set[str], prefix: str) -> list[str]:
    return sorted(m for m in modules if m == prefix or m.startswith(prefix + "."))


def test_help_imports_neither_textual_nor_the_generated_stubs(tmp_path):
    modules = modules_after(["--help"], tmp_path)
    assert "devctl.cli.app" in modules
    assert heavy(modules, "textual") == []
    assert heavy(modules, "devctl.api") == []
    assert heavy(modules, "grpc") == []


def test_version_and_top_level_help_import_no_library_at_all(tmp_path):
    # The command's entry point answers these from the standard library (devctl.cli.start).
    for args in (["--version"], ["version"], ["--help"], ["-h"], []):
        modules = modules_after(args, tmp_path, env={**os.environ, "COLUMNS": "80"}, entry="start")
        assert "devctl.cli.start" in modules, args
        for library in ("typer", "click", "grpc", "google", "yaml", "devctl.model", "devctl.cli.app"):
            assert heavy(modules, library) == [], (args, library)


def test_ls_json_imports_no_table_renderer(tmp_path):
    # -o json writes the view as JSON: the table renderer and tabulate are for tables only.
    env = {**os.environ, "DEVCTL_ROOT": str(tmp_path / "empty")}
    for command in ("ls", "devices", "pods"):
        modules = modules_after([command, "-o", "json"], tmp_path, env=env, entry="start")
        assert "devctl.analyze" in modules
        for heavy_part in ("tabulate", "devctl.render.table", "textual", "rich", "yaml"):
            assert heavy(modules, heavy_part) == [], (command, heavy_part)


def test_ls_on_a_node_without_kubelet_imports_no_tabulate(tmp_path):
    # A table of plain text is written by devctl.render.table itself; tabulate only lays out non-ASCII cells.
    env = {**os.environ, "DEVCTL_ROOT": str(tmp_path / "empty")}
    for args in (["ls"], ["devices"], ["pods"], ["ls", "-o", "wide"]):
        modules = modules_after(args, tmp_path, env=env, entry="start")
        assert "devctl.render.table" in modules, args  # the warnings are written by it
        assert heavy(modules, "tabulate") == [], args


# Every module of the core as docs/architecture.md draws it; the packages are walked, so a new module is checked too.
CORE = """
import importlib, json, pkgutil, sys

core = []
for package in ("devctl.model", "devctl.fast", "devctl.node", "devctl.analyze", "devctl.core", "devctl.core.watch",
                "devctl.lab", "devctl.lab.plugin", "devctl.lab.sim"):
    core += [package, *(m.name for m in pkgutil.iter_modules(importlib.import_module(package).__path__, package + "."))]
for name in core:
    importlib.import_module(name)
    ui = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "typer", "rich", "tabulate"))
    if ui:
        print(json.dumps({"imported": core, "first to pull a UI library": name, "ui": ui}))
        break
else:
    print(json.dumps({"imported": core}))
"""


def test_core_modules_import_no_ui_library():
    out = subprocess.run([sys.executable, "-c", CORE], check=True, capture_output=True, text=True, timeout=60)
    said = json.loads(out.stdout)
    assert {"devctl.core.collect", "devctl.node.rpc", "devctl.lab.sim.node", "devctl.lab.plugin.server"} <= set(
        said["imported"]
    )
    assert "ui" not in said, said


def test_the_event_renderer_does_not_import_the_watch_machinery():
    # render sits above the core and names watch items from devctl.core.events, never from devctl.core.watch
    probe = "import json, sys, devctl.render.events; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True, timeout=60)
    modules = set(json.loads(out.stdout))
    assert "devctl.core.events" in modules
    assert heavy(modules, "devctl.core.watch") == []


def test_read_commands_on_a_root_without_a_kubelet_import_no_grpc(tmp_path):
    # No socket exists, so no RPC is made: a missing socket is known from a stat, and grpc, protobuf and the
    # generated stubs are left unloaded (most of a cold start's cost; docs/performance.md).
    env = {**os.environ, "DEVCTL_ROOT": str(tmp_path / "empty")}
    for args in (["ls"], ["devices"], ["pods"], ["ls", "-o", "json"]):
        modules = modules_after(args, tmp_path, env=env, entry="start")
        assert "devctl.core.collect" in modules, args
        for library in ("grpc", "google.protobuf", "devctl.api"):
            assert heavy(modules, library) == [], (args, library)


def test_analyze_loads_only_the_views_a_command_shows(tmp_path):
    env = {**os.environ, "DEVCTL_ROOT": str(tmp_path / "empty")}
    modules = modules_after(["ls"], tmp_path, env=env, entry="start")
    assert "devctl.analyze.inventory" in modules
    # nor, on a node without a DRA driver, the claims' analysis
    for view in (
        "devctl.analyze.topology",
        "devctl.analyze.plugins",
        "devctl.analyze.checkpoint",
        "devctl.analyze.claims",
        "devctl.analyze.claim_state",
    ):
        assert view not in modules, view
    # and every public name of devctl.analyze is still there, from the module that defines it
    probe = "import devctl.analyze as a; print(sorted(n for n in a.__all__ if getattr(a, n) is None))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_ls_on_a_dra_node_loads_no_claims_view_no_cdi_resolver_and_no_prepare(sim_node, tmp_path):
    # The default simulated node has a DRA driver with claims: `ls` counts its devices from the checkpoint and
    # pod-resources (docs/dra.md), and a read command never carries the code that prepares a claim.
    env = {**os.environ, "DEVCTL_ROOT": str(sim_node.root)}
    modules = modules_after(["ls"], tmp_path, env=env, entry="start")
    assert {"devctl.node.dra", "devctl.analyze.dra_inventory"} <= modules
    for unneeded in ("devctl.analyze.claims", "devctl.analyze.cdi", "devctl.node.dra_call", "devctl.api.dra"):
        assert heavy(modules, unneeded) == [], unneeded
    # -o wide shows NUMA nodes, through the CDI specs: the resolver then, still no claims view
    wide = modules_after(["ls", "-o", "wide"], tmp_path, env=env, entry="start")
    assert "devctl.analyze.cdi" in wide and "devctl.analyze.claims" not in wide

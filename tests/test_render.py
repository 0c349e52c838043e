"""Rendering: kubectl-like tables, the contract's JSON and YAML, and colour only where it belongs."""

from __future__ import annotations

import io
import json
import re

import yaml
from test_analyze import GPU, cp_entry, gpu_node, holding

from devctl import analyze
from devctl.model import SourceError
from devctl.render import structured
from devctl.render.style import paint, use_color, word
from devctl.render.table import (
    TableStyle,
    checkpoint_table,
    devices_table,
    names,
    plugins_table,
    pods_table,
    resources_table,
    topology_table,
    warnings,
)

PLAIN = TableStyle()


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def test_resources_table_reads_like_kubectl():
    text = resources_table(analyze.resources_view(gpu_node()), PLAIN)
    assert lines(text) == [
        ["NAME", "STATUS", "CAP", "ALLOC", "USED", "FREE", "BAD"],
        [GPU, "serving", "8", "7", "3", "4", "1"],
    ]
    assert "\033[" not in text


def test_wide_adds_columns_and_none_fills_empty_cells():
    node = gpu_node(plugins=())
    (header, row, *_) = lines(resources_table(analyze.resources_view(node), TableStyle(wide=True)))
    assert header[-4:] == ["NUMA", "PRE-START", "PREFERRED", "SOCKET"]
    assert row[1] == "no-plugin" and row[-3:] == ["<none>", "<none>", "<none>"]


def test_no_headers_and_quiet_names():
    rows = analyze.resources_view(gpu_node())
    assert lines(resources_table(rows, TableStyle(headers=False))) == [[GPU, "serving", "8", "7", "3", "4", "1"]]
    assert names(r.name for r in rows) == f"{GPU}\n"


def test_an_empty_view_renders_nothing():
    assert resources_table((), PLAIN) == ""
    assert pods_table((), PLAIN) == ""


def test_devices_table_shows_holders():
    node = gpu_node()
    rows = lines(devices_table(analyze.devices_view(node), PLAIN))
    assert rows[0] == ["RESOURCE", "ID", "HEALTH", "NUMA", "ALLOCATED-TO"]
    assert rows[1] == [GPU, "GPU-0", "Healthy", "0", "ml/train-0"]
    assert rows[8] == [GPU, "GPU-7", "Unhealthy", "1", "<none>"]
    wide = lines(devices_table(analyze.devices_view(node), TableStyle(wide=True)))
    assert wide[0][5:] == ["STATE", "PCI", "VENDOR", "MODEL", "DRIVER"]
    assert wide[1][4:6] == ["ml/train-0/main", "allocated"]


def test_pods_table_counts_devices_and_lists_ids_when_wide():
    node = gpu_node()
    rows = lines(pods_table(analyze.pods_view(node), PLAIN))
    assert rows[0] == ["NAMESPACE", "POD", "CONTAINER", "DEVICES", "HEALTHY", "CPUS"]
    # short names: 80 columns; no health given: unknown, never 0
    assert rows[2] == ["ml", "train-0", "main", "gpu=2", "?/2", "2-3"]
    health = {GPU: {"GPU-0": "Healthy", "GPU-1": "Unhealthy"}}
    assert lines(pods_table(analyze.pods_view(node), PLAIN, health))[2][4] == "1/2"
    wide = lines(pods_table(analyze.pods_view(node), TableStyle(wide=True), health))
    assert wide[0][6:] == ["MEMORY", "NUMA", "CLAIMS"]
    assert wide[2][3] == f"{GPU}=GPU-0,GPU-1(Unhealthy)" and wide[2][-2] == "0"


def test_a_table_wider_than_80_columns_cuts_the_named_columns_in_their_middle():
    from devctl.render.table import cut_middle, cut_path, grid

    rows = [["hardware-vendor.example/foo", "GPU-8f3e2a1c-0b7d-4e55-9c1a-77e0d2a4b6f1", "Unhealthy", "12"]]
    text = grid(["resource", "id", "health", "count"], rows, PLAIN, cut=(0, 1))
    header, row = text.splitlines()
    assert len(header) <= 80 and len(row) <= 80
    resource, device, health, count = row.split()
    assert resource == "hardware-vendor.example/foo"  # the widest column gives way first, only as far as needed
    assert device.startswith("GPU-8f3") and device.endswith("a4b6f1") and "…" in device
    assert (health, count) == ("Unhealthy", "12")  # never cut
    # -o wide keeps every value whole; a table that fits is not touched.
    assert "GPU-8f3e2a1c-0b7d-4e55-9c1a-77e0d2a4b6f1" in grid(
        ["a", "b", "c", "d"], rows, TableStyle(wide=True), cut=(0, 1)
    )
    assert grid(["a"], [["short"]], PLAIN, cut=(0,)) == "A\nshort\n"
    assert cut_middle("node-exporter-7xk2p", 10) == "node…7xk2p"
    assert cut_path("/very/long/dir/kubelet_internal_checkpoint", 35) == "/very/…/kubelet_internal_checkpoint"


def test_topology_table_has_nodes_shared_pool_and_alignment():
    text = topology_table(analyze.topology_view(gpu_node()), PLAIN)
    rows = lines(text)
    assert rows[0] == ["NODE", "CPUS", "ALLOCATABLE", "EXCLUSIVE", "SHARED", "MEMORY"]
    assert rows[1] == ["0", "0-15", "2-15", "2-3", "4-15", "64Gi"]
    assert ["NODE", "RESOURCE", "CAP", "USED", "FREE"] in rows and ["0", GPU, "4", "2", "2"] in rows
    assert "shared pool: 4-19,21-31" in text
    assert rows[-1] == ["ml", "train-0", "main", "yes", "0", "0", "<none>"]


def test_plugins_table_with_its_footer():
    node = gpu_node(kubelet_socket_present=True)
    text = plugins_table(analyze.plugins_view(node), PLAIN)
    assert lines(text)[1] == ["gpu.sock", GPU, "serving", "8", "0.5ms"]
    assert "kubelet socket: present (kubelet.sock)" in text  # in the plugins dir; wide gives the path
    assert "(/r/k/device-plugins/kubelet.sock)" in plugins_table(analyze.plugins_view(node), TableStyle(wide=True))
    assert "checkpoint:     absent (/r/k/device-plugins/kubelet_internal_checkpoint)" in text
    assert "kubelet socket" not in plugins_table(analyze.plugins_view(node), TableStyle(headers=False))


def test_checkpoint_table_says_the_verdict_and_the_old_format():
    from devctl.model import Checkpoint

    cp = Checkpoint("/cp", "v1", False, 1, 2, {GPU: ("GPU-0",)}, (cp_entry("u1", "main", ["GPU-0"]),))
    text = checkpoint_table(analyze.checkpoint_view(gpu_node(checkpoint=cp)), TableStyle(wide=True))
    assert "format:     v1 (the flat DeviceIDs of Kubernetes <= 1.19)" in text
    assert "checksum:   MISMATCH (stored 1, computed 2: the kubelet would start empty)" in text
    assert "registered: nvidia.com/gpu=1" in text
    row = lines(text)[-1]
    assert row[:4] == ["u1", "ml/train-0", "main", GPU] and "V=GPU-0" in row


def test_warnings_are_one_line_each():
    errors = [SourceError("plugin", "/a.sock: stale socket"), SourceError("checkpoint", "/cp: not JSON")]
    assert warnings(errors) == "warning: plugin: /a.sock: stale socket\nwarning: checkpoint: /cp: not JSON\n"


def test_json_is_the_contract_shape_with_errors():
    node = gpu_node(errors=(SourceError("checkpoint", "/cp: gone"),))
    doc = json.loads(structured.to_json(structured.document({"resources": analyze.resources_view(node)}, node.errors)))
    assert list(doc) == ["resources", "errors"]
    assert doc["errors"] == [{"source": "checkpoint", "message": "/cp: gone", "kind": "other", "subject": None}]
    assert doc["resources"][0]["capacity"] == 8
    topo = structured.document(analyze.topology_view(node), ())
    assert list(topo) == ["numa_nodes", "shared_pool", "alignment", "errors"]


def test_yaml_holds_the_same_data_as_json():
    doc = structured.document({"pods": analyze.pods_view(gpu_node())}, ())
    assert yaml.safe_load(structured.to_yaml(doc)) == json.loads(structured.to_json(doc))


def test_colour_only_on_a_tty_without_no_color():
    assert use_color(Tty(), env={}) is True
    assert use_color(Tty(), env={"NO_COLOR": "1"}) is False
    assert use_color(Tty(), env={"NO_COLOR": ""}) is True  # no-color.org: set and not empty
    assert use_color(io.StringIO(), env={}) is False
    assert paint("x", "red", False) == "x"
    assert word("stale", True) == "\033[31mstale\033[0m"


def test_coloured_tables_keep_their_columns_aligned():
    node = gpu_node(pods=(holding("a", "p", "c", GPU, ["GPU-7"], numa=1),))
    plain = resources_table(analyze.resources_view(node), PLAIN)
    coloured = resources_table(analyze.resources_view(node), TableStyle(color=True))
    assert "\033[32mserving\033[0m" in coloured
    strip = coloured.replace("\033[32m", "").replace("\033[31m", "").replace("\033[0m", "")
    assert strip == plain


def test_plain_is_serial_to_plain():
    from devctl.model.serial import to_plain

    node = gpu_node(errors=(SourceError("checkpoint", "/cp: gone"),))
    for view in (
        analyze.resources_view(node),
        analyze.devices_view(node),
        analyze.pods_view(node),
        analyze.topology_view(node),
        analyze.plugins_view(node),
        node,
    ):
        assert structured.plain(view) == to_plain(view)


def test_json_puts_one_row_per_line():
    doc = structured.document({"resources": analyze.resources_view(gpu_node())}, ())
    text = structured.to_json(doc)
    assert text.splitlines()[0:2] == ["{", '  "resources": [']
    assert text.splitlines()[2].startswith('    {"name": "nvidia.com/gpu", "socket": ')
    assert text.splitlines()[-2:] == ['  "errors": []', "}"]


def test_columns_are_three_spaces_apart_as_kubectl_prints_them():
    text = resources_table(analyze.resources_view(gpu_node()), PLAIN)
    assert text.splitlines() == [
        "NAME             STATUS    CAP   ALLOC   USED   FREE   BAD",
        "nvidia.com/gpu   serving   8     7       3      4      1",
    ]
    coloured = resources_table(analyze.resources_view(gpu_node()), TableStyle(color=True))
    assert "\033[" in coloured and re.sub("\033\\[[0-9;]*m", "", coloured) == text  # colour takes no width


def test_a_list_of_numbers_stays_on_one_line_in_json():
    text = structured.to_json(structured.document(analyze.topology_view(gpu_node())))
    assert '  "shared_pool": [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 21,' in text
    assert json.loads(text)["shared_pool"][:2] == [4, 5]


def _tabulate_grid(headers: list[str], rows: list[list[object]], style: TableStyle) -> str:
    """What grid printed when tabulate laid out every table: the reference its own writer must match."""
    from tabulate import DataRow, TableFormat, tabulate

    from devctl.render.grid import _cell

    body = [[_cell(v) for v in row] for row in rows]
    if not body:
        return ""
    if style.headers:
        body.insert(0, [h.upper() for h in headers])
    fmt = TableFormat(None, None, None, None, DataRow("", "   ", ""), DataRow("", "   ", ""), 0, None)
    text = tabulate(body, tablefmt=fmt, disable_numparse=True, stralign="left")
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def test_grid_prints_what_tabulate_printed_for_plain_odd_and_coloured_cells():
    from devctl.render.table import grid

    odd = [
        ["a", "", None, " padded ", "trailing   "],
        ["longer-name", "x\ny", "tab\there", "\x1b[2Jesc", 7],
        ["3.14", "0001", "-5", "1e3", True],
        ["ünïcode", "日本語", "\u202ebidi", "é", "z"],
        [paint("red", "red", True), word("Healthy", True), paint("", "red", True), "plain", paint("n", "dim", True)],
    ]
    cases = [
        (["one"], [["x"]]),
        (["a", "b"], [["1", "22"], ["333", "4"]]),
        (["h1", "h2", "h3", "h4", "h5"], odd),
        (["h1", "h2", "h3", "h4", "h5"], odd[:3] + odd[4:]),  # ASCII only: grid's own writer
        (["h1", "h2", "h3", "h4", "h5"], [odd[4], odd[0]]),
        (["a", "b", "c"], [["short"], ["x", "y", "z"]]),  # a short row
        (["a", "b"], [["1", "2", "3"]]),  # more cells than headers
        # Columns of strings only (checked a column at a time), one cell in each needing its escape
        (["a", "b", "c"], [["plain", " x ", "ok"], ["back\\slash", "", "new\nline"], ["\x1b[2J", "   ", "\x85"]]),
        (["x"], []),
    ]
    for headers, rows in cases:
        for style in (PLAIN, TableStyle(headers=False), TableStyle(color=True)):
            assert grid(headers, rows, style) == _tabulate_grid(headers, rows, style), (headers, rows, style)


def test_json_of_a_class_that_plain_met_first(tmp_path):
    """``plain`` and the JSON writer share the per-class field names: whichever meets a class first, both work."""
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Row:
        name: str
        count: int

    rows = (Row("a", 1), Row("b", 2))
    assert structured.plain(rows) == [{"name": "a", "count": 1}, {"name": "b", "count": 2}]
    text = "".join(structured.json_pieces({"rows": rows}))
    assert json.loads(text)["rows"] == [{"name": "a", "count": 1}, {"name": "b", "count": 2}]


def test_the_dra_checkpoint_line_fits_80_columns_with_its_file_name_whole() -> None:
    from devctl.analyze.claims import DraCheckpointSection
    from devctl.render.dra import dra_checkpoint_lines

    path = "/host/var/lib/kubelet-with-a-long-root-dir/some/more/depth/dra_manager_state"
    section = DraCheckpointSection(path, "v1", True, 1, 1)
    line = dra_checkpoint_lines(section, TableStyle()).splitlines()[0]
    assert len(line) <= 80 and line.endswith("/dra_manager_state)"), line
    assert path in dra_checkpoint_lines(section, TableStyle(wide=True))

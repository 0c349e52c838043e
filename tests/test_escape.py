"""No terminal injection: strings from plugins, the kubelet, files and the user reach the terminal escaped.

The escaping function by itself (every class of character, plain text untouched,
output that never holds a control, C1 or bidi character and decodes back to
the input), then the commands a person runs against a simulated node whose
plugin lists device IDs and health strings built to forge rows, clear the
screen, retitle the terminal, set the clipboard (OSC 52) and reorder text.
"""

from __future__ import annotations

import json
import logging
import random
import re
import sys
import unicodedata
from datetime import datetime, timezone
from pathlib import Path

import yaml
from badservers import stale_socket
from helpers import devctl, run_devctl
from test_watch_cli import start, watches  # noqa: F401  (watches: a fixture)

from devctl.base.escape import escape, escape_quoted
from devctl.base.escape import unescape as devctl_unescape
from devctl.cli.common import EscapingFormatter
from devctl.core.watch import WatchEvent
from devctl.lab.sim.thread import SimHandle
from devctl.model import Device, ErrorKind, SourceError
from devctl.render import structured
from devctl.render.events import EventTable, json_line
from devctl.render.style import paint
from devctl.render.table import TableStyle, grid, warnings

FOO = "hardware-vendor.example/foo"

# What the hostile-input probe put into device IDs.
HOSTILE = (
    "nl\nforged-row",
    "cr\rX",
    "cls\x1b[2J",
    "title\x1b]0;pwned\x07",
    "clip\x1b]52;c;ZXZpbA==\x07",
    "bidi\u202eabc",
    "nel\x85x",
    "markup[/",
    "[@click=app.quit]x",
)
EVIL_HEALTH = "\x1b[31mHealthy\x1b]0;pwned\x07"

# Every character a terminal acts on or reorders: C0, DEL, C1, bidi, line/paragraph separators.
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{BIDI}\u2028\u2029]")


def unescape(text: str) -> str:
    """Python's own reading of the escapes ``escape`` writes (non-ASCII printable text kept as it is)."""
    return text.encode("ascii", "backslashreplace").decode("unicode_escape")


def raw_controls(text: str, *, newlines: bool = True) -> list[str]:
    """The characters of ``text`` a terminal would act on (newlines allowed between lines when ``newlines``)."""
    return [c for c in text if UNSAFE.match(c) and not (newlines and c == "\n")]


# --- the function --------------------------------------------------------------------------------


def test_every_class_is_shown_visibly() -> None:
    assert escape("a\nb\rc\td") == "a\\nb\\rc\\td"
    assert escape("\x00\x07\x1b[2J") == "\\x00\\x07\\x1b[2J"
    assert escape("\x1b]52;c;ZXZpbA==\x07") == "\\x1b]52;c;ZXZpbA==\\x07"
    assert escape("\x7f") == "\\x7f"
    assert escape("\x80\x85\x9b\x9f") == "\\x80\\x85\\x9b\\x9f"
    for char in BIDI:
        assert escape(char) == f"\\u{ord(char):04x}"
    assert escape("\u2028\u2029") == "\\u2028\\u2029"
    assert escape("\udcff") == "\\udcff"  # a byte decoded with surrogateescape
    # A backslash in the data is doubled, so "\x1b" in the data and an escaped ESC differ.
    assert escape("\\x1b") == "\\\\x1b" != escape("\x1b")


def test_plain_text_comes_back_as_it_is() -> None:
    for text in ("GPU-0", "0000:3b:02.0", "nvidia.com/gpu", "", "ml/train-0/trainer", "Ünïcödé → 日本", "[/]"):
        assert escape(text) is text or escape(text) == text
    plain = "nvidia-gpu-0000:3b:00.0"
    assert escape(plain) is plain  # the fast path hands back the very string


def test_random_strings_never_keep_a_terminal_character_and_decode_back() -> None:
    # Property-style: characters drawn from every dangerous class and ordinary text alike.
    rng = random.Random(15)
    pool = [chr(c) for c in range(0x00, 0xA0)] + list(BIDI) + ["\u2028", "\u2029", "\\", "é", "→", "日", " ", "["]
    for _ in range(3000):
        text = "".join(rng.choice(pool) for _ in range(rng.randint(0, 24)))
        out = escape(text)
        assert not raw_controls(out, newlines=False), (text, out)
        assert all(unicodedata.category(c) != "Cc" for c in out)
        assert unescape(out) == text  # unambiguous: the output says exactly what was there
        assert devctl_unescape(out) == text  # what the TUI does with its watch child's escaped lines


def test_json_and_yaml_escape_c1_and_bidi_and_parse_back_to_the_same_strings() -> None:
    values = [*HOSTILE, EVIL_HEALTH, "x\x7fy", "\u2028", "\x9b31m", "ok → fine", "long " * 30 + "\u202e" + " tail" * 20]
    doc = {"rows": [{"id": v, v: 1} for v in values], "errors": []}
    text = structured.to_json(doc)
    assert not raw_controls(text)
    assert "\\u0085" in text and "\\u202e" in text and "\\u009b" in text
    assert json.loads(text) == doc
    assert "→" in text  # other non-ASCII text stays readable
    text = structured.to_yaml(doc)
    assert not raw_controls(text)
    assert yaml.safe_load(text) == doc
    # A newline in a value is an escape on the value's one line, not a line of the document.
    assert '"nl\\nforged-row"' in text
    assert escape_quoted("plain ascii") == "plain ascii"


def test_a_table_cell_with_a_newline_stays_one_row_and_colour_codes_still_work() -> None:
    style = TableStyle(color=True)
    text = grid(["id", "health"], [[i, paint(EVIL_HEALTH, "red", True)] for i in HOSTILE], style)
    lines = text.splitlines()
    assert len(lines) == 1 + len(HOSTILE)
    # devctl's own colour codes are the only ESC bytes: around the health word, never inside a cell's data.
    assert all(line.count("\x1b") == 2 for line in lines[1:])
    assert all(line.endswith("\x1b[0m") for line in lines[1:])
    assert "\\x1b[31mHealthy\\x1b]0;pwned\\x07" in lines[1]
    plain = re.sub("\x1b\\[[0-9;]*m", "", text)
    assert not raw_controls(plain)


def test_warnings_and_watch_lines_are_one_line_each() -> None:
    err = SourceError("plugin", "/p/evil\x1b]0;pwned\x07.sock: connection refused\nforged", ErrorKind.STALE)
    out = warnings([err])
    assert out == "warning: plugin: /p/evil\\x1b]0;pwned\\x07.sock: connection refused\\nforged\n"
    table = EventTable()
    t = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)
    for device in HOSTILE:
        event = WatchEvent(t, "evil\nres", "/p/x.sock", "health", device, "Healthy", EVIL_HEALTH, 3, 2)
        line = table.line(event)
        assert "\n" not in line and not raw_controls(line)
        assert escape(device) in line
        obj = json_line(event)
        assert not raw_controls(obj) and json.loads(obj)["device"] == device


# --- the commands, against a real simulated node ----------------------------------------------------


def hostile_node(sim_node: SimHandle) -> None:
    """The foo plugin of the default scenario lists every hostile ID, and foo-1 reports a hostile health."""
    for device_id in HOSTILE:
        sim_node.add_device(FOO, Device(device_id))
    sim_node.set_health(FOO, "foo-1", EVIL_HEALTH)


def test_devices_ls_and_call_print_each_hostile_id_on_its_own_escaped_row(sim_node: SimHandle) -> None:
    hostile_node(sim_node)
    r = devctl(sim_node.root, "devices", FOO)
    assert r.exit_code == 0, r.stderr
    assert not raw_controls(r.stdout) and not raw_controls(r.stderr)
    rows = r.stdout.splitlines()
    assert len(rows) == 1 + 2 + len(HOSTILE)  # the header, foo-0 and foo-1, one row per hostile device
    # The default table cuts long IDs in their middle to fit 80 columns; the wide one shows each whole.
    rows = devctl(sim_node.root, "devices", FOO, "-o", "wide").stdout.splitlines()
    for device_id in HOSTILE:
        assert sum(escape(device_id) in row for row in rows) == 1
    assert "\\x1b[31mHealthy\\x1b]0;pwned\\x07" in next(row for row in rows if " foo-1 " in row)

    for args in (["ls"], ["ls", "-o", "wide"], ["devices", "-o", "wide"], ["devices", "-q"], ["plugins", "-o", "wide"]):
        r = devctl(sim_node.root, *args)
        assert r.exit_code == 0, (args, r.stderr)
        assert not raw_controls(r.stdout + r.stderr), args
    assert "nl\\nforged-row" in devctl(sim_node.root, "devices", "-q").stdout.splitlines()

    r = devctl(sim_node.root, "call", FOO, "list")
    assert r.exit_code == 0, r.stderr
    assert not raw_controls(r.stdout + r.stderr)
    assert len(r.stdout.splitlines()) == 1 + 2 + len(HOSTILE)


def test_json_and_yaml_of_hostile_ids_parse_back_to_the_originals(sim_node: SimHandle) -> None:
    hostile_node(sim_node)
    for args in (["devices", FOO, "-o", "json"], ["call", FOO, "list", "-o", "json"]):
        r = devctl(sim_node.root, *args)
        assert r.exit_code == 0, r.stderr
        assert not raw_controls(r.stdout), args
        assert "\\u0085" in r.stdout and "\\u202e" in r.stdout
    devices = devctl(sim_node.root, "devices", FOO, "-o", "json").json["devices"]
    assert {d["id"] for d in devices} >= set(HOSTILE)
    assert next(d["health"] for d in devices if d["id"] == "foo-1") == EVIL_HEALTH
    r = devctl(sim_node.root, "devices", FOO, "-o", "yaml")
    assert not raw_controls(r.stdout)
    assert {d["id"] for d in yaml.safe_load(r.stdout)["devices"]} >= set(HOSTILE)


def test_watch_lines_carry_hostile_ids_escaped(sim_node: SimHandle, watches) -> None:  # noqa: F811
    w = start(watches, sim_node.root, "watch", FOO)
    w.line()  # the header
    w.line()  # the snapshot
    sim_node.add_device(FOO, Device("title\x1b]0;pwned\x07\nforged"))
    sim_node.set_health(FOO, "foo-1", EVIL_HEALTH)
    _, added = w.line()
    _, health = w.line()
    assert "added" in added and "title\\x1b]0;pwned\\x07\\nforged" in added
    assert "health" in health and "Healthy→\\x1b[31m" in health  # escaped, then cut to the CHANGE column
    assert not raw_controls(added + health)


def test_watch_once_and_warnings_escape_a_hostile_socket_name(sim_node: SimHandle) -> None:
    hostile_node(sim_node)
    evil = stale_socket(str(Path(sim_node.paths.plugins_dir) / "e\x1b]0;pwned\x07\u202e.sock"))
    r = run_devctl("watch", "--once", root=sim_node.root)
    assert r.exit_code == 0, r.stderr
    assert not raw_controls(r.stdout) and not raw_controls(r.stderr)
    assert "e\\x1b]0;pwned\\x07\\u202e.sock" in r.stderr
    r = devctl(sim_node.root, "ls")
    assert r.exit_code == 0
    assert not raw_controls(r.stderr)
    assert r.stderr.count("\n") == len(r.stderr.splitlines())  # every warning is one line
    assert f"warning: plugin: {escape(evil)}" in r.stderr


def test_arguments_the_user_typed_are_echoed_escaped(sim_node: SimHandle) -> None:
    typo = "hardware-vendor.example/fo\x1b]0;pwned\x07"
    r = devctl(sim_node.root, "call", typo, "list")
    assert r.exit_code != 0
    assert not raw_controls(r.stderr)
    assert "fo\\x1b]0;pwned\\x07" in r.stderr and "did you mean hardware-vendor.example/foo?" in r.stderr
    for args in (
        ["get", "pod\x1b[2J", "-n", "ns\u202e"],
        ["devices", "example.com/x\nforged"],
        ["ls", "example.com/\x9bx"],
        ["call", "--socket", "/nonexistent/\x1b]52;c;ZXZpbA==\x07.sock", "list"],
    ):
        r = devctl(sim_node.root, *args)
        assert r.exit_code != 0, args
        assert not raw_controls(r.stdout + r.stderr), (args, r.stderr)
        assert len(r.stderr.splitlines()) >= 1


def test_usage_errors_echo_what_was_typed_escaped() -> None:
    # click writes "No such option: X" with X as typed; a value it quotes itself goes through repr.
    for args in (["ls", "--bogus\x1b]0;pwned\x07\u202e"], ["--x\x1b[2J"], ["plugin", "add", "--y\x85"]):
        r = run_devctl(*args)
        assert r.exit_code == 2, (args, r.stderr)
        assert not raw_controls(r.stderr), (args, r.stderr)
        assert r.stderr.splitlines()[-1].startswith("Error: No such option: ")
    r = run_devctl("ls", "--bogus\x1b]0;pwned\x07\u202e")
    assert r.stderr.splitlines()[-1] == "Error: No such option: --bogus\\x1b]0;pwned\\x07\\u202e"


def test_log_lines_escape_the_message_and_keep_the_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("devctl", logging.WARNING, __file__, 1, "plugin %s said %s", None, sys.exc_info())
    record.args = ("evil\x1b]0;pwned\x07", "line\nforged")
    text = EscapingFormatter("devctl: %(message)s").format(record)
    first, *rest = text.splitlines()
    assert first == "devctl: plugin evil\\x1b]0;pwned\\x07 said line\\nforged"
    assert rest[0] == "Traceback (most recent call last):" and rest[-1] == "ValueError: boom"
    assert record.getMessage() == "plugin evil\x1b]0;pwned\x07 said line\nforged"  # the record itself is untouched

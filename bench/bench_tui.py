"""Does the TUI answer a key within 50 ms and switch views within 100 ms while 10,000 devices change 20 times a second?

A plugin in its own process lists 10,000 devices and sends the full list 20
times a second (every ListAndWatch message is the whole list), each time with
one device's health flipped. The app runs in this process, driven by textual's
Pilot (headless, 100x30), wired as ``devctl tui`` wires it: ``NodeFeed`` over
the plugins dir, so it polls with ``collect`` and follows the plugin with
``devctl.core.watch``, and its event log grows by 20 lines a second.

key latency = from posting the key event to the app until the first frame the
app renders after the key took effect (the cursor moved, the view changed).
Frames are seen by wrapping ``App._display``, which textual calls with every
rendered update, also when headless. loop lag = how late a 20 ms sleep on the
app's event loop wakes up: the time a key would wait before it is even read.

A second node has four DRA drivers of 1,000 devices each (``devctl.lab.plugin.dra``,
in a process of their own), each sending its full health list 20 times a second
with one device flipped (issue 9: the key answer stays under 100 ms there).

The plugin here keeps one protobuf message, flips one device in place and
sends it, so its own cost stays out of this process and off the figures.
There is no kubelet: pod-resources and the checkpoint are missing and show as
errors, which is what ``devctl tui`` on a node without a kubelet shows too.

    python bench/bench_tui.py                          # print the figures
    python bench/bench_tui.py --json out.json          # and write them for `make bench`
    python bench/bench_tui.py --write docs/performance-tui.md
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from devctl.node.checkpoint import write_checkpoint

RESOURCE = "example.com/dev"
SOCKET = "bench-dev.sock"
DRA_DRIVERS = 4
DRA_DEVICES = 1_000
LAG_TICK = 0.02  # the loop-lag probe sleeps this long, again and again
VIEW_KEYS = {"devices": 2, "events": 5}


# --- the plugin, in its own process -------------------------------------------------------------


def device_ids(devices: int) -> list[str]:
    return [f"dev-{i}" for i in range(devices)]


def serve_plugin(plugins_dir: str, devices: int, rate: float) -> None:
    """Serve ListAndWatch and GetDevicePluginOptions; send the full list ``rate`` times a second."""
    import grpc

    from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp
    from devctl.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc

    message = dp.ListAndWatchResponse(
        devices=[
            dp.Device(ID=name, health="Healthy", topology=dp.TopologyInfo(nodes=[dp.NUMANode(ID=i % 2)]))
            for i, name in enumerate(device_ids(devices))
        ]
    )
    changed = asyncio.Condition()
    version = 0

    class Busy(dp_grpc.DevicePluginServicer):
        async def GetDevicePluginOptions(self, request, context):
            return dp.DevicePluginOptions()

        async def ListAndWatch(self, request, context):
            seen = -1
            while True:
                async with changed:
                    await changed.wait_for(lambda s=seen: version != s)
                    seen = version
                yield message

    async def flip() -> None:
        nonlocal version
        rng = random.Random(1)
        while True:
            await asyncio.sleep(1 / rate)
            d = message.devices[rng.randrange(devices)]
            d.health = "Unhealthy" if d.health == "Healthy" else "Healthy"
            async with changed:
                version += 1
                changed.notify_all()

    async def main() -> None:
        server = grpc.aio.server()
        dp_grpc.add_DevicePluginServicer_to_server(Busy(), server)
        server.add_insecure_port(f"unix:{plugins_dir}/{SOCKET}")
        await server.start()
        await flip()

    asyncio.run(main())


def serve_dra(root: str, drivers: int, devices: int, rate: float) -> None:
    """Serve ``drivers`` DRA drivers (registration, DRA and health services) of ``devices`` devices each.

    Each sends its full health list ``rate`` times a second, one device flipped each time.
    """
    from devctl.lab.plugin.dra import DraDevice, DraDriver, DraSpec
    from devctl.model import HEALTHY, UNHEALTHY

    async def main() -> None:
        served = []
        for i in range(drivers):
            spec = DraSpec(
                driver=f"gpu{i}.example.com",
                pool="bench",
                devices=tuple(DraDevice(name=f"dev-{j}", numa_nodes=(j % 2,)) for j in range(devices)),
            )
            driver = DraDriver(spec, os.path.join(root, "var/lib/kubelet"), root=root)
            await driver.start()
            served.append(driver)
        rng = random.Random(3)
        while True:
            await asyncio.sleep(1 / rate)
            for driver in served:
                name = f"dev-{rng.randrange(devices)}"
                current = next(d for d in driver.devices if d.name == name)
                driver.set_health(name, UNHEALTHY if current.health == HEALTHY else HEALTHY)

    asyncio.run(main())


# --- the app, in this process --------------------------------------------------------------------


@dataclass
class Figures:
    down: list[float]
    switch: list[float]
    lag: list[float]
    # CPU time of the app's thread from posting a key to its frame: what the key cost, whatever the load
    down_cpu: list[float]
    switch_cpu: list[float]
    # view switches that overlapped a rebuild in its thread (which holds the interpreter lock most of the time)
    switch_in_rebuild: list[float]
    gc_full: list[float]  # the pause of every full garbage collection of the app's process meanwhile
    rebuilds: int
    rebuild_seconds: list[float]
    log_lines: int
    seconds: float
    cpu: float


async def measure(
    plugins_dir: str, devices: int, seconds: float, *, watch_subprocess: bool, switches: bool = True
) -> Figures:
    """Press keys for ``seconds`` once the devices view shows a resource with ``devices`` devices."""
    from textual import events

    from devctl.node.paths import resolve_paths
    from devctl.tui.app import make_app
    from devctl.tui.feeds import NodeFeed
    from devctl.tui.source import NodeSource
    from devctl.tui.widgets.events import EventsPane
    from devctl.tui.widgets.table import RowTable

    root = str(Path(plugins_dir).parents[3])
    paths = resolve_paths(root=root, plugins_dir=plugins_dir, env={})
    app = make_app(NodeFeed(paths, 5.0, watch_subprocess=watch_subprocess), label="bench")

    frames: list[Callable[[], bool]] = []
    overlapped = [False]  # whether the key being measured overlapped a rebuild
    collecting: list[float] = []
    full: list[float] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if info["generation"] == 2:
            if phase == "start":
                collecting[:] = [time.perf_counter()]
            elif collecting:
                full.append(time.perf_counter() - collecting[0])

    rendered = asyncio.Event()
    display = app._display

    def on_display(screen: object, renderable: object) -> None:
        display(screen, renderable)
        if frames and frames[0]():
            rendered.set()

    app._display = on_display  # type: ignore[method-assign]

    async def press(key: str, done: Callable[[], bool]) -> tuple[float, float]:
        """Post the key as the terminal driver would; the time until a frame shows its effect, and its CPU time.

        The app runs on this thread's event loop, so this thread's CPU time is the app's.
        """
        overlapped[0] = app.screen.query_one(NodeSource).building
        frames[:] = [done]
        rendered.clear()
        started, cpu = time.perf_counter(), time.thread_time()
        event = events.Key(key, None)
        event.set_sender(app)
        app.post_message(event)
        await asyncio.wait_for(rendered.wait(), 10)
        frames.clear()
        overlapped[0] = overlapped[0] or app.screen.query_one(NodeSource).building
        return time.perf_counter() - started, time.thread_time() - cpu

    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        deadline = time.monotonic() + 60
        while not (screen.view and len(screen.view.devices.get(screen.resource or "", ())) == devices):
            if time.monotonic() > deadline:
                raise SystemExit("the app never showed the plugin's devices")
            await asyncio.sleep(0.1)
        await pilot.press("2")
        table = screen.query_one("#devices-table", RowTable)
        node_source = screen.source
        log = screen.query_one(EventsPane)
        await asyncio.sleep(1.0)  # let the stream settle

        down: list[float] = []
        switch: list[float] = []
        switch_in_rebuild: list[float] = []
        down_cpu: list[float] = []
        switch_cpu: list[float] = []
        builds: list[float] = []
        lag: list[float] = []

        async def probe() -> None:
            loop = asyncio.get_running_loop()
            while True:
                asked = loop.time()
                await asyncio.sleep(LAG_TICK)
                lag.append(loop.time() - asked - LAG_TICK)

        lagging = asyncio.ensure_future(probe())
        gc.callbacks.append(on_gc)
        rebuilds, lines = node_source.rebuilds, log.lines
        cpu = time.process_time()
        started = time.monotonic()
        rng = random.Random(2)
        while time.monotonic() - started < seconds:
            before = table.cursor_key
            key = "down" if len(down) % 40 < 20 else "up"  # 20 rows down, 20 back up, and again
            took, cost = await press(key, lambda b=before: table.cursor_key != b)
            down.append(took)
            down_cpu.append(cost)
            if switches and len(down) % 5 == 0:  # now and then to the event log and back
                for view in ("events", "devices"):
                    took, cost = await press(str(VIEW_KEYS[view]), lambda v=view: screen.active == v)
                    switch.append(took)
                    if overlapped[0]:
                        switch_in_rebuild.append(took)
                    switch_cpu.append(cost)
            builds.append(node_source.last_build_seconds)
            await asyncio.sleep(rng.uniform(0.05, 0.25))
        elapsed = time.monotonic() - started
        lagging.cancel()
        gc.callbacks.remove(on_gc)
        return Figures(
            down=down,
            switch=switch,
            lag=lag,
            down_cpu=down_cpu,
            switch_cpu=switch_cpu,
            switch_in_rebuild=switch_in_rebuild,
            gc_full=list(full),
            rebuilds=node_source.rebuilds - rebuilds,
            rebuild_seconds=builds,
            log_lines=log.lines - lines,
            seconds=elapsed,
            cpu=time.process_time() - cpu,
        )


# --- report --------------------------------------------------------------------------------------

HISTORY = """
## What it took

The first version, everything on the app's event loop, answered a cursor key in 245 ms at the median and in more
than 400 ms at p99 on this machine. In order of what each step bought:

1. Following 10,000 devices at 20 lists a second takes about 60% of a core (parsing, comparing each device with the
   last list, diffing; see performance-watch.md). In the app's process it shared one interpreter lock with the
   keyboard; in a `devctl watch -o json` child it has a core of its own, and the app reads a few JSON lines a second.
   Polling (`collect`) and the rebuilds run in threads, off the event loop.
2. textual's `@work` decorator describes each worker by the repr of its arguments: for a rebuild, a whole snapshot,
   100-200 ms on the event loop every time. The rebuild worker now has a description of its own.
3. The rows of every table are formatted in the rebuild thread (`Presenter`), reusing the rows of devices that did
   not change; a table takes them with their column widths measured, so showing a new view costs next to nothing.
   The widths of 10,000 rows are measured column by column (`zip`, `map`, `max` run in C), 3x faster than cell by cell.
4. The event log reaches its table in batches (at most 4 a second while on screen, none while hidden): each batch
   changes the table's size, and every change of size lays the whole screen out again.
5. A rebuild waits until a burst is over (50 ms of quiet), but no longer than 300 ms, and never comes sooner than
   three times the last one took: the rebuild thread takes at most a quarter of the interpreter.
6. The table draws only the rows on screen; textual's DataTable took 3.6 s to take 10,000 rows on this machine.
7. No update lays the whole screen out any more. `Static.update` lays out the screen by default, and every rebuild
   put new text in the status line and the devices title: a layout and a render of the whole screen once a second.
   One-line text now only repaints its line (`widgets/text.py`). A table compares the rows on screen before and
   after an update and repaints only the lines whose row changed: a device out of sight costs nothing, a cursor
   key two lines and the header. A scroll happens in the same frame as the cursor move, not one frame later.
   The main thread's CPU for a cursor key went from 11.8 to 5.8 ms on the loaded machine and from 7.9 to 4.4 ms
   at load 3 (`time.thread_time`); in bench_tui at load 2-4, from 7.7-9.1 to 5.3-5.9 ms.
8. The table has no vertical scroll bar: textual draws it line by line with styles blended for each, again at every
   restyle (focus moves on every view switch). On the loaded machine (load 15) a view switch's CPU went from
   57-63 ms to 39-44 ms with it gone, but at load 3 the same harness shows 31.3 ms before all of 3-8 and 29.8 ms
   after: most of that was the loaded machine, and a view switch stays about 30-45 ms of CPU, nearly all of it
   textual's. The header says where the cursor is instead (`1,234/10,000`) when the rows do not fit.
9. More or fewer rows no longer lay the screen out: textual lays out the whole screen whenever a widget's virtual
   size changes, so the event log on screen, growing four times a second at 20 updates/s, laid out and rendered
   the whole screen four times a second. Scrolling is now always on (the bar has no width), so only the table's
   own lines are repainted (20 appends: 20 layouts before, none after).

10. A view switch moves the focus from one table to another, and textual restyles a widget and its component
    classes whenever its focus changes, in case a `:focus` or `:blur` rule applies: 3 ms a table. The only such
    rule was the cursor's look without focus; it is a component class of its own now, chosen where the cursor's
    line is drawn, and a change of focus repaints that line. textual's Footer, which built a widget per key on
    every focus change, had already been replaced by one line of text.
11. The views are no longer in a TabbedContent, which drew a widget per tab, an underline that moves, and a
    content switcher around panes in panes (four levels of containers laid out and drawn at every switch), and
    restyled the two tabs that changed. A `ContentSwitcher` holds the views, under one line of text naming
    them (`widgets/viewbar.py`; a click on a name shows that view; the views get one more line).
12. Python's garbage collector: a full collection holds the interpreter lock while it walks every tracked object,
    and with 10,000 devices, each rebuild making tens of thousands of new ones, one came every two seconds or so
    and took 100-540 ms (6 to 8 in a 15 s run at load 5-8; on whichever thread allocated, the rebuild thread
    mostly): a key that came meanwhile waited for all of it. While the app runs, what lives once the first view
    is on screen is frozen out of every later collection (`gc.freeze`: modules, textual's widgets and styles)
    and full collections come ten times rarer, but at least every 30 s (`tui/interpreter.py`; with the rarer
    ones alone, an app with little to do grew its memory faster: bench_soak, 4 minutes, RSS +5.6 % against
    +3.3 %). A 15 s run has at most one now.
13. The rebuild thread shares the interpreter lock with the event loop. Split by whether a rebuild ran while the
    switch was measured, switches that overlapped one took 1.2 to 2.5 times as long at the median (load 10-15);
    Python hands the lock to a waiting thread only after its switch interval, 5 ms, and the loop lets it go at
    every `select`. While the app runs the interval is 1 ms. The rebuild thread's share stays capped (step 5),
    so about a quarter of the switches still overlap one; what a rebuild does over 10,000 devices is mostly
    `devctl.analyze` (`devices_view`, `topology_view`, `with_hardware`: three quarters of it), which this work
    did not make incremental.

CPU of the app's thread per view switch (`time.thread_time`, a 10,000-device snapshot shown without live updates,
30 switches each way), before steps 10-13 and after, alternated at load 12-19: 34.5 and 45.2 ms before, 25.1 and
21.1 ms after; step 10 alone took it from 41-44 to 30-31 ms and step 11 to 18-19 ms (load 8-13). Switching views
is still mostly textual's work: a layout and a render of the whole screen.

Before (the code these steps started from) and after, the same bench alternated on the same machine (2 CPUs
shared with other work): runs 1 and 2 at load 12-16 (after: steps 3, 7 and 8), runs 3 to 5 at load 1.5-4 (after:
every step). The last column but one is the CPU of the app's thread per key / per view switch at the median.

| | key p50 | key p95 | switch p50 | switch p95 | loop lag p99 | CPU key / switch | DRA key p95 |
|---|---|---|---|---|---|---|---|
| before (run 1, load 12.4) | 68.2 ms | 191.3 ms | 656.7 ms | 1348.7 ms | 667.3 ms | | 104.5 ms |
| after (run 1, load 13.6) | 15.8 ms | 100.1 ms | 331.2 ms | 588.4 ms | 338.3 ms | | 35.0 ms |
| before (run 2, load 16.2) | 34.5 ms | 263.0 ms | 221.4 ms | 325.5 ms | 264.9 ms | | 86.7 ms |
| after (run 2, load 13.5) | 6.7 ms | 95.3 ms | 109.2 ms | 276.7 ms | 126.5 ms | | 51.6 ms |
| before (run 3, load 2.0) | 10.6 ms | 39.9 ms | 51.8 ms | 184.2 ms | 76.6 ms | 7.7 / 36.9 ms | 29.9 ms |
| after (run 3, load 2.0) | 9.5 ms | 54.6 ms | 108.8 ms | 211.7 ms | 123.7 ms | 5.3 / 40.3 ms | 16.0 ms |
| after (run 4, load 4.0) | 10.9 ms | 37.0 ms | 85.9 ms | 269.7 ms | 118.7 ms | 5.9 / 47.0 ms | 13.8 ms |
| before (run 4, load 3.6) | 13.6 ms | 45.0 ms | 75.0 ms | 229.5 ms | 99.2 ms | 9.1 / 40.3 ms | 12.1 ms |
| after (run 5, load 1.8) | 4.5 ms | 25.3 ms | 41.8 ms | 59.4 ms | 67.8 ms | 4.3 / 28.0 ms | 7.8 ms |
| before (run 5, load 1.5) | 11.4 ms | 114.3 ms | 55.4 ms | 121.6 ms | 83.7 ms | 9.6 / 47.3 ms | 10.8 ms |

A key costs about half the CPU it did. At load 1.5-1.8 (run 5, the quietest this machine was) both targets held
after and neither before: key p95 114 to 25 ms, view switch p95 122 to 59 ms. At load 2-4 (runs 3 and 4) other
work still decided the tails: a view switch is 30-45 ms of CPU, nearly all textual's (the layout and render of
the whole screen, its tabs, the restyle of the two tables whose focus changes), and the switch p95 was about
200 ms before and after. At load 12-16 nothing is near the targets; there the medians and the CPU per key are
what the comparison can vouch for. Run the command at the top on a quiet machine for the percentiles.

The DRA node's drivers are found and probed by each poll; whether their health streams are also followed by the
app depends on the TUI's wiring (`NodeFeed`), and the row measures whatever that wiring does.
"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def ms(v: float) -> str:
    return f"{v * 1000:.1f} ms"


@dataclass
class Run:
    """Everything one run measured, with the machine's load around it."""

    main: Figures
    inline: Figures
    dra: Figures | None
    devices: int
    rate: float
    load: tuple[float, float, float]
    load_after: tuple[float, float, float]


def table_row(name: str, values: list[float], target: float) -> str:
    ok = sum(v < target for v in values)
    return (
        f"| {name} | {len(values)} | {ms(statistics.median(values))} | {ms(pct(values, 0.95))} "
        f"| {ms(pct(values, 0.99))} | {ms(max(values))} | {ok / len(values):.0%} under {target * 1000:.0f} ms |"
    )


def report(run: Run) -> str:
    f, inline, dra = run.main, run.inline, run.dra
    rows = [
        table_row(f"cursor down/up in the devices view ({run.devices:,} rows)", f.down, 0.05),
        table_row("switch view (devices ↔ events)", f.switch, 0.1),
    ]
    if f.switch_in_rebuild:
        rows.append(table_row("… of those, while a rebuild ran in its thread", f.switch_in_rebuild, 0.1))
    rows += [
        table_row("cursor down/up, plugins followed in the app's process", inline.down, 0.05),
    ]
    if dra is not None:
        rows.append(table_row(f"cursor down/up, {DRA_DRIVERS} DRA drivers × {DRA_DEVICES:,} devices", dra.down, 0.1))
    lags = [("the run above", f), ("plugins followed in the app's process", inline)]
    if dra is not None:
        lags.append(("DRA drivers", dra))
    lag_rows = "\n".join(
        f"| {name} | {ms(statistics.median(x.lag))} | {ms(pct(x.lag, 0.99))} | {ms(max(x.lag))} |" for name, x in lags
    )
    rebuild = statistics.median(f.rebuild_seconds) if f.rebuild_seconds else 0.0
    gc_text = (
        f"{len(f.gc_full)} full garbage collections in the app's process, the longest {ms(max(f.gc_full))}"
        if f.gc_full
        else "no full garbage collection in the app's process"
    )
    load, after = run.load, run.load_after
    shared = (
        "a quiet machine: the tails are the app's own"
        if max(load[0], after[0]) < 1.0
        else "other work shared the CPUs, so the tails include time when the app simply was not scheduled"
    )
    return f"""# devctl tui: performance

Written by `bench/bench_tui.py` (run it to refresh these figures):

    PYTHONPATH=$PWD python bench/bench_tui.py --write docs/performance-tui.md --json bench-tui.json

A plugin in its own process lists {run.devices:,} devices and sends the full list {run.rate:g} times a second, one
device's health flipped each time (every ListAndWatch message is the whole list). The app runs headless under
textual's Pilot at 100x30, wired as `devctl tui` wires it: `NodeFeed` with `collect` polling on a thread of its own
and the plugins followed by a `devctl watch -o json` child; the devices view of that resource is on screen. Keys are
posted as the terminal driver posts them, at random intervals of 50-250 ms; latency is from posting the key to the
first frame rendered after it took effect. Loop lag: how late a {LAG_TICK * 1000:.0f} ms sleep on the app's event
loop wakes up, the wait a key has before it is even read. Targets (issue 13): a key under 50 ms and a view switch
under 100 ms at p95; with {DRA_DRIVERS} DRA drivers of {DRA_DEVICES:,} devices each sending {run.rate:g} health lists
a second, a key under 100 ms (issue 9).

Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; load average
{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} when the run started and {after[0]:.1f} / {after[1]:.1f} / {after[2]:.1f}
when it ended ({shared}).

| key | presses | p50 | p95 | p99 | max | |
|---|---|---|---|---|---|---|
{chr(10).join(rows)}

| loop lag | p50 | p99 | max |
|---|---|---|---|
{lag_rows}

CPU time of the app's thread from a key to its frame, at the median (what a key costs, whatever else the machine
does): a cursor key {ms(statistics.median(f.down_cpu))}, a view switch {ms(statistics.median(f.switch_cpu))}.

While it ran ({f.seconds:.1f} s): the event log took {f.log_lines} lines ({f.log_lines / f.seconds:.1f}/s: every
health change that reached the app, none merged away); the view was rebuilt {f.rebuilds} times
({f.rebuilds / f.seconds:.1f}/s), each
rebuild (live changes laid over the last poll, `devctl.analyze` over {run.devices:,} devices, the rows of every table
formatted) taking {ms(rebuild)} at the median in its thread; the app's process used {f.cpu:.1f} s of CPU
({f.cpu / f.seconds:.0%} of a core), not counting the `devctl watch` child; {gc_text}. The row "plugins
followed in the app's process" follows them in the app's process instead (as `devctl demo` does, its plugins being
small): {inline.cpu / inline.seconds:.0%} of a core.
{HISTORY}"""


def figures_json(run: Run) -> dict[str, object]:
    """The figures for `make bench` and the compare script (format: see bench/README or the docs)."""

    def fig(value: float, unit: str, target: float | None) -> dict[str, object]:
        return {"value": round(value, 2), "unit": unit, "target": target, "better": "lower"}

    f = run.main
    out = {
        "key_p50_ms": fig(statistics.median(f.down) * 1000, "ms", None),
        "key_p95_ms": fig(pct(f.down, 0.95) * 1000, "ms", 50),
        "view_switch_p50_ms": fig(statistics.median(f.switch) * 1000, "ms", None),
        "view_switch_p95_ms": fig(pct(f.switch, 0.95) * 1000, "ms", 100),
        "loop_lag_p99_ms": fig(pct(f.lag, 0.99) * 1000, "ms", 50),
        "key_cpu_p50_ms": fig(statistics.median(f.down_cpu) * 1000, "ms", None),
        "view_switch_cpu_p50_ms": fig(statistics.median(f.switch_cpu) * 1000, "ms", None),
        "gc_full_max_ms": fig(max(f.gc_full, default=0.0) * 1000, "ms", None),
        "rebuild_p50_ms": fig(statistics.median(f.rebuild_seconds or [0.0]) * 1000, "ms", None),
        "app_cpu_percent": fig(100 * f.cpu / f.seconds, "%", None),
        "inline_key_p95_ms": fig(pct(run.inline.down, 0.95) * 1000, "ms", None),
    }
    if run.dra is not None:
        out["dra_key_p95_ms"] = fig(pct(run.dra.down, 0.95) * 1000, "ms", 100)
        out["dra_loop_lag_p99_ms"] = fig(pct(run.dra.lag, 0.99) * 1000, "ms", None)
    return {"bench": "tui", "figures": out}


def wait_for(path: Path, child: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        if time.monotonic() > deadline or child.poll() is not None:
            raise SystemExit(f"{what} did not start")
        time.sleep(0.05)


def run_plugin_node(args: argparse.Namespace) -> tuple[Figures, Figures]:
    """The 10,000-device plugin: the app as `devctl tui` wires it, then as `devctl demo` does."""
    root = Path(tempfile.mkdtemp(prefix="dcbench", dir="/tmp"))
    plugins_dir = root / "var/lib/kubelet/device-plugins"
    plugins_dir.mkdir(parents=True)
    # What the kubelet's checkpoint would say: which resource these devices are. Without a kubelet
    # it is the only way to name the resource behind a socket (collect matches device IDs).
    write_checkpoint(str(plugins_dir / "kubelet_internal_checkpoint"), [], {RESOURCE: device_ids(args.devices)})
    serve = ["--serve", str(plugins_dir), "--devices", str(args.devices), "--rate", str(args.rate)]
    plugin = subprocess.Popen([sys.executable, __file__, *serve])
    try:
        wait_for(plugins_dir / SOCKET, plugin, "the plugin")
        figures = asyncio.run(measure(str(plugins_dir), args.devices, args.seconds, watch_subprocess=True))
        # The same with the plugins followed in the app's own process (devctl demo's wiring), for comparison.
        inline = asyncio.run(
            measure(str(plugins_dir), args.devices, args.inline_seconds, watch_subprocess=False, switches=False)
        )
    finally:
        plugin.terminate()
        plugin.wait(10)
        shutil.rmtree(root, ignore_errors=True)
    return figures, inline


def run_dra_node(args: argparse.Namespace) -> Figures:
    """Four DRA drivers streaming health; the devices view shows one of them."""
    root = Path(tempfile.mkdtemp(prefix="dcbench", dir="/tmp"))
    plugins_dir = root / "var/lib/kubelet/device-plugins"
    plugins_dir.mkdir(parents=True)
    serve = ["--serve-dra", str(root), "--rate", str(args.rate)]
    drivers = subprocess.Popen([sys.executable, __file__, *serve])
    try:
        registry = root / "var/lib/kubelet/plugins_registry"
        wait_for(registry / f"gpu{DRA_DRIVERS - 1}.example.com-reg.sock", drivers, "the DRA drivers")
        return asyncio.run(measure(str(plugins_dir), DRA_DEVICES, args.dra_seconds, watch_subprocess=True))
    finally:
        drivers.terminate()
        drivers.wait(10)
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=20.0, help="lists per second, per plugin or driver")
    parser.add_argument("--seconds", type=float, default=15.0, help="keys pressed for this long (devctl tui's wiring)")
    parser.add_argument("--inline-seconds", type=float, default=6.0, help="and with the plugins followed in-process")
    parser.add_argument("--dra-seconds", type=float, default=8.0, help="and on the DRA node (0: leave it out)")
    parser.add_argument("--write", metavar="FILE", help="write the figures as Markdown to FILE")
    parser.add_argument("--json", metavar="FILE", help="write the figures as JSON to FILE (for make bench)")
    parser.add_argument("--serve", metavar="DIR", help=argparse.SUPPRESS)  # the plugin process
    parser.add_argument("--serve-dra", metavar="ROOT", help=argparse.SUPPRESS)  # the DRA drivers' process
    args = parser.parse_args()
    if args.serve:
        serve_plugin(args.serve, args.devices, args.rate)
        return
    if args.serve_dra:
        serve_dra(args.serve_dra, DRA_DRIVERS, DRA_DEVICES, args.rate)
        return

    load = os.getloadavg()
    figures, inline = run_plugin_node(args)
    dra = run_dra_node(args) if args.dra_seconds > 0 else None
    run = Run(figures, inline, dra, args.devices, args.rate, load, os.getloadavg())
    text = report(run)
    print(text)
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    if args.write:
        Path(args.write).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps(figures_json(run), indent=2) + "\n")


if __name__ == "__main__":
    main()

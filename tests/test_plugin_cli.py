"""`devctl plugin …` as a person runs it: real processes, real sockets, exit codes and stderr."""

from __future__ import annotations

import os
import signal
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_plugin_fakes import FakeKubelet, Serving, devctl

from devctl.lab.plugin.spec import PluginSpecError
from devctl.model import HEALTHY, UNHEALTHY

RESOURCE = "example.com/gpu"


@pytest.fixture
async def kubelet(short_root: Path) -> AsyncIterator[FakeKubelet]:
    k = FakeKubelet(short_root / "var/lib/kubelet/device-plugins")
    await k.start()
    yield k
    await k.stop()


async def test_serve_register_control_and_stop(short_root: Path, kubelet: FakeKubelet) -> None:
    # GIVEN `devctl plugin serve` on a node whose kubelet dials back inside Register
    serving = Serving(short_root, "--resource", RESOURCE, "--count", "3", "--pre-start")
    await serving.start(ready="devctl-example.com-gpu.sock.ctl")
    try:
        await kubelet.wait_for(lambda: kubelet.lists.get(RESOURCE), timeout=10)
        [reg] = kubelet.registrations
        assert reg.endpoint == "devctl-example.com-gpu.sock" and reg.options is not None
        assert reg.options.pre_start_required
        assert [(d.id, d.health) for d in kubelet.lists[RESOURCE][0]] == [
            ("gpu-0", HEALTHY),
            ("gpu-1", HEALTHY),
            ("gpu-2", HEALTHY),
        ]
        # WHEN another shell marks a device unhealthy
        code, out, _ = await devctl(short_root, "plugin", "set-health", RESOURCE, "gpu-1", "unhealthy")
        assert (code, out.strip()) == (0, f"{RESOURCE} gpu-1: Unhealthy")
        # THEN the kubelet's ListAndWatch stream gets it within a second
        await kubelet.wait_for(lambda: len(kubelet.lists[RESOURCE]) >= 2, timeout=1)
        assert kubelet.lists[RESOURCE][-1][1].health == UNHEALTHY
        # and the health may be written as devctl devices prints it
        code, out, _ = await devctl(short_root, "plugin", "set-health", RESOURCE, "gpu-1", "Healthy")
        assert (code, out.strip()) == (0, f"{RESOURCE} gpu-1: Healthy")
        # and a resource or device that does not exist is exit 1 with a likely name (as in ls; issue 10, item 5)
        code, _, err = await devctl(short_root, "plugin", "remove", RESOURCE, "GPU-2")
        assert code == 1 and "has no device 'GPU-2' (did you mean gpu-2?)" in err
        code, _, err = await devctl(short_root, "plugin", "add", "example.com/none", "x-0@1")
        assert code == 1 and "no running devctl plugin serves example.com/none" in err
        code, _, err = await devctl(short_root, "plugin", "set-health", "gpu", "gpu-1", "healthy")
        assert code == 1 and f"(did you mean {RESOURCE}? looked in" in err
    finally:
        # WHEN it gets SIGTERM THEN it exits 0, without a traceback, and its sockets are gone
        code, err = await serving.stop()
    assert code == 0, err
    assert "Traceback" not in err
    assert "GetDevicePluginOptions example.com/gpu" in err  # every RPC served is logged
    assert os.listdir(kubelet.plugins_dir) == ["kubelet.sock"]
    assert os.listdir(serving.ctl_dir) == []


async def test_second_serve_of_a_live_resource_is_refused(short_root: Path, kubelet: FakeKubelet) -> None:
    first = Serving(short_root, "--resource", RESOURCE, "--device", "GPU-a@0", "--device", "GPU-b@1")
    await first.start(ready="devctl-example.com-gpu.sock.ctl")
    try:
        code, _, err = await devctl(short_root, "plugin", "serve", "--resource", RESOURCE, "--count", "1",
                                    "--socket", "second.sock")  # fmt: skip
        assert code == 2
        assert err.strip().splitlines() == [
            f"devctl: {RESOURCE} is already served by the live plugin at "
            f"{kubelet.plugins_dir}/devctl-example.com-gpu.sock; registering it again would take it from that "
            "plugin (use --force to do it anyway)"
        ]
        # --force registers anyway (on its own socket), and the kubelet sees a second registration
        second = Serving(short_root, "--resource", RESOURCE, "--count", "1", "--socket", "second.sock", "--force")
        await second.start(ready="second.sock.ctl")
        await kubelet.wait_for(lambda: len(kubelet.registrations) == 2, timeout=10)
        assert kubelet.registrations[-1].endpoint == "second.sock"
        assert (await second.stop(signal.SIGINT))[0] == 0
    finally:
        code, err = await first.stop(signal.SIGINT)
    assert code == 0, err


async def test_invalid_resource_name_exits_2(short_root: Path) -> None:
    code, out, err = await devctl(short_root, "plugin", "serve", "--resource", "gpu", "--count", "1")
    assert (code, out) == (2, "")
    assert err.strip().splitlines() == [
        "devctl: 'gpu' is not an extended resource name: it needs a domain prefix, e.g. example.com/gpu"
    ]
    assert not (short_root / "var").exists()  # refused before serving anything


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--resource", "kubernetes.io/gpu", "--count", "1"], "kubernetes.io/ and requests. names are reserved"),
        (["--resource", RESOURCE, "--count", "1", "--device", "a"], "either --count or --device"),
        (["--resource", RESOURCE], "give --count N or --device ID"),
        (["--resource", RESOURCE, "--device", "a@x"], "NUMA nodes must be integers"),
        (["--resource", RESOURCE, "--count", "1", "--env", "NOEQUALS"], "expected KEY=VALUE"),
        (["--config", "/nonexistent/plugin.yaml"], "no such file"),
    ],
)
def test_bad_usage_exits_2_with_one_line(short_root: Path, args: list[str], message: str) -> None:
    # In-process (the same app object the console script runs): these fail before anything is served.
    from typer.testing import CliRunner

    from devctl.cli.app import app

    result = CliRunner().invoke(app, ["--root", str(short_root), "plugin", "serve", *args])
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr, result.stderr
    assert not (short_root / "var").exists()


def test_spec_from_config_and_flags(tmp_path: Path) -> None:
    from devctl.cli.plugin import build_spec

    config = tmp_path / "plugin.yaml"
    config.write_text(
        textwrap.dedent(
            """
            name: vendor.example/vf
            devices:
              - {id: vf-0, numa: 0}
              - {id: vf-1, numa: 1, health: Unhealthy}
            allocate:
              envs: {PCIDEVICE: "{ids}"}
              cdi_devices: ["vendor.example/vf={id}"]
            """
        )
    )
    spec = build_spec(None, None, [], str(config), "vf.sock", False, True, ["EXTRA={ids}"])
    assert spec.resource == "vendor.example/vf" and spec.socket == "vf.sock"
    assert [(d.id, d.health, d.numa_nodes) for d in spec.devices] == [
        ("vf-0", HEALTHY, (0,)),
        ("vf-1", UNHEALTHY, (1,)),
    ]
    assert (spec.preferred_allocation, spec.pre_start) == (False, True)
    rendered = spec.render_allocation(["vf-0", "vf-1"])
    assert rendered.envs == {"PCIDEVICE": "vf-0,vf-1", "EXTRA": "vf-0,vf-1"}
    assert rendered.cdi_devices == ("vendor.example/vf=vf-0",)
    # --count replaces the file's devices, named after the resource's name part
    counted = build_spec(None, 2, [], str(config), None, None, False, [])
    assert [d.id for d in counted.devices] == ["vf-0", "vf-1"] and counted.devices[1].healthy
    with pytest.raises(PluginSpecError, match="differs from name"):
        build_spec("vendor.example/gpu", None, [], str(config), None, None, False, [])

"""The kubelet's admission settings as the running kubelet has them: its command line, then its config file.

Where the settings come from, in order (../shared/docs/admission-contract.md):

1. The running kubelet under ``<proc>``: the process whose ``comm`` is ``kubelet`` (or a versioned binary's
   ``kubelet-1.32``), its ``cmdline`` read only for those; at most ``MAX_PROCS`` process directories are
   looked at, lowest pid first. Its ``--config`` file (``--config X`` or ``--config=X``, a host path read
   under ``--root``), then the flags of the same meaning, which win over the file as they do in the kubelet
   (each replaces the file's value whole, maps included). A kubelet without ``--config`` runs on its flags
   and defaults: that is what it has, not a failure.
2. No kubelet process seen: ``<kubelet-dir>/config.yaml`` (kubeadm's place).
3. Neither: the file the caller names (``devctl --kubelet-config FILE``).

The file (YAML or JSON, at most 1 MiB) must be ``kubelet.config.k8s.io/v1beta1`` ``KubeletConfiguration``:
another version or kind is a ``wrong-api`` failure naming it (the kubelet refuses to start on it), and the
policy is then the flags' and defaults'. Fields the kubelet does not know are listed by name in a failure,
and the rest is used: the kubelet decodes leniently after a strict error and goes on. A value the kubelet's
validation refuses (a policy name it does not know) is kept as written, with a failure saying so.

Nothing read is dressed as more than it is: ``KubeletPolicy.source`` names what was read (the file, ``flags``
or ``defaults``) and every failure is a ``SourceError`` beside it, so "unknown" can be said.
``reservedSystemCPUs`` (or ``--reserved-cpus``) replaces the reserved CPU quantity by its CPU count, as
``cmd/kubelet/app/server.go`` does; otherwise it is ``kubeReserved.cpu + systemReserved.cpu``.
The kubelet's drop-in directory (``--config-dir``) is not merged: a failure says it was not read.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from devctl.base.units import parse_cpulist, parse_quantity
from devctl.model import ErrorKind, NodePaths, SourceError
from devctl.model.machine import KubeletPolicy
from devctl.node.files import FileReadError, excerpt, read_file
from devctl.node.kubelet_reserved import memory_reservations
from devctl.node.sockets import NotAPath, OutsideRoot, in_root, real_path

KUBELET_CONFIG_SOURCE = "kubelet-config"
API_VERSION = "kubelet.config.k8s.io/v1beta1"
KIND = "KubeletConfiguration"
# The kubelet config API's versions, past and coming: only these are named when a file has another.
KNOWN_API_VERSIONS = ("kubelet.config.k8s.io/v1alpha1", API_VERSION, "kubelet.config.k8s.io/v1")
MAX_CONFIG_BYTES = 1024 * 1024
MAX_PROCS = 8192
_SMALL = 64 * 1024
_NAME = re.compile(r"kubelet(?:[-_]v?\d[\w.+-]*)?")
_VERSION_IN_NAME = re.compile(r"kubelet[-_]v?(\d+\.\d+(?:\.\d+)?)")
_VERSION_DIR = re.compile(r"v?(\d+\.\d+(?:\.\d+)?)")

# Flag -> the config field of the same meaning (cmd/kubelet/app/options).
FLAGS = {
    "topology-manager-policy": "topologyManagerPolicy",
    "topology-manager-scope": "topologyManagerScope",
    "topology-manager-policy-options": "topologyManagerPolicyOptions",
    "cpu-manager-policy": "cpuManagerPolicy",
    "cpu-manager-policy-options": "cpuManagerPolicyOptions",
    "reserved-cpus": "reservedSystemCPUs",
    "memory-manager-policy": "memoryManagerPolicy",
    "reserved-memory": "reservedMemory",
    "kube-reserved": "kubeReserved",
    "system-reserved": "systemReserved",
    "eviction-hard": "evictionHard",  # its flag form, memory.available<100Mi,...: node/kubelet_reserved reads it
}
_MAP_FLAGS = {"topology-manager-policy-options", "cpu-manager-policy-options", "kube-reserved", "system-reserved"}

KNOWN_VALUES = {
    "topologyManagerPolicy": ("none", "best-effort", "restricted", "single-numa-node"),
    "topologyManagerScope": ("container", "pod"),
    "cpuManagerPolicy": ("none", "static"),
    "memoryManagerPolicy": ("None", "Static"),
}

# Every field of KubeletConfiguration v1beta1 (kubernetes/kubelet config/v1beta1/types.go, json names), up to 1.36.
KNOWN_FIELDS = frozenset(
    """apiVersion kind enableServer staticPodPath podLogsDir syncFrequency fileCheckFrequency httpCheckFrequency
    staticPodURL staticPodURLHeader address port readOnlyPort tlsCertFile tlsPrivateKeyFile tlsCipherSuites
    tlsCurvePreferences tlsMinVersion rotateCertificates serverTLSBootstrap authentication authorization
    registryPullQPS registryBurst imagePullCredentialsVerificationPolicy preloadedImagesVerificationAllowlist
    eventRecordQPS eventBurst enableDebuggingHandlers enableContentionProfiling healthzPort healthzBindAddress
    oomScoreAdj clusterDomain clusterDNS streamingConnectionIdleTimeout nodeStatusUpdateFrequency
    nodeStatusReportFrequency nodeLeaseDurationSeconds imageMinimumGCAge imageMaximumGCAge
    imageGCHighThresholdPercent imageGCLowThresholdPercent volumeStatsAggPeriod kubeletCgroups systemCgroups
    cgroupRoot cgroupsPerQOS cgroupDriver cpuManagerPolicy singleProcessOOMKill cpuManagerPolicyOptions
    cpuManagerReconcilePeriod memoryManagerPolicy topologyManagerPolicy topologyManagerScope
    topologyManagerPolicyOptions qosReserved runtimeRequestTimeout hairpinMode maxPods podCIDR podPidsLimit
    resolvConf runOnce cpuCFSQuota cpuCFSQuotaPeriod nodeStatusMaxImages maxOpenFiles contentType kubeAPIQPS
    kubeAPIBurst serializeImagePulls maxParallelImagePulls evictionHard evictionSoft evictionSoftGracePeriod
    evictionPressureTransitionPeriod evictionMaxPodGracePeriod evictionMinimumReclaim
    mergeDefaultEvictionSettings podsPerCore enableControllerAttachDetach protectKernelDefaults
    makeIPTablesUtilChains iptablesMasqueradeBit iptablesDropBit featureGates failSwapOn memorySwap
    containerLogMaxSize containerLogMaxFiles containerLogMaxWorkers containerLogMonitorInterval
    configMapAndSecretChangeDetectionStrategy systemReserved kubeReserved reservedSystemCPUs
    showHiddenMetricsForVersion systemReservedCgroup kubeReservedCgroup enforceNodeAllocatable
    allowedUnsafeSysctls defaultPodSysctls volumePluginDir providerID kernelMemcgNotification logging
    enableSystemLogHandler enableSystemLogQuery shutdownGracePeriod shutdownGracePeriodCriticalPods
    shutdownGracePeriodByPodPriority crashLoopBackOff reservedMemory enableProfilingHandler
    enableDebugFlagsHandler seccompDefault memoryThrottlingFactor memoryReservationPolicy registerWithTaints
    registerNode tracing localStorageCapacityIsolation containerRuntimeEndpoint imageServiceEndpoint
    failCgroupV1 userNamespaces""".split()  # noqa: SIM905 (one word a field, as types.go lists them)
)


@dataclass(frozen=True)
class KubeletProcess:
    """The running kubelet as ``<proc>`` shows it: pid, command line, and the binary's path where readable."""

    pid: int
    argv: tuple[str, ...]
    exe: str | None = None
    cwd: str | None = None


def _read_text(path: str, limit: int = _SMALL) -> str | None:
    try:
        return read_file(path, limit).decode("utf-8", "replace")
    except FileReadError:
        return None


def find_kubelet(proc: str, limit: int = MAX_PROCS) -> KubeletProcess | None:
    """The lowest-pid process named kubelet among the first ``limit`` under ``proc``; its cmdline read only."""
    try:
        pids = sorted(int(name) for name in os.listdir(proc) if name.isascii() and name.isdigit())
    except OSError:
        return None
    for pid in pids[:limit]:
        comm = _read_text(f"{proc}/{pid}/comm", 256)
        if comm is None or not _NAME.fullmatch(comm.strip()):
            continue
        raw = _read_text(f"{proc}/{pid}/cmdline", 1024 * 1024)
        argv = tuple(raw.rstrip("\0").split("\0")) if raw else ()
        if not argv or not _NAME.fullmatch(os.path.basename(argv[0])):
            continue
        return KubeletProcess(pid, argv, _link(f"{proc}/{pid}/exe"), _link(f"{proc}/{pid}/cwd"))
    return None


def _link(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def kubelet_flags(argv: Sequence[str]) -> dict[str, list[str]]:
    """The values of ``--config``, ``--config-dir`` and the flags in :data:`FLAGS`, in order, as pflag reads
    them: ``--name=value`` or ``--name value``; everything after ``--`` is not a flag."""
    wanted = {"config", "config-dir", *FLAGS}
    found: dict[str, list[str]] = {}
    i = 1
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            break
        if not arg.startswith("--"):
            continue
        name, equals, value = arg[2:].partition("=")
        if name not in wanted:
            continue
        if not equals:
            if i >= len(argv):
                break
            value = argv[i]
            i += 1
        found.setdefault(name, []).append(value)
    return found


def kubelet_version(process: KubeletProcess | None) -> str | None:
    """The version in the binary's path (``/usr/bin/kubelet-1.32``, ``/opt/kubernetes/v1.32.1/bin/kubelet``);
    None when the path does not say (the kubelet is not run to ask it)."""
    if process is None:
        return None
    for path in (process.exe, process.argv[0] if process.argv else None):
        if not path:
            continue
        match = _VERSION_IN_NAME.fullmatch(os.path.basename(path))
        if match:
            return match.group(1)
        for part in reversed(path.split("/")[:-1]):
            if m := _VERSION_DIR.fullmatch(part):
                return m.group(1)
    return None


def under_root(root: str, path: str, cwd: str | None = None) -> str:
    """A path as the kubelet names it on the host, read under ``root`` (relative ones from the kubelet's cwd),
    every symlink on the way followed inside the root (an absolute target is a host path, read under it too);
    raises OutsideRoot for one whose ``..`` climbs out (``--config=../../../etc/x``)."""
    if not os.path.isabs(path):
        path = os.path.join(cwd or "/", path)
    return in_root(root, path)


def read_kubelet_policy(
    paths: NodePaths, config_file: str | None = None, process: KubeletProcess | None = None
) -> tuple[KubeletPolicy, tuple[SourceError, ...]]:
    """The kubelet's admission settings and every failure met reading them (see the module's docstring).

    ``config_file`` is ``--kubelet-config FILE``; ``process`` a kubelet already found (else ``<proc>`` is looked
    at). ``source`` says what the settings rest on; ``defaults`` with a failure beside it means unknown.
    """
    errors: list[SourceError] = []
    process = process if process is not None else find_kubelet(paths.proc) if paths.proc else None
    flags = kubelet_flags(process.argv) if process else {}
    version = kubelet_version(process)
    if "config-dir" in flags:
        errors.append(_error(f"the kubelet's --config-dir {flags['config-dir'][-1]} is not merged", ErrorKind.OTHER))
    refused = False
    try:
        path = _config_path(paths, process, flags, config_file)
    except (OutsideRoot, NotAPath):  # as good as missing: nothing outside the root is read
        path, refused = None, True
        which = f"--config {excerpt(flags['config'][-1])}" if process and "config" in flags else "config.yaml"
        errors.append(_error(f"the kubelet's {which} leads outside the root {paths.root}: not read", ErrorKind.MISSING))
    fields: dict[str, object] = {}
    source = "defaults"
    if path is None and process is None and not refused:
        errors.append(
            _error(
                f"no kubelet configuration: no kubelet process under {paths.proc or '<proc>'}, "
                f"no {os.path.join(paths.kubelet_dir, 'config.yaml')} (--kubelet-config FILE names one)",
                ErrorKind.MISSING,
            )
        )
    elif path is not None:
        document, error = load_config(path, confined=path != config_file)
        if error is not None:
            errors.append(error)
        if document is not None:
            fields, more = config_fields(document, path)
            errors.extend(more)
            source = path
    flag_fields, flag_errors = _flag_fields(flags)
    errors.extend(flag_errors)
    if flag_fields:
        fields.update(flag_fields)
        source = "flags" if source == "defaults" else f"{source} + flags"
    policy, more = policy_of(fields, source, version)
    errors.extend(more)
    return policy, tuple(errors)


def _config_path(
    paths: NodePaths, process: KubeletProcess | None, flags: Mapping[str, list[str]], config_file: str | None
) -> str | None:
    if process is not None:
        if "config" in flags:
            return under_root(paths.root, flags["config"][-1], process.cwd)
        return config_file
    kubeadm = os.path.join(paths.kubelet_dir, "config.yaml")
    if os.path.lexists(kubeadm):
        return real_path(paths.root, kubeadm)  # a symlink there is followed inside the root
    return config_file


def load_config(path: str, confined: bool = False) -> tuple[Mapping[str, object] | None, SourceError | None]:
    """The config file as a mapping, or None and why (missing, too large, not YAML, another version or kind).

    ``confined``: ``path`` was resolved inside the root, and the file read must be in that very directory (a
    symlink swapped in meanwhile is not followed out). No value of the file is ever echoed in a message."""
    inside = os.path.realpath(os.path.dirname(path)) if confined else None
    try:
        text = read_file(path, MAX_CONFIG_BYTES, inside=inside).decode("utf-8-sig")
    except FileReadError as err:
        why = ErrorKind.TOO_LARGE if err.reason.startswith("too large") else err.kind
        return None, _error(str(err), why)
    except UnicodeDecodeError:
        return None, _error(f"{path}: not UTF-8 text", ErrorKind.MALFORMED)
    document = _parse(text)
    if not isinstance(document, Mapping):
        return None, _error(f"{path}: not a KubeletConfiguration (YAML or JSON mapping)", ErrorKind.MALFORMED)
    version, kind = document.get("apiVersion"), document.get("kind")
    if version != API_VERSION or kind != KIND:
        return None, _error(
            f"{path}: apiVersion {_known(version, KNOWN_API_VERSIONS)} kind {_known(kind, (KIND,))}: devctl reads "
            f"{API_VERSION} {KIND} (the kubelet refuses to start on another); settings from flags and defaults",
            ErrorKind.WRONG_API,
        )
    return document, None


def _parse(text: str) -> object:
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            pass
    import yaml

    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError):
        return None


def config_fields(document: Mapping[str, object], path: str) -> tuple[dict[str, object], list[SourceError]]:
    """The fields that matter to admission, and a failure listing the fields the kubelet does not know."""
    unknown = sorted(str(key) for key in document if key not in KNOWN_FIELDS)
    errors = []
    if unknown:
        shown = ", ".join(excerpt(name).strip("'") for name in unknown[:10])
        more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
        errors.append(
            _error(
                f"{path}: unknown fields {shown}{more} (the kubelet warns and goes on without them)",
                ErrorKind.MALFORMED,
            )
        )
    return {key: document[key] for key in FLAGS.values() if key in document}, errors


def _flag_fields(flags: Mapping[str, list[str]]) -> tuple[dict[str, object], list[SourceError]]:
    """Flags as the config fields they set: the last value of a plain flag, every value of a map merged."""
    fields: dict[str, object] = {}
    errors: list[SourceError] = []
    for flag, field in FLAGS.items():
        values = flags.get(flag)
        if not values:
            continue
        if flag == "reserved-memory":
            fields[field] = values
        elif flag in _MAP_FLAGS:
            merged: dict[str, str] = {}
            for value in values:
                for pair in filter(None, (p.strip() for p in value.split(","))):
                    key, equals, item = pair.partition("=")
                    if not equals:
                        errors.append(_error(f"--{flag}: {excerpt(pair)} is not KEY=VALUE", ErrorKind.MALFORMED))
                        continue
                    merged[key.strip()] = item.strip()
            fields[field] = merged
        else:
            fields[field] = values[-1]
    return fields, errors


def policy_of(
    fields: Mapping[str, object], source: str, version: str | None = None
) -> tuple[KubeletPolicy, list[SourceError]]:
    """``KubeletPolicy`` from config fields (file and flags already merged), the kubelet's defaults elsewhere."""
    errors: list[SourceError] = []

    def word(field: str, default: str) -> str:
        value = fields.get(field)
        if value is None or value == "":
            return default
        if not isinstance(value, str):  # never str() it: a YAML alias bomb's list is gigabytes as text
            errors.append(_error(f"{field}: {_kind(value)} where a string belongs", ErrorKind.MALFORMED))
            return default
        if value not in KNOWN_VALUES[field]:
            errors.append(
                _error(
                    f"{field}: a string of {len(value)} characters that is none of the kubelet's "
                    f"{', '.join(KNOWN_VALUES[field])} (it would refuse to start)"
                )
            )
        return value

    def options(field: str) -> dict[str, str]:
        value = fields.get(field)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            errors.append(_error(f"{field} is not a map", ErrorKind.MALFORMED))
            return {}
        out: dict[str, str] = {}
        for key, item in value.items():
            if not isinstance(key, str) or not _is_scalar(item):
                errors.append(_error(f"{field}: {_kind(item)} where a string belongs", ErrorKind.MALFORMED))
                continue
            out[key] = _go_text(item)
        return out

    reserved_cpus: tuple[int, ...] = ()
    text = fields.get("reservedSystemCPUs")
    if text is not None and not isinstance(text, str):
        errors.append(_error(f"reservedSystemCPUs: {_kind(text)} where a string belongs", ErrorKind.MALFORMED))
    elif text:
        try:
            reserved_cpus = parse_cpulist(text)
        except ValueError:
            errors.append(_error("reservedSystemCPUs: a string that is not a CPU list", ErrorKind.MALFORMED))
    if reserved_cpus:
        reserved_milli = 1000 * len(reserved_cpus)
    else:
        reserved_milli = sum(_reserved_cpu(options(f), f, errors) for f in ("kubeReserved", "systemReserved"))
    policy = KubeletPolicy(
        topology=word("topologyManagerPolicy", "none"),
        scope=word("topologyManagerScope", "container"),
        options=options("topologyManagerPolicyOptions"),
        cpu=word("cpuManagerPolicy", "none"),
        cpu_options=options("cpuManagerPolicyOptions"),
        memory=word("memoryManagerPolicy", "None"),
        reserved_cpus=reserved_cpus,
        reserved_cpu_quantity_milli=reserved_milli,
        reserved_memory=_reserved_memory(fields.get("reservedMemory"), errors),
        **memory_reservations(fields, errors),
        source=source,
        version=version,
    )
    return policy, errors


def _known(value: object, words: Sequence[str]) -> str:
    """A value from a config as a message shows it: quoted only when it is one of ``words``, else its type."""
    if isinstance(value, str) and value in words:
        return repr(value)
    return "missing" if value is None else _kind(value)


def _is_scalar(value: object) -> bool:
    return value is None or isinstance(value, (str, bool, int, float))


def _kind(value: object) -> str:
    """A value's type only, as a message names it (never its text: a config may be anything)."""
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if value is None:
        return "null"
    return {str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(type(value), "a value")


def _go_text(value: object) -> str:
    """A map value as the kubelet's map[string]string holds it (YAML ``true`` is the string "true")."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _reserved_cpu(reserved: Mapping[str, str], field: str, errors: list[SourceError]) -> int:
    value = reserved.get("cpu")
    if value is None:
        return 0
    try:
        return cpu_milli(value)
    except ValueError:
        errors.append(_error(f"{field}.cpu: a string that is not a CPU quantity", ErrorKind.MALFORMED))
        return 0


def cpu_milli(text: str) -> int:
    """A CPU quantity in millicores, rounded up as ``Quantity.MilliValue``: ``"100m"`` -> 100, ``"1.5"`` -> 1500."""
    body = text.strip()
    scale = Fraction(1)
    if body.endswith("m"):
        body, scale = body[:-1], Fraction(1, 1000)
    elif body.endswith("k"):
        body, scale = body[:-1], Fraction(1000)
    if not re.fullmatch(r"\+?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d{1,2})?", body):
        raise ValueError(text)
    value = Fraction(body) * scale * 1000
    return -(-value.numerator // value.denominator)


def _reserved_memory(value: object, errors: list[SourceError]) -> dict[int, dict[str, int]]:
    """``reservedMemory`` (a list of ``{numaNode, limits}``) or ``--reserved-memory`` values
    (``0:memory=1Gi,hugepages-1Gi=2Gi;1:memory=2Gi``) as NUMA node -> resource -> bytes."""
    out: dict[int, dict[str, int]] = {}
    entries: list[tuple[object, object]] = []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        for part in (p for v in value for p in str(v).split(";") if p.strip()):
            number, colon, pairs = part.partition(":")
            flag_limits = dict(p.partition("=")[::2] for p in pairs.split(",") if p.strip()) if colon else None
            entries.append((number.strip(), flag_limits))
    elif isinstance(value, list):
        entries = [(e.get("numaNode"), e.get("limits")) for e in value if isinstance(e, Mapping)]
    elif value is not None:
        errors.append(_error("reservedMemory is not a list", ErrorKind.MALFORMED))
    for place, (node, limits) in enumerate(entries, start=1):
        try:
            # only scalars are turned to text: str() of a YAML alias bomb's list would be gigabytes
            if isinstance(node, bool) or not isinstance(node, (int, str)) or not isinstance(limits, Mapping):
                raise ValueError
            numa = int(node)
            for resource, quantity in limits.items():
                if not isinstance(resource, str) or isinstance(quantity, bool) or not _is_scalar(quantity):
                    raise ValueError
                out.setdefault(numa, {})[resource.strip()] = parse_quantity(str(quantity).strip())
        except ValueError:
            errors.append(_error(f"reservedMemory: entry {place} cannot be read", ErrorKind.MALFORMED))
    return out


def _error(message: str, kind: ErrorKind = ErrorKind.OTHER) -> SourceError:
    return SourceError(KUBELET_CONFIG_SOURCE, message, kind)

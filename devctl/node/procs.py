"""Which processes hold the node's device nodes open: a scan of ``<proc>/*/fd``.

The kubelet knows which container was *given* a device; only the processes
know who *uses* it. A process holds a device node open when one of its
``<proc>/PID/fd/N`` links reads as the node's path, or (for a process in a
container, whose mount namespace may call the node ``/dev/foo`` where the host
says ``/dev/foo-0``) when the link resolves to a character device of the same
major:minor. The cgroup file names the container (containerd, CRI-O, Docker;
cgroup v1 and v2; systemd and cgroupfs drivers).

Bounded: one pass over the processes, only the matches are kept, and a stat is
made only for a distinct link target of a process that points under ``/dev/``
and did not match by path. Processes that exit during the scan are skipped
without a word; fds that cannot be read for lack of rights are counted into one
error. The cost is the kernel's: per process an open, a listing and a close of
its ``fd/`` directory, per fd a ``readlink`` relative to that open directory
(no path walk). Nothing cheaper says what an fd is: a listing of ``fd/`` gives
only numbers, and a ``stat`` through the link costs as much as reading it.
bench/bench_who.py times this against the same system calls made from C
(the kernel's floor). Threads, whose system calls release the GIL, measured no
faster (each of a million short calls hands the GIL over and waits to get it
back), so a scan of many processes gives a share to a worker process instead,
which shares no GIL: on two CPUs each half runs at once (docs/performance.md).
"""

from __future__ import annotations

import functools
import json
import os
import re
import stat
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from devctl.model import CdiState, Checkpoint, ErrorKind, Process, ProcScan, SourceError
from devctl.node.files import FileReadError, read_file

PROCS_SOURCE = "procs"
# A process' cmdline or cgroup file is small; the cap bounds what a hostile or fake proc tree can make devctl read.
PROC_FILE_LIMIT = 1024 * 1024
# Processes that read <proc> at once by default (the caller and worker processes), at most one per CPU: two, as
# threads measured no faster (see the module's docstring). bench/bench_who.py times one beside it.
SCAN_WORKERS = 2
# The least share of the processes a worker process is given: fewer are read by the caller alone, as starting
# a worker (an interpreter, this module's imports) costs about what reading a few thousand processes does.
CHUNK = 4096
# How long the caller waits for a worker after its own share, as a multiple of the time that share took (at
# least WORKER_GRACE seconds); then it stops the worker and reads the worker's share itself.
WORKER_PATIENCE = 4
WORKER_GRACE = 5.0
# The worker's program: this module, imported from where the caller's was (-I: no environment, no user site).
_WORKER = "import sys; sys.path.insert(0, sys.argv[1]); from devctl.node.procs import worker_main; worker_main()"
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC

# The last path element of a container's cgroup: containerd (systemd driver)
# "cri-containerd-<id>.scope", CRI-O "crio-<id>.scope", Docker "docker-<id>.scope",
# and the cgroupfs driver's bare "<id>". CRI-O's "crio-conmon-<id>.scope" is its
# monitor process, not the container.
_CONTAINER = re.compile(r"^(?:cri-containerd-|crio-|docker-|containerd-)?([0-9a-f]{64})(?:\.scope)?$")
# The pod's cgroup: "kubepods-burstable-pod<uid_with_underscores>.slice" (systemd)
# or "pod<uid>" (cgroupfs).
_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?$")


def parse_cgroup(text: str) -> tuple[str | None, str | None]:
    """The container ID and pod UID named by a ``/proc/PID/cgroup`` file; ``None`` for what it does not name.

    Each line is ``hierarchy-ID:controllers:path`` (v1 has one per controller,
    v2 the single ``0::path``); a line of another shape is skipped.
    """
    container = pod = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for element in parts[2].split("/"):
            if container is None and (m := _CONTAINER.match(element)):
                container = m.group(1)
            elif pod is None and (m := _POD.search(element)):
                pod = m.group(1).replace("_", "-")
        if container is not None:
            break
    return container, pod


def device_nodes(checkpoint: Checkpoint | None) -> dict[tuple[str, str], tuple[str, ...]]:
    """Each allocated device's node host paths, from the Allocate replies the checkpoint keeps.

    One reply answers for every device of a container's request: its device
    specs belong to all of them (``/dev/nvidiactl`` serves every GPU of the
    request); a reply for one device names that device's own nodes.
    """
    out: dict[tuple[str, str], dict[str, None]] = {}
    for entry in checkpoint.entries if checkpoint is not None else ():
        if entry.allocation is None:
            continue
        paths = [d.host_path for d in entry.allocation.devices if d.host_path]
        for ids in entry.device_ids.values():
            for device_id in ids:
                out.setdefault((entry.resource, device_id), {}).update(dict.fromkeys(paths))
    return {key: tuple(paths) for key, paths in out.items()}


def cdi_nodes(cdi: CdiState | None) -> set[str]:
    """The host paths of every device node any valid CDI spec names: a superset of those of the CDI names in
    use (resolving names is the views' work), cheap to watch as each costs a set lookup per fd."""
    out: set[str] = set()
    for spec in cdi.specs if cdi is not None else ():
        if spec.error is None:
            for edits in (spec.edits, *(d.edits for d in spec.devices)):
                out.update(n.host_path for n in edits.device_nodes)
    return out


def _rdev(path: str) -> int | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_rdev if stat.S_ISCHR(st.st_mode) else None


@dataclass(frozen=True)
class Watch:
    """The device nodes to look for: by the path a link reads, and by major:minor where the node exists."""

    paths: frozenset[str]
    rdevs: Mapping[int, str]  # st_rdev -> host path

    @classmethod
    def of(cls, host_paths: Iterable[str], root: str) -> Watch:
        """Watch these host paths; their major:minor is taken from the nodes under ``root`` where they exist."""
        paths = frozenset(host_paths)
        rdevs: dict[int, str] = {}
        for p in sorted(paths):
            rdev = _rdev(os.path.join(root, p.lstrip("/")))
            if rdev is not None:
                rdevs.setdefault(rdev, p)
        return cls(paths, rdevs)


def _read(path: str) -> bytes | None:
    """A ``<proc>/PID`` file (cmdline, cgroup), or None: a process that exited, or anything but a small regular file."""
    try:
        return read_file(path, PROC_FILE_LIMIT)
    except FileReadError:
        return None


def _command(proc: str, pid: str) -> str:
    raw = _read(f"{proc}/{pid}/cmdline")
    if raw:
        return " ".join(a.decode("utf-8", "replace") for a in raw.rstrip(b"\0").split(b"\0"))
    comm = _read(f"{proc}/{pid}/comm")
    return f"[{comm.decode('utf-8', 'replace').strip()}]" if comm else ""


class _Closed(Exception):
    """The process' fds are closed to us (not root): counted, not an error per process."""


def _is_pid(name: str) -> bool:
    """A process' directory: ASCII digits only (str.isdigit alone would take "²", which int() refuses)."""
    return name.isascii() and name.isdigit()


def _rdev_at(name: str, dir_fd: int) -> int | None:
    try:
        st = os.stat(name, dir_fd=dir_fd)  # follows the fd's own link, whatever the process calls the node
    except OSError:
        return None
    return st.st_rdev if stat.S_ISCHR(st.st_mode) else None


def _each(names: list[str], dir_fd: int) -> list[str | None]:
    """The link targets one at a time: the slow path, for a process that closed an fd since its listing."""
    out: list[str | None] = []
    for name in names:
        try:
            out.append(os.readlink(name, dir_fd=dir_fd))
        except PermissionError:
            raise _Closed from None
        except OSError:
            out.append(None)
    return out


class _Matcher:
    """The watch, read-only, so threads share it."""

    def __init__(self, proc: str, watch: Watch):
        self.proc = proc
        self.paths = watch.paths
        self.rdevs = watch.rdevs

    def held(self, pid: str) -> list[str]:
        """The watched nodes process ``pid`` holds open; raises _Closed when its fds are closed to us."""
        try:
            # One open of the directory serves its listing and every readlink (relative to it): no path walk
            # through <proc>/PID per fd, nor a second one for the listing.
            dir_fd = os.open(f"{self.proc}/{pid}/fd", _DIRECTORY)
        except PermissionError:
            raise _Closed from None
        except OSError:  # gone, or not a process directory
            return []
        try:
            try:
                names = os.listdir(dir_fd)
            except PermissionError:
                raise _Closed from None
            except OSError:
                return []
            targets: list[str] | list[str | None]
            try:
                # The common case in one C-level loop; any failure falls back to the careful one.
                targets = list(map(functools.partial(os.readlink, dir_fd=dir_fd), names))
            except OSError:
                targets = _each(names, dir_fd)
            paths = self.paths
            held = dict.fromkeys(sorted(paths.intersection(targets)))
            if self.rdevs:
                # A node by another name (a container's /dev): one stat per distinct /dev/ target of the process
                # (its 0, 1 and 2 are often the same /dev/null), only where the path did not match.
                seen: set[str] = set()
                for name, target in zip(names, targets, strict=True):
                    if target is None or target in paths or target in seen or not target.startswith("/dev/"):
                        continue
                    if not target.endswith(" (deleted)"):  # two removed nodes may share a name
                        seen.add(target)
                    rdev = _rdev_at(name, dir_fd)
                    if rdev is not None and rdev in self.rdevs:
                        held[self.rdevs[rdev]] = None
        finally:
            os.close(dir_fd)
        return list(held)

    def chunk(self, pids: list[str]) -> tuple[list[Process], int]:
        """The holders among ``pids``, and how many of them closed their fds to us."""
        proc = self.proc
        found, denied = [], 0
        for pid in pids:
            try:
                held = self.held(pid)
            except _Closed:
                denied += 1
                continue
            if held:
                # cmdline and cgroup only for the few that matched.
                container, pod = parse_cgroup((_read(f"{proc}/{pid}/cgroup") or b"").decode("utf-8", "replace"))
                found.append(Process(int(pid), _command(proc, pid), tuple(held), container, pod))
        return found, denied


class _Worker:
    """A share of the processes read by another process, which shares no GIL with the caller: its system calls
    and the caller's run on two CPUs at once (threads measured no faster: each call hands the GIL over).

    The share goes as a range of PIDs, so the job stays small (a pipe's buffer); the worker lists ``<proc>``
    itself and reads the PIDs in the range. A worker that cannot start, fails, says something unreadable or
    takes too long gives None, and the caller reads the share itself.
    """

    def __init__(self, proc: str, watch: Watch, first: int, last: int):
        job = {"proc": proc, "paths": sorted(watch.paths), "rdevs": list(watch.rdevs.items()), "range": [first, last]}
        self.child: subprocess.Popen[bytes] | None
        try:
            self.child = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WORKER, _PACKAGE_ROOT],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            self.child = None
            return
        assert self.child.stdin is not None
        try:
            # One line, and stdin left open: communicate() closes it (a closed one would fail its flush).
            self.child.stdin.write(json.dumps(job).encode() + b"\n")
            self.child.stdin.flush()
        except OSError:
            pass  # the worker is gone already: result() finds it failed, and reaps it

    def result(self, patience: float) -> tuple[list[Process], int] | None:
        """The worker's holders and how many processes closed their fds to it, or None (see the class)."""
        if self.child is None:
            return None
        try:
            out, _ = self.child.communicate(timeout=patience)
            if self.child.returncode != 0:
                return None
            reply = json.loads(out)
            found = [Process(pid, command, tuple(held), cid, pod) for pid, command, held, cid, pod in reply["found"]]
            return found, int(reply["denied"])
        except subprocess.TimeoutExpired:
            self.child.kill()
            self.child.communicate()
            return None
        except (ValueError, TypeError, KeyError):
            return None

    def stop(self) -> None:
        """Ends a worker still running (its caller failed) and reaps it; nothing for one already done."""
        if self.child is not None and self.child.returncode is None:
            self.child.kill()
            self.child.communicate()


def worker_main() -> None:
    """A worker process' part (see _Worker): the job from stdin, its holders as JSON to stdout."""
    job = json.loads(sys.stdin.readline())
    first, last = job["range"]
    watch = Watch(frozenset(job["paths"]), {rdev: path for rdev, path in job["rdevs"]})
    with os.scandir(job["proc"]) as entries:
        pids = [e.name for e in entries if _is_pid(e.name) and first <= int(e.name) <= last]
    found, denied = _Matcher(job["proc"], watch).chunk(pids)
    rows = [[p.pid, p.command, list(p.devices), p.container_id, p.pod_uid] for p in found]
    json.dump({"found": rows, "denied": denied}, sys.stdout)


def _shares(pids: list[str], workers: int) -> list[list[str]]:
    """The PIDs in ascending order, cut into at most ``workers`` shares of at least CHUNK each."""
    count = max(1, min(workers, len(pids) // CHUNK))
    ordered = sorted(pids, key=int)
    size = -(-len(ordered) // count)
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def scan(proc: str, watch: Watch, workers: int | None = None) -> tuple[ProcScan | None, list[SourceError]]:
    """Every process under ``proc`` that holds a watched node open; one error when some fds were closed to us.

    None, with the error, when ``proc`` itself cannot be listed. The processes
    are read by up to ``workers`` processes (default SCAN_WORKERS, at most one
    per CPU, each given CHUNK processes at least): the caller and worker
    processes (see _Worker). Only the matches are kept, so memory grows with
    the holders, not with the processes.
    """
    errors: list[SourceError] = []
    try:
        with os.scandir(proc) as entries:
            pids = [e.name for e in entries if _is_pid(e.name)]
    except OSError as e:
        message = f"{proc}: {e.strerror or e}"
        return None, [SourceError(PROCS_SOURCE, message, ErrorKind.of_oserror(e))]
    found: list[Process] = []
    denied = 0
    if watch.paths and pids:
        matcher = _Matcher(proc, watch)
        mine, *others = _shares(pids, min(workers if workers is not None else SCAN_WORKERS, os.cpu_count() or 1))
        started = [_Worker(proc, watch, int(share[0]), int(share[-1])) for share in others]
        try:
            began = time.monotonic()
            found, denied = matcher.chunk(mine)
            patience = max(WORKER_GRACE, WORKER_PATIENCE * (time.monotonic() - began))
            for worker, share in zip(started, others, strict=True):
                part, closed = worker.result(patience) or matcher.chunk(share)
                found.extend(part)
                denied += closed
        finally:
            for worker in started:
                worker.stop()
        found.sort(key=lambda p: p.pid)
    if denied:
        errors.append(
            SourceError(
                PROCS_SOURCE,
                f"{proc}: the open files of {denied} of {len(pids)} processes are readable by root only; "
                "run as root to see every holder",
                ErrorKind.PERMISSION_DENIED,
            )
        )
    return ProcScan(proc=proc, scanned=len(pids), processes=tuple(found), watched=tuple(sorted(watch.paths))), errors

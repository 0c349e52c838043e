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
(no path walk); devctl/fast/fdscan.py does that part. Nothing cheaper says what
an fd is: a listing of ``fd/`` gives only numbers, and a ``stat`` through the
link costs as much as reading it. bench/bench_who.py times this against the
same system calls made from C (the kernel's floor). Threads, whose system calls
release the GIL, measured no faster (each of a million short calls hands the
GIL over and waits to get it back), so a scan of many processes shares its
slices with a worker process, which shares no GIL: on two CPUs both run at
once, and the one that reads faster takes more (docs/performance.md).
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from devctl.fast.fdscan import MAX_SLICES, TOKEN, Matcher, Row, claims
from devctl.fast.helper import helper_command
from devctl.model import ErrorKind, Process, ProcScan, SourceError
from devctl.node.files import FileReadError, read_file
from devctl.node.sockets import OutsideRoot, in_root

PROCS_SOURCE = "procs"
# A process' cmdline or cgroup file is small; the cap bounds what a hostile or fake proc tree can make devctl read.
PROC_FILE_LIMIT = 1024 * 1024
# Processes that read <proc> at once by default (the caller and worker processes), at most one per CPU: two, as
# threads measured no faster (see the module's docstring). bench/bench_who.py times one beside it.
SCAN_WORKERS = 2
# The processes per reader at least: fewer are read by the caller alone, as starting a worker (an interpreter
# and devctl/fast/fdscan.py) costs about what reading a few hundred processes does.
CHUNK = 4096
# The processes a slice holds (more when there would be more than MAX_SLICES): small enough that neither
# reader waits long for the other's last one, large enough that claiming one (a read of a pipe) costs nothing.
SLICE = 256
# How long the caller waits for a worker once every slice is claimed, as a multiple of the time the caller read
# for (at least WORKER_GRACE seconds); then it stops the worker and reads the worker's slices itself.
WORKER_PATIENCE = 4
WORKER_GRACE = 5.0
# Under a deadline, how long past it the caller waits for a worker's answer (a worker checks the clock before each
# process, so it stops within one process' fds of the deadline); then it is stopped and its slices count as unread.
DEADLINE_GRACE = 1.0
# The worker's program (devctl.fast.helper: fdscan, imported from where the caller's devctl was).
_WORKER = "from devctl.fast.fdscan import worker_main; worker_main()"

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
        """Watch these host paths; their major:minor is taken from the nodes under ``root`` where they exist.

        A host path comes from the node (an Allocate reply, a CDI spec): it is found under ``root`` by the one
        resolver (devctl.node.sockets.in_root), its symlinks followed inside the root; one that climbs out
        (``/../../dev/null``) is matched by the path its links read only, never stat'ed on this machine, whose
        /dev/null would make every process a holder.
        """
        paths = frozenset(host_paths)
        rdevs: dict[int, str] = {}
        for p in sorted(paths):
            try:
                node = in_root(root, p)
            except OutsideRoot:
                continue
            rdev = _rdev(node)
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


def _holder(proc: str, pid: str, held: list[str]) -> Process:
    """A holder as the model has it: its cmdline and cgroup read here, only for the few that matched."""
    container, pod = parse_cgroup((_read(f"{proc}/{pid}/cgroup") or b"").decode("utf-8", "replace"))
    return Process(int(pid), _command(proc, pid), tuple(held), container, pod)


def _is_pid(name: str) -> bool:
    """A process' directory: ASCII digits only (str.isdigit alone would take "²", which int() refuses)."""
    return name.isascii() and name.isdigit()


class _Worker:
    """A reader of slices in another process, which shares no GIL with the caller: its system calls and the
    caller's run on two CPUs at once (threads measured no faster: each call hands the GIL over).

    The job (the PIDs, the slice size, the watch) is a memory file the worker inherits, so nothing waits for
    the worker to read a pipe; the worker claims slices from the caller's pipe of slice numbers
    (devctl/fast/fdscan.py) and prints the slices it read with their holders. A worker that cannot start,
    fails, says something unreadable or takes too long gives None, and the caller reads its slices itself.
    """

    def __init__(self, job: int, tokens: int):
        self.child: subprocess.Popen[bytes] | None = None
        argv = helper_command(_WORKER, str(job), str(tokens))
        if not argv:
            return
        try:
            self.child = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                pass_fds=(job, tokens),
            )
        except OSError:
            self.child = None

    def result(self, patience: float, slices: Mapping[int, list[str]]) -> _Reply | None:
        """The slices the worker read whole (of ``slices``, those the caller did not), the one it was reading at
        the deadline and how many of its processes it read, their holders and how many processes closed their fds
        to it; None (see the class) also when it names a slice or a PID not its own."""
        if self.child is None:
            return None
        try:
            out, _ = self.child.communicate(timeout=patience)
        except subprocess.TimeoutExpired:
            self.stop()
            return None
        if self.child.returncode != 0:
            return None
        try:
            reply = json.loads(out)
            done = {int(i) for i in reply["done"]}
            partial = None if reply.get("partial") is None else (int(reply["partial"][0]), int(reply["partial"][1]))
            found: list[Row] = [(str(pid), [str(p) for p in held]) for pid, held in reply["found"]]
            denied = int(reply["denied"])
        except (ValueError, TypeError, KeyError, IndexError):
            return None
        if not done <= slices.keys():
            return None
        read = {p for i in done for p in slices[i]}
        if partial is not None:
            index, count = partial
            if index in done or index not in slices or not 0 <= count <= len(slices[index]):
                return None
            read.update(slices[index][:count])
        if not {pid for pid, _ in found} <= read:
            return None
        return done, partial, found, denied

    def stop(self) -> None:
        """Ends a worker still running (it claimed nothing, or its caller failed) and reaps it."""
        if self.child is not None and self.child.returncode is None:
            self.child.kill()
            self.child.communicate()


# A worker's answer: the slices it read whole, the one it stopped in at the deadline with how many of its
# processes it read, the holders it found and how many processes closed their fds to it.
_Reply = tuple[set[int], tuple[int, int] | None, list[Row], int]


def _job(proc: str, watch: Watch, pids: list[str], size: int, until: float | None) -> int:
    """The workers' job in a memory file (closed on exec but for the workers, which are passed it)."""
    data = json.dumps(
        {
            "proc": proc,
            "paths": sorted(watch.paths),
            "rdevs": list(watch.rdevs.items()),
            "pids": pids,
            "slice": size,
            "until": until,
        }
    ).encode()
    fd = os.memfd_create("devctl-procs-job", os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    return fd


def _tokens(count: int) -> int:
    """A pipe holding the numbers of ``count`` slices (at most MAX_SLICES: one write, never blocking), its write
    end closed so that a reader finds it empty, not waiting, once every slice is claimed; its read end."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"".join(i.to_bytes(TOKEN, "big") for i in range(count)))
    finally:
        os.close(write_end)
    return read_end


def _read_all(
    matcher: Matcher, watch: Watch, pids: list[str], readers: int, until: float | None = None
) -> tuple[list[Row], int, int]:
    """The holders among ``pids``, how many closed their fds and how many were read (all of them unless the
    deadline ``until`` came first), read by the caller and ``readers - 1`` workers."""
    if readers <= 1:
        return matcher.read(pids, until)
    size = max(SLICE, -(-len(pids) // MAX_SLICES))
    slices = {i: pids[start : start + size] for i, start in enumerate(range(0, len(pids), size))}
    try:
        job = _job(matcher.proc, watch, pids, size, until)
    except OSError:  # no memory file (a seccomp profile may refuse memfd_create): read here alone
        return matcher.read(pids, until)
    try:
        tokens = _tokens(len(slices))
        started = [_Worker(job, tokens) for _ in range(readers - 1)]
    except OSError:
        return matcher.read(pids, until)
    finally:
        os.close(job)  # each worker has its own copy of it now
    found: list[Row] = []
    denied = read = 0

    def take(share: list[str]) -> bool:
        """Read ``share`` here; False when the deadline came first."""
        nonlocal denied, read
        rows, closed, count = matcher.read(share, until)
        found.extend(rows)
        denied += closed
        read += count
        return count == len(share)

    try:
        began = time.monotonic()
        left = dict(slices)
        for index in claims(tokens):
            if not take(left.pop(index)):
                break
        patience = max(WORKER_GRACE, WORKER_PATIENCE * (time.monotonic() - began))
        if until is not None:  # a worker stops at the deadline too: waited for a moment past it, no longer
            patience = min(patience, max(0.0, until - time.monotonic()) + DEADLINE_GRACE)
        for worker in started:
            # Nothing left when this process claimed every slice (a worker slow to start): none is waited for.
            reply = worker.result(patience, left) if left else None
            if reply is not None:
                done, partial, rows, closed = reply
                for index in done:
                    read += len(left.pop(index))
                if partial is not None:
                    read += partial[1]
                    del left[partial[0]]
                found += rows
                denied += closed
        for share in left.values():  # a failed worker's slices, or those nobody claimed before the deadline
            if not take(share):
                break
    finally:
        os.close(tokens)
        for worker in started:
            worker.stop()
    return found, denied, read


# What the line of fds closed to devctl says when devctl is root already: "run as root" would be no help.
EVEN_AS_ROOT = "cannot be read even as root"


def denied_message(proc: str, denied: int, of: int, euid: int | None = None) -> str:
    """The one line for ``denied`` processes of ``of`` whose fds were closed to devctl (``euid``: devctl's own).

    Not root: root reads them. Root already: something else closed them (a container without CAP_SYS_PTRACE
    or CAP_DAC_READ_SEARCH, a user namespace of devctl's own), and the line says so instead.
    """
    if (os.geteuid() if euid is None else euid) != 0:
        return (
            f"{proc}: the open files of {denied} of {of} processes are readable by root only; "
            "run as root to see every holder"
        )
    return (
        f"{proc}: the open files of {denied} of {of} processes {EVEN_AS_ROOT} (devctl without CAP_SYS_PTRACE "
        "or CAP_DAC_READ_SEARCH, or in a user namespace of its own?); who holds a device among them is unknown"
    )


def scan(
    proc: str, watch: Watch, workers: int | None = None, timeout: float | None = None
) -> tuple[ProcScan | None, list[SourceError]]:
    """Every process under ``proc`` that holds a watched node open; one error when some fds were closed to us.

    None, with the error, when ``proc`` itself cannot be listed. The processes
    are read by up to ``workers`` processes (default SCAN_WORKERS, at most one
    per CPU, each with CHUNK processes at least): the caller and worker
    processes (see _Worker), a slice at a time. Only the matches are kept, so
    memory grows with the holders, not with the processes.

    Within ``timeout`` seconds (the command's ``--timeout``; None: no deadline):
    what was not read by then is not read, ``scanned`` counts the processes
    read, and one TIMEOUT error says how many of how many (the views then make
    no "no process holds it" claim).
    """
    until = None if timeout is None else time.monotonic() + timeout
    errors: list[SourceError] = []
    try:
        with os.scandir(proc) as entries:
            pids = [e.name for e in entries if _is_pid(e.name)]
    except OSError as e:
        message = f"{proc}: {e.strerror or e}"
        return None, [SourceError(PROCS_SOURCE, message, ErrorKind.of_oserror(e))]
    found: list[Process] = []
    denied = 0
    read = len(pids)
    if watch.paths and pids:
        readers = max(1, min(SCAN_WORKERS if workers is None else workers, os.cpu_count() or 1, len(pids) // CHUNK))
        rows, denied, read = _read_all(Matcher(proc, watch.paths, watch.rdevs), watch, pids, readers, until)
        found = sorted((_holder(proc, pid, held) for pid, held in rows), key=lambda p: p.pid)
    if read < len(pids):
        errors.append(
            SourceError(
                PROCS_SOURCE,
                f"{proc}: scanned {read} of {len(pids)} processes before the deadline (--timeout {timeout or 0:g} s); "
                "who holds a device among the others is unknown",
                ErrorKind.TIMEOUT,
            )
        )
    if denied:
        euid = os.geteuid()
        message = denied_message(proc, denied, len(pids), euid)
        # Typed as well as said: doctor decides on the field, never on the line's words.
        errors.append(SourceError(PROCS_SOURCE, message, ErrorKind.PERMISSION_DENIED, even_as_root=(euid == 0) or None))
    return ProcScan(proc=proc, scanned=read, processes=tuple(found), watched=tuple(sorted(watch.paths))), errors

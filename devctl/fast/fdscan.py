"""The fd links of many processes read and matched against the watched device nodes: the part of the
``<proc>`` scan (devctl/node/procs.py) that a worker process runs too.

It imports the standard library only, so a worker starts in about 15 ms rather than the 60 to 90 ms that
devctl.model and the rest of procs.py's imports cost it (docs/performance.md); the few processes that match
have their cmdline and cgroup read by the caller, which has those imports already.

Work is shared in slices of processes, each claimed by reading its number from a pipe that the caller filled
before any reader started: a pipe's read is atomic, so each slice goes to exactly one process, and the one
that reads faster (the worker has no interpreter start to pay once it runs, the caller may be busy with its
RPCs) takes more. A static half each waited for the slower half.
"""

from __future__ import annotations

import bisect
import json
import os
import stat
import sys
import time
from collections.abc import Iterator, Mapping, Sequence

from devctl.base.errors import DevctlError

DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
# A slice's number in the pipe: two bytes, big-endian. The pipe is filled at once and never blocks: at most
# MAX_SLICES numbers, 4 KiB, one page, the least a pipe holds (pipe(7): a user over pipe-user-pages-soft).
TOKEN = 2
MAX_SLICES = 2048

Row = tuple[str, list[str]]  # a holder: its PID directory's name, the watched nodes it holds open


class Closed(DevctlError):
    """The process' fds are closed to us (not root): counted, not an error per process."""


def _rdev_at(name: str, dir_fd: int) -> int | None:
    try:
        st = os.stat(name, dir_fd=dir_fd)  # follows the fd's own link, whatever the process calls the node
    except OSError:
        return None
    return st.st_rdev if stat.S_ISCHR(st.st_mode) else None


def _each(names: list[str], dir_fd: int) -> tuple[list[str], list[str]]:
    """The fds and their link targets one at a time, without those that cannot be read: the slow path, for a
    process that closed an fd since its listing."""
    kept: list[str] = []
    targets: list[str] = []
    for name in names:
        try:
            targets.append(os.readlink(name, dir_fd=dir_fd))
        except PermissionError:
            raise Closed from None
        except OSError:
            continue
        kept.append(name)
    return kept, targets


class Matcher:
    """The watch, read-only: by the path a link reads, and by major:minor (``rdevs``) where the node exists."""

    def __init__(self, proc: str, paths: frozenset[str], rdevs: Mapping[int, str]):
        self.proc = proc
        self.paths = paths
        self.rdevs = rdevs

    def held(self, pid: str) -> list[str]:
        """The watched nodes process ``pid`` holds open, sorted; raises Closed when its fds are closed to us."""
        try:
            # One open of the directory serves its listing and every readlink (relative to it): no path walk
            # through <proc>/PID per fd, nor a second one for the listing.
            dir_fd = os.open(f"{self.proc}/{pid}/fd", DIRECTORY)
        except PermissionError:
            raise Closed from None
        except OSError:  # gone, or not a process directory
            return []
        try:
            try:
                names = os.listdir(dir_fd)
            except PermissionError:
                raise Closed from None
            except OSError:
                return []
            readlink = os.readlink
            try:
                # The common case in one loop; any failure falls back to the careful one. A comprehension
                # passes dir_fd as a keyword name, with no dict: map() over functools.partial(os.readlink,
                # dir_fd=...) built one per call, 30 % slower for the same system calls.
                targets = [readlink(name, dir_fd=dir_fd) for name in names]
            except OSError:
                names, targets = _each(names, dir_fd)
            paths = self.paths
            held = set(paths.intersection(targets))
            if self.rdevs:
                # A node by another name (a container's /dev): one stat per distinct /dev/ target of the
                # process (its 0, 1 and 2 are often the same /dev/null), only where the path did not match.
                # The /dev/ targets are picked out of the sorted distinct ones by bisection, at C level.
                ordered = sorted(set(targets).difference(paths))
                low = bisect.bisect_left(ordered, "/dev/")
                for target in ordered[low : bisect.bisect_left(ordered, "/dev0", low)]:  # "0" follows "/"
                    if target.endswith(" (deleted)"):  # two removed nodes may share a name: each fd of it
                        fds = [name for name, t in zip(names, targets, strict=True) if t == target]
                    else:
                        fds = [names[targets.index(target)]]
                    for name in fds:
                        rdev = _rdev_at(name, dir_fd)
                        if rdev is not None and rdev in self.rdevs:
                            held.add(self.rdevs[rdev])
        finally:
            os.close(dir_fd)
        return sorted(held)

    def read(self, pids: Sequence[str], until: float | None = None) -> tuple[list[Row], int, int]:
        """The holders among ``pids``, how many of them closed their fds to us, and how many were read: all of
        them, unless the clock (``time.monotonic``, one clock for every process of the machine) passed ``until``
        first. The clock is read before each process, so a scan overruns its deadline by one process at most."""
        found: list[Row] = []
        denied = 0
        held = self.held
        done = 0
        for pid in pids:
            if until is not None and time.monotonic() >= until:
                break
            done += 1
            try:
                nodes = held(pid)
            except Closed:
                denied += 1
                continue
            if nodes:
                found.append((pid, nodes))
        return found, denied, done


def claims(tokens: int) -> Iterator[int]:
    """The numbers of the slices this process claims from the pipe ``tokens``, until it is empty."""
    while len(token := os.read(tokens, TOKEN)) == TOKEN:
        yield int.from_bytes(token, "big")


def worker_main() -> None:
    """A worker process' part: the job from the file of fd ``argv[2]``, slices claimed from the pipe of fd
    ``argv[3]``; prints the slices it read, their holders and how many processes closed their fds, as JSON.

    At the job's deadline (``until``, on time.monotonic's clock) it stops and claims no more: ``partial`` is
    then the slice it was reading and how many of its processes it read, ``[index, count]``."""
    job_fd, tokens = int(sys.argv[2]), int(sys.argv[3])
    job = json.loads(os.pread(job_fd, os.fstat(job_fd).st_size, 0))
    os.close(job_fd)
    pids, size, until = job["pids"], job["slice"], job.get("until")
    matcher = Matcher(job["proc"], frozenset(job["paths"]), {rdev: path for rdev, path in job["rdevs"]})
    done: list[int] = []
    partial: list[int] | None = None
    found: list[Row] = []
    denied = 0
    for index in claims(tokens):
        share = pids[index * size : (index + 1) * size]
        rows, closed, count = matcher.read(share, until)
        found += rows
        denied += closed
        if count < len(share):
            partial = [index, count]
            break
        done.append(index)
    json.dump({"done": done, "partial": partial, "found": found, "denied": denied}, sys.stdout)

"""The CPUs this process may really use: its affinity (which `taskset` and a container's cpuset
narrow) and its cgroup's CPU quota (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us`, which
`docker run --cpus` and Kubernetes CPU limits set and `os.cpu_count()` does not show).

Nothing here loads torch: the command line asks before torch starts its threads.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PROC_CGROUP = Path("/proc/self/cgroup")
PROC_MOUNTINFO = Path("/proc/self/mountinfo")


@dataclass(frozen=True)
class CpuBudget:
    """`affinity`: the cores this process may run on; `quota`: the CPUs' worth of time per
    period its cgroup (or a parent of it) allows, None without a limit."""

    affinity: int
    quota: float | None = None

    @property
    def cpus(self) -> int:
        """Whole CPUs to compute on: the fewer of the cores and the quota, the quota rounded
        down (a thread beyond it is throttled, and every step waits for it), at least 1."""
        if self.quota is None:
            return max(1, self.affinity)
        return max(1, min(self.affinity, math.floor(self.quota + 1e-9)))

    def describe(self) -> str:
        quota = "no cgroup CPU quota" if self.quota is None else f"a cgroup quota of {self.quota:g}"
        return f"{self.affinity} usable cores, {quota}"


def cpu_budget(cgroup_file: Path = PROC_CGROUP, mountinfo: Path = PROC_MOUNTINFO) -> CpuBudget:
    """This process's CPU budget, read from its affinity and its cgroup files."""
    return CpuBudget(affinity_count(), cgroup_quota(cgroup_file, mountinfo))


def affinity_count() -> int:
    """The cores this process may run on, or the machine's where that cannot be asked."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cgroup_quota(cgroup_file: Path = PROC_CGROUP, mountinfo: Path = PROC_MOUNTINFO) -> float | None:
    """The tightest CPU quota of this process's cgroup and its ancestors, in CPUs, v2 and v1
    alike; None where there is none or the files cannot be read (not Linux)."""
    try:
        memberships = cgroup_file.read_text(encoding="utf-8").splitlines()
        mounts = mountinfo.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    quotas = [
        quota
        for top, folder, version in _cpu_folders(memberships, mounts)
        for quota in _quotas_up_from(folder, top, version)
    ]
    return min(quotas, default=None)


def _cpu_folders(memberships: list[str], mounts: list[str]) -> Iterator[tuple[Path, Path, int]]:
    """For each cgroup of this process that can limit its CPU (the v2 group, the v1 group of
    the `cpu` controller): where its hierarchy is mounted, its folder there, its version."""
    for line in memberships:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and not controllers:
            version = 2
        elif "cpu" in controllers.split(","):
            version = 1
        else:
            continue
        for mount in mounts:
            found = _mounted(mount, version, path)
            if found is not None:
                yield (*found, version)


def _mounted(mount: str, version: int, path: str) -> tuple[Path, Path] | None:
    """The mount point and the folder of cgroup `path`, if the `mountinfo` line `mount` mounts
    its hierarchy (fields: id, parent, device, root, mount point, options..., then after " - ":
    type, source, super options, where a v1 hierarchy names its controllers)."""
    fields, _, after = mount.partition(" - ")
    head, tail = fields.split(), after.split()
    if len(head) < 5 or len(tail) < 3:
        return None
    root, point = head[3], Path(head[4])
    kind, options = tail[0], tail[2].split(",")
    wanted = kind == "cgroup2" if version == 2 else kind == "cgroup" and "cpu" in options
    if not wanted:
        return None
    relative = os.path.relpath(path, root)
    if relative.startswith(".."):  # a group outside what this mount shows
        return None
    return point, (point / relative).resolve() if relative != "." else point


def _quotas_up_from(folder: Path, top: Path, version: int) -> Iterator[float]:
    """The quota of `folder` and of each parent up to `top`, its hierarchy's mount point."""
    while True:
        quota = _quota(folder, version)
        if quota is not None:
            yield quota
        if folder == top or top not in folder.parents:
            return
        folder = folder.parent


def _quota(folder: Path, version: int) -> float | None:
    """The CPU quota one cgroup folder sets, in CPUs, or None where it sets none."""
    try:
        if version == 2:
            allowed, _, period = (folder / "cpu.max").read_text(encoding="utf-8").partition(" ")
            if allowed.strip() == "max":
                return None
            return int(allowed) / int(period)
        quota = int((folder / "cpu.cfs_quota_us").read_text(encoding="utf-8"))
        if quota < 0:
            return None
        return quota / int((folder / "cpu.cfs_period_us").read_text(encoding="utf-8"))
    except (OSError, ValueError, ZeroDivisionError):
        return None

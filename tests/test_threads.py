"""The CPU threads adaptlab computes with: chosen from the CPUs a process may really use (its
affinity, its cgroup's v1 or v2 quota, its share among processes), OpenMP's waiting threads
made to sleep, both set before torch loads, and a user's own settings kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from adaptlab.cpus import CpuBudget, cgroup_quota, cpu_budget
from adaptlab.errors import ConfigError
from adaptlab.threads import (
    COUNT_VARIABLE,
    SOURCE_VARIABLE,
    THREADS_VARIABLE,
    WAIT_VARIABLE,
    choose_threads,
    threads_for_cpus,
)

OURS = (THREADS_VARIABLE, SOURCE_VARIABLE, COUNT_VARIABLE, WAIT_VARIABLE)


def v2_tree(root: Path, group: str, limits: dict[str, str]) -> tuple[Path, Path]:
    """A fake cgroup v2 hierarchy mounted at `root`, this process in `group`, with `cpu.max`
    written in the folders `limits` names ("" is the top); its /proc/self files."""
    (root / group.strip("/")).mkdir(parents=True, exist_ok=True)
    for folder, limit in limits.items():
        (root / folder / "cpu.max").write_text(limit + "\n")
    proc = root.parent / "proc"
    proc.mkdir(exist_ok=True)
    (proc / "cgroup").write_text(f"0::{group}\n")
    (proc / "mountinfo").write_text(
        "25 30 0:22 / /sys rw,nosuid - sysfs sysfs rw\n"
        f"31 25 0:26 / {root} rw,nosuid,nodev,noexec - cgroup2 cgroup2 rw,nsdelegate\n"
    )
    return proc / "cgroup", proc / "mountinfo"


def v1_tree(root: Path, group: str, quota: str, period: str = "100000") -> tuple[Path, Path]:
    """A fake cgroup v1 `cpu,cpuacct` hierarchy mounted at `root` whose mount root is
    /docker (as a container without a cgroup namespace sees it), this process in `group`."""
    folder = root / group.removeprefix("/docker").strip("/")
    folder.mkdir(parents=True, exist_ok=True)
    (root / "cpu.cfs_quota_us").write_text("-1\n")
    (root / "cpu.cfs_period_us").write_text("100000\n")
    (folder / "cpu.cfs_quota_us").write_text(quota + "\n")
    (folder / "cpu.cfs_period_us").write_text(period + "\n")
    proc = root.parent / "proc"
    proc.mkdir(exist_ok=True)
    (proc / "cgroup").write_text(f"12:memory:{group}\n4:cpu,cpuacct:{group}\n0::/\n")
    (proc / "mountinfo").write_text(
        f"40 31 0:35 /docker {root} rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
        "41 31 0:36 /docker /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
    )
    return proc / "cgroup", proc / "mountinfo"


def test_a_v2_quota_and_the_tightest_of_its_parents(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    files = v2_tree(root, "/user/job", {"": "max 100000", "user/job": "max 100000"})
    assert cgroup_quota(*files) is None
    files = v2_tree(root, "/user/job", {"user/job": "150000 100000"})
    assert cgroup_quota(*files) == pytest.approx(1.5)
    files = v2_tree(root, "/user/job", {"user": "50000 100000"})  # the parent's is tighter
    assert cgroup_quota(*files) == pytest.approx(0.5)


def test_a_v1_quota_under_a_mount_root_and_none(tmp_path: Path) -> None:
    root = tmp_path / "cpu"
    assert cgroup_quota(*v1_tree(root, "/docker/abc", "200000")) == pytest.approx(2.0)
    assert cgroup_quota(*v1_tree(root, "/docker/abc", "-1")) is None
    assert cgroup_quota(*v1_tree(root, "/docker/abc", "50000", period="200000")) == 0.25


def test_unreadable_or_foreign_cgroup_files_mean_no_quota(tmp_path: Path) -> None:
    assert cgroup_quota(tmp_path / "missing", tmp_path / "missing") is None
    cgroup, mountinfo = v2_tree(tmp_path / "cgroup", "/job", {"job": "not a number"})
    assert cgroup_quota(cgroup, mountinfo) is None
    cgroup.write_text("0::/../elsewhere\n")  # a group outside what the mount shows
    assert cgroup_quota(cgroup, mountinfo) is None


@pytest.mark.parametrize(
    ("affinity", "quota", "cpus"),
    [(4, None, 4), (4, 2.0, 2), (4, 1.5, 1), (2, 8.0, 2), (4, 0.25, 1), (0, None, 1)],
)
def test_the_cpus_are_the_fewer_of_cores_and_quota_rounded_down(
    affinity: int, quota: float | None, cpus: int
) -> None:
    assert CpuBudget(affinity, quota).cpus == cpus


def test_the_affinity_set_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2, 5}, raising=False)
    files = v2_tree(tmp_path / "cgroup", "/job", {"job": "max 100000"})
    assert cpu_budget(*files) == CpuBudget(3, None)
    choice = choose_threads(environ={}, budget=cpu_budget(*files))
    assert (choice.threads, choice.wait_policy, choice.given) == (3, "PASSIVE", False)
    assert "3 usable cores" in choice.source


def test_a_share_of_the_budget_for_each_of_several_processes() -> None:
    budget = CpuBudget(8, 6.0)
    halves = choose_threads(processes=2, environ={}, budget=budget)
    assert halves.threads == 3 and halves.source.endswith("shared by 2 processes")
    assert choose_threads(processes=4, environ={}, budget=budget).threads == 1
    assert choose_threads(processes=16, environ={}, budget=budget).threads == 1


def test_the_users_settings_win_in_order() -> None:
    budget = CpuBudget(8)
    given = {COUNT_VARIABLE: "3", THREADS_VARIABLE: "5", WAIT_VARIABLE: "ACTIVE"}
    choice = choose_threads(2, environ=given, budget=budget)
    assert (choice.threads, choice.source, choice.wait_policy, choice.given) == (
        2,
        "--threads",
        "ACTIVE",
        True,
    )
    assert choose_threads(environ=given, budget=budget).threads == 5
    del given[THREADS_VARIABLE]
    assert choose_threads(environ=given, budget=budget).source == COUNT_VARIABLE
    assert choose_threads(processes=8, environ=given, budget=budget).threads == 3


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5", ""])
def test_a_bad_count_is_one_line_naming_it(value: str) -> None:
    with pytest.raises(ConfigError, match=f"{THREADS_VARIABLE} must be a whole number"):
        choose_threads(environ={THREADS_VARIABLE: value or " "}, budget=CpuBudget(2))


def test_a_ray_task_computes_on_the_cpus_it_asks_for(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in OURS:
        monkeypatch.delenv(variable, raising=False)
    choice = threads_for_cpus(3.5)
    assert choice.threads == 3 and choice.environment()[COUNT_VARIABLE] == "3"
    assert threads_for_cpus(0.25).threads == 1


CHILD = """
import importlib.abc, json, os, sys
at_torch = {}
class Watch(importlib.abc.MetaPathFinder):  # the environment as torch starts to load
    def find_spec(self, name, path, target=None):
        if name == "torch" and not at_torch:
            at_torch.update({k: os.environ.get(k) for k in %r})
sys.meta_path.insert(0, Watch())
from adaptlab.cli.app import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
import torch
print(json.dumps({"env": at_torch, "torch": torch.get_num_threads()}))
"""


def child(args: list[str], **variables: str) -> dict[str, object]:
    """The environment of a fresh `adaptlab ARGS` process as torch started to load, and the
    threads torch computes with."""
    environ = {k: v for k, v in os.environ.items() if k not in OURS} | variables
    done = subprocess.run(
        [sys.executable, "-c", CHILD % (OURS,), *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=300,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_command_line_sets_both_before_torch_loads() -> None:
    found = child(["methods"])
    cpus = cpu_budget().cpus
    assert found["env"] == {
        THREADS_VARIABLE: str(cpus),
        SOURCE_VARIABLE: cpu_budget().describe(),
        COUNT_VARIABLE: str(cpus),
        WAIT_VARIABLE: "PASSIVE",
    }
    assert found["torch"] == cpus


def test_training_commands_keep_openmps_default_wait() -> None:
    env = child(["train", "--help"])["env"]
    assert env[WAIT_VARIABLE] is None and env[COUNT_VARIABLE] == str(cpu_budget().cpus)  # type: ignore[index]
    env = child(["study", "--help"], OMP_WAIT_POLICY="PASSIVE")["env"]
    assert env[WAIT_VARIABLE] == "PASSIVE"  # type: ignore[index]


def test_a_wait_policy_only_where_asked() -> None:
    budget = CpuBudget(2)
    assert choose_threads(environ={}, budget=budget, passive=False).wait_policy is None
    assert (
        WAIT_VARIABLE not in choose_threads(environ={}, budget=budget, passive=False).environment()
    )
    assert choose_threads(environ={}, budget=budget).environment()[WAIT_VARIABLE] == "PASSIVE"


def test_the_command_line_keeps_what_the_user_set() -> None:
    assert child(["methods"], OMP_WAIT_POLICY="ACTIVE", OMP_NUM_THREADS="1")["env"] == {
        THREADS_VARIABLE: "1",
        SOURCE_VARIABLE: COUNT_VARIABLE,
        COUNT_VARIABLE: "1",
        WAIT_VARIABLE: "ACTIVE",
    }
    found = child(["methods", "--threads", "1"], ADAPTLAB_THREADS="2")
    assert found["env"][COUNT_VARIABLE] == "1" and found["torch"] == 1  # type: ignore[index]
    assert child(["--threads=1", "methods"])["torch"] == 1

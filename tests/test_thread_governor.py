"""The share of a process's cores other work holds (read from fake /proc/stat files), and the
governor that computes on fewer threads while it does, never below 1, never above what
adaptlab chose, never touching a count the user set."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from cli_cases import train_run, write_reviews

import adaptlab.engine.thread_governor as governor_module
from adaptlab.cpu_load import OtherWork, busy_seconds
from adaptlab.engine.thread_governor import ThreadGovernor, threads_beside
from adaptlab.threads import ThreadChoice

TICK = os.sysconf("SC_CLK_TCK")


def stat_file(path: Path, cores: dict[int, tuple[int, ...]]) -> Path:
    """A /proc/stat with a summary line and a line per core: user nice system idle iowait irq
    softirq steal, in ticks."""
    total = [sum(column) for column in zip(*cores.values(), strict=True)]
    lines = ["cpu  " + " ".join(map(str, total))]
    lines += [f"cpu{core} " + " ".join(map(str, ticks)) for core, ticks in cores.items()]
    path.write_text("\n".join([*lines, "intr 12345 0 0", "ctxt 99", "btime 1"]) + "\n")
    return path


def test_busy_time_counts_the_chosen_cores_and_leaves_niced_work_out(tmp_path: Path) -> None:
    stat = stat_file(
        tmp_path / "stat",
        {0: (100, 50, 20, 900, 5, 1, 2, 3), 1: (10, 0, 0, 990, 0, 0, 0, 0), 2: (500,) * 8},
    )
    assert busy_seconds({0, 1}, counts_niced=False, stat=stat) == pytest.approx(136 / TICK)
    assert busy_seconds({0, 1}, counts_niced=True, stat=stat) == pytest.approx(186 / TICK)
    assert busy_seconds({0}, counts_niced=False, stat=tmp_path / "missing") is None


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_other_work_is_the_busy_time_less_this_process_own(tmp_path: Path) -> None:
    stat, clock, own = tmp_path / "stat", Clock(), Clock()
    stat_file(stat, {0: (0,) * 8, 1: (0,) * 8})
    work = OtherWork({0, 1}, stat=stat, clock=clock, own=own)
    # two seconds: this process used 2 s of CPU, the cores were busy 3.5 s, niced work 2 s more
    clock.now, own.now = 2.0, 2.0
    stat_file(
        stat, {0: (2 * TICK, 2 * TICK, 0, 0, 0, 0, 0, 0), 1: (TICK, 0, TICK // 2, 0, 0, 0, 0, 0)}
    )
    assert work.held() == pytest.approx(0.75)  # (3.5 - 2) / 2 s
    clock.now = 4.0  # nothing more happened: nothing held
    assert work.held() == 0.0


def test_unreadable_stat_means_no_reading(tmp_path: Path) -> None:
    work = OtherWork({0}, stat=tmp_path / "missing")
    assert work.held() is None


@pytest.mark.parametrize(
    ("chosen", "cpus", "held", "threads"),
    [
        (2, 2, 0.0, 2),
        (2, 2, 0.4, 2),
        (2, 2, 0.6, 1),
        (2, 2, 2.0, 1),
        (8, 8, 3.0, 5),
        (4, 8, 1.0, 4),
    ],
)
def test_the_cpus_left_rounded_within_one_and_the_choice(
    chosen: int, cpus: int, held: float, threads: int
) -> None:
    assert threads_beside(chosen, cpus, held) == threads


class Scripted:
    """An `OtherWork` whose readings are given."""

    def __init__(self, readings: list[float | None], cores: set[int]) -> None:
        self.readings, self.cores = readings, cores

    def held(self) -> float | None:
        return self.readings.pop(0)


@pytest.fixture
def two_threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    chosen = ThreadChoice(2, "PASSIVE", "2 usable cores", given=False)
    monkeypatch.setattr(governor_module, "chosen_threads", lambda: chosen)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def test_the_governor_follows_the_load_and_restores_the_choice(two_threads: None) -> None:
    work = Scripted([0.9, None, 1.0, 0.1], {0, 1})
    seen = []
    with ThreadGovernor(interval=0.0, work=work) as governor:  # type: ignore[arg-type]
        for step in range(4):
            governor.tick(step)
            seen.append(torch.get_num_threads())
        torch.set_num_threads(1)
    assert seen == [1, 1, 1, 2]
    assert torch.get_num_threads() == 2  # the choice again after the block


def test_a_count_the_user_set_is_never_changed(
    two_threads: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = ThreadChoice(2, "PASSIVE", "--threads", given=True)
    monkeypatch.setattr(governor_module, "chosen_threads", lambda: given)
    work = Scripted([2.0], {0, 1})
    with ThreadGovernor(interval=0.0, work=work) as governor:  # type: ignore[arg-type]
        governor.tick(1)
        assert torch.get_num_threads() == 2
    monkeypatch.setattr(governor_module, "chosen_threads", lambda: None)  # a library user's
    with ThreadGovernor(interval=0.0, work=work) as governor:  # type: ignore[arg-type]
        governor.tick(1)
        assert torch.get_num_threads() == 2 and work.readings == [2.0]


def test_no_reading_before_the_interval(two_threads: None) -> None:
    work = Scripted([2.0], {0, 1})
    with ThreadGovernor(interval=3600.0, work=work) as governor:  # type: ignore[arg-type]
        governor.tick(1)
    assert work.readings == [2.0] and torch.get_num_threads() == 2


def test_the_training_loop_ticks_and_says_so_in_train_log(
    two_threads: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tiny_model: Path
) -> None:
    monkeypatch.setattr(governor_module, "INTERVAL", 0.0)
    monkeypatch.setattr(governor_module, "OtherWork", lambda cores: Scripted([1.5] * 99, {0, 1}))
    out = train_run(str(tiny_model), write_reviews(tmp_path / "reviews.csv"), tmp_path / "run")
    log = (out / "train.log").read_text()
    assert "cpu 1 threads from step 1: other work held 1.5 of 2 CPUs" in log
    assert torch.get_num_threads() == 2  # restored as training ended

"""`adaptlab study`: run a grid of training runs into a results store, watch it, report it."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from adaptlab.cli.console import console
from adaptlab.cli.options import positive
from adaptlab.errors import AdaptlabError, ConfigError
from adaptlab.paths import check_output_file, listed
from adaptlab.study.progress import format_duration
from adaptlab.study.status import StudyStatus, study_status
from adaptlab.study.store import (
    load_records,
    load_sequences,
    load_unplanned,
    load_validations,
)
from adaptlab.study.store_paths import store_files

if TYPE_CHECKING:
    from adaptlab.study.executors import Executor

app = typer.Typer(help="Run studies (grids of runs) into a results store.", no_args_is_help=True)


class ExecutorName(StrEnum):
    """Where runs execute."""

    local = "local"
    ray = "ray"


class RunsFailed(AdaptlabError):
    """Some runs of a study failed; the others are done and stored."""


SpecArgument = Annotated[Path, typer.Argument(help="Study spec (YAML).", show_default=False)]
StoreArgument = Annotated[
    Path,
    typer.Argument(help="Results store (.db), or the study spec to use its default store."),
]


@app.command("run")
def run(
    spec: SpecArgument,
    store: Annotated[
        Path | None,
        typer.Option(help="Results store (SQLite); default: <name>.db beside the spec."),
    ] = None,
    executor: Annotated[
        ExecutorName,
        typer.Option(
            help="local: one run after another; ray: Ray tasks, with the spec's resources."
        ),
    ] = ExecutorName.local,
    address: Annotated[
        str | None,
        typer.Option(
            help="A running Ray cluster's address (auto: the one this machine is part of); "
            "default: start a local Ray."
        ),
    ] = None,
    ray_cpus: Annotated[
        int | None,
        typer.Option(help="CPUs of the local Ray started when no --address.", callback=positive),
    ] = None,
    progress: Annotated[
        bool | None,
        typer.Option(help="Show each run's progress bar (--executor local; shown by default)."),
    ] = None,
    rerun_changed: Annotated[
        bool,
        typer.Option(help="Run done runs again whose data file changed since (else: refuse)."),
    ] = False,
) -> None:
    """Run every run of a study not yet in its store; run it again to resume.

    Example:

        adaptlab study run examples/quick.yaml

        adaptlab study run examples/low-resource.yaml --executor ray --address auto
    """
    from adaptlab.study.runner import run_study  # training code: loaded to run, not to report

    summary = run_study(
        spec,
        store_path=store,
        executor=_executor(spec, executor, address, ray_cpus, progress),
        rerun_changed=rerun_changed,
    )
    failed = summary.failed
    if failed:
        raise RunsFailed(
            f"{len(failed)} of {len(summary.outcomes)} runs failed (first: "
            f"{failed[0].run.method_label}: {failed[0].error}); `adaptlab study status "
            f"{summary.store}` lists them, and running this command again retries them"
        )


def _executor(
    spec: Path,
    name: ExecutorName,
    address: str | None,
    ray_cpus: int | None,
    progress: bool | None,
) -> Executor:
    """The executor --executor names, refusing the options of the other one."""
    if name is ExecutorName.local:
        if address is not None or ray_cpus is not None:
            raise ConfigError("--address and --ray-cpus need --executor ray")
        from adaptlab.study.executors import LocalExecutor

        return LocalExecutor(progress=progress is not False)
    if progress:
        raise ConfigError(
            "--progress is for --executor local: Ray's tasks show no progress bar; drop it"
        )
    from adaptlab.study.ray_executor import RayExecutor
    from adaptlab.study.spec import load_spec

    return RayExecutor(load_spec(spec).resources, address=address, num_cpus=ray_cpus)


@app.command("status")
def status(store: StoreArgument) -> None:
    """Show done / running / failed / left runs of each study in a store, with an ETA.

    Example:

        adaptlab study status examples/low-resource.db
    """
    studies = study_status(_store_path(store))
    out = console()
    if not studies:
        out.print(f"no study planned in {store} yet", soft_wrap=True, highlight=False)
    for study in studies:
        out.print(_totals(study))
        out.print(_methods(study))
        for error in study.errors[:5]:
            out.print(
                Text.assemble(("failed", "red"), f" {error}"), highlight=False, soft_wrap=True
            )
        if len(study.errors) > 5:
            out.print(f"... and {len(study.errors) - 5} more failed runs")
        if study.changed:
            out.print(
                Text.assemble(
                    ("data changed", "yellow"),
                    f" under {len(study.changed)} done runs since they ran "
                    f"({listed(study.changed)}); `adaptlab study run SPEC --rerun-changed` "
                    "runs them again",
                ),
                highlight=False,
                soft_wrap=True,
            )
        if study.unplanned:
            out.print(_unplanned(study.unplanned), highlight=False, soft_wrap=True)


def _unplanned(runs: list[str]) -> str:
    """The line `status` and `report` both print about done runs the spec no longer has."""
    return (
        f"{len(runs)} done run{'s are' if len(runs) > 1 else ' is'} no longer in the spec "
        f"(kept in the store, left out of counts and reports): {listed(runs)}"
    )


def _totals(study: StudyStatus) -> Table:
    table = Table(title=f"study {study.study}")
    columns = ["planned", "done", "running", "failed", "left", "mean run", "ETA"]
    if study.stages:
        columns[-2:-2] = ["stages done"]
    for column in columns:
        table.add_column(column, justify="right")
    mean, eta = study.mean_seconds, study.eta_seconds
    left = f"{study.left} ({study.interrupted} interrupted)" if study.interrupted else study.left
    cells = [str(study.planned), str(study.done), str(study.running), str(study.failed), str(left)]
    if study.stages:
        cells.append(f"{study.stages_done}/{study.stages}")
    table.add_row(
        *cells,
        format_duration(mean) if mean is not None else "-",
        format_duration(eta) if eta is not None else "-",
    )
    return table


def _methods(study: StudyStatus) -> Table:
    table = Table(title="by method")
    table.add_column("method")
    table.add_column("done", justify="right")
    table.add_column("failed", justify="right")
    for count in study.methods.values():
        table.add_row(count.label, f"{count.done}/{count.planned}", str(count.failed))
    return table


@app.command("report")
def report(
    store: StoreArgument,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="HTML file to write; default: the store's name + .html."),
    ] = None,
    title: Annotated[
        str | None, typer.Option(help="Report title; default: the study names.")
    ] = None,
    metric: Annotated[
        str | None,
        typer.Option(help="Judge methods by this metric instead of the studies' own choice."),
    ] = None,
) -> None:
    """Write an HTML report of a store's finished runs (tables and plots).

    Example:

        adaptlab study report examples/low-resource.db -o low-resource.html

        adaptlab study report examples/reuters-imbalance.db --metric accuracy -o by-accuracy.html
    """
    from adaptlab.report import is_report, write_report

    path = _store_path(store)
    target = out or path.with_suffix(".html")
    check_output_file(target, "report", replaceable=is_report, inputs=store_files(path))
    records = load_records(path, planned_only=True)
    sequences = load_sequences(path, planned_only=True)
    unplanned = load_unplanned(path)
    if unplanned:
        console().print(
            _unplanned([f"{label} ({run_id})" for _, run_id, label in unplanned]),
            soft_wrap=True,
            highlight=False,
        )
    studies = sorted({r.study for r in records} | {s.study for s in sequences})
    written = write_report(
        records,
        target,
        title=title or ", ".join(studies) or path.stem,
        validations=load_validations(path),
        metric=metric,
        sequences=sequences,
    )
    counted = [f"{len(records)} runs"] if records or not sequences else []
    counted += [f"{len(sequences)} sequences"] if sequences else []
    console().print(
        f"report of {' and '.join(counted)} written to {written}", soft_wrap=True, highlight=False
    )


def _store_path(path: Path) -> Path:
    """The store itself, or the default store of a study spec."""
    if path.suffix.lower() in (".yaml", ".yml"):
        from adaptlab.study.runner import default_store
        from adaptlab.study.spec import load_spec

        return default_store(path, load_spec(path))
    return path

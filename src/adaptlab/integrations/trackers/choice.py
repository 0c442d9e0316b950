"""Which experiment trackers a run reports to (`--report-to`, a study's `report_to:`) and where
each writes, as plain data: a `Tracking` is made where the run is planned and travels with it
(to a Ray task, a subprocess) so the trackers are opened where the run trains.

Nothing is sent anywhere the user did not name: the default is no tracker; TensorBoard writes
event files beside the run; MLflow writes to the `MLFLOW_TRACKING_URI` the user set, else to a
local file store `./mlruns`. Whether each can record there is checked before the run trains
(`adaptlab.integrations.trackers.destinations`).
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

from adaptlab.checks import shown
from adaptlab.errors import ConfigError

TRACKERS = ("tensorboard", "mlflow")
NONE = "none"
PACKAGES = {"tensorboard": "tensorboard==2.21.0", "mlflow": "mlflow-skinny==3.17.2"}
"""What `pip install` brings each tracker (the pins of the `integrations` extra)."""
TENSORBOARD_FOLDER = "tensorboard"
DEFAULT_EXPERIMENT = "adaptlab"
DEFAULT_STORE = "mlruns"
NAMED_STORES = ("databricks", "databricks-uc", "uc")
"""Tracking URIs that are a name, not a path (MLflow's Databricks and Unity Catalog stores)."""


@dataclass(frozen=True)
class Tracking:
    """Where one run reports: its trackers, TensorBoard's event folder, MLflow's tracking URI,
    experiment, run name and tags (a study cell's `run_id` tag marks earlier tries of the
    cell, which a new try replaces)."""

    trackers: tuple[str, ...]
    log_dir: str
    tracking_uri: str
    experiment: str
    run_name: str
    tags: tuple[tuple[str, str], ...] = ()


def report_to(value: str | Sequence[str], where: str = "--report-to") -> tuple[str, ...]:
    """`none`, a tracker, or trackers (comma-separated or listed) as the trackers named;
    ConfigError in one line, naming the option or key `where`, for any other name."""
    parts = value.split(",") if isinstance(value, str) else list(value)
    names = [str(name).strip() for name in parts]
    chosen: list[str] = []
    for name in names:
        if name not in (*TRACKERS, NONE):
            raise ConfigError(
                f"{where}: expected {NONE}, {' or '.join(TRACKERS)} (or both, "
                f"comma-separated), got {shown(name)}"
            )
        if name != NONE and name not in chosen:
            chosen.append(name)
    if NONE in names and chosen:
        raise ConfigError(f"{where}: {NONE} cannot be given with {', '.join(chosen)}")
    return tuple(chosen)


def require_installed(trackers: Sequence[str], where: str = "--report-to") -> None:
    """Fail in one line, before any work, when a tracker's package is not installed."""
    for name in trackers:
        if importlib.util.find_spec(name) is None:
            raise ConfigError(
                f"{where} {name} needs `pip install {PACKAGES[name]}` (or the integrations "
                "extra: pip install 'adaptlab[integrations]')"
            )


def mlflow_uri() -> str:
    """The tracking URI the user set (`MLFLOW_TRACKING_URI`), else the file store ./mlruns; a
    path (which MLflow takes as a file store) as the `file:` URI of its absolute form, so it
    names the same folder wherever the run trains."""
    value = os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_STORE
    if value != value.strip():
        raise ConfigError(
            f"MLFLOW_TRACKING_URI {shown_uri(value)!r} has spaces around it; set it without them"
        )
    try:
        scheme = urlsplit(value).scheme
    except ValueError as error:
        raise ConfigError(
            f"MLFLOW_TRACKING_URI {shown_uri(value)!r} is no URI ({error}); give a folder, a "
            "file: URI or a server's http(s):// address"
        ) from None
    if scheme or value in NAMED_STORES:
        return value
    return Path(value).resolve().as_uri()


def shown_uri(uri: str) -> str:
    """`uri` as a message shows it: without the user name and password it may hold."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@", r"\1", uri)


def file_store(uri: str) -> Path | None:
    """The folder of a `file:` tracking URI (an MLflow file store); None for any other."""
    parts = urlsplit(uri)
    return Path(url2pathname(parts.path)).absolute() if parts.scheme == "file" else None


def folder_tracking(value: str | Sequence[str], out: str | os.PathLike[str]) -> Tracking | None:
    """Tracking for a command writing the folder `out` (train, sequence), or None for none:
    TensorBoard events in `<out's parent>/tensorboard/<out's name>` (the run folder itself is
    written whole when the run ends), MLflow run named after the folder in the experiment
    `MLFLOW_EXPERIMENT_NAME` (default "adaptlab")."""
    trackers = report_to(value)
    if not trackers:
        return None
    require_installed(trackers)
    folder = Path(out).resolve()
    if TENSORBOARD_FOLDER in trackers and folder.name == TENSORBOARD_FOLDER:
        raise ConfigError(
            f"--out {out} is named {TENSORBOARD_FOLDER}, the folder beside each run that holds "
            "the TensorBoard events of the runs there; give the run folder another name"
        )
    uri = mlflow_uri()
    store = file_store(uri)
    if "mlflow" in trackers and store is not None and _overlap(store, folder):
        raise ConfigError(
            f"--out {out} and MLflow's file store {store} (MLFLOW_TRACKING_URI, else ./mlruns) "
            "overlap; give the run folder another place or set MLFLOW_TRACKING_URI elsewhere"
        )
    return Tracking(
        trackers,
        log_dir=str(folder.parent / TENSORBOARD_FOLDER / folder.name),
        tracking_uri=uri,
        experiment=os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT,
        run_name=folder.name,
    )


def study_tracking(
    trackers: Sequence[str], store: Path, study: str, run_id: str, tags: Mapping[str, str]
) -> Tracking | None:
    """Tracking for one cell of a study, or None for none: TensorBoard events in
    `<store name>-tensorboard/<run id>` beside the store, one MLflow experiment named after the
    study with a run per cell named by its id and tagged with `tags`, `run_id` and `study`."""
    if not trackers:
        return None
    require_installed(trackers, "report_to:")
    store = store.resolve()
    marks = {**tags, "study": study, "run_id": run_id}
    return Tracking(
        tuple(trackers),
        log_dir=str(store.with_name(f"{store.stem}-{TENSORBOARD_FOLDER}") / run_id),
        tracking_uri=mlflow_uri(),
        experiment=study,
        run_name=run_id,
        tags=tuple(marks.items()),
    )


def _overlap(first: Path, second: Path) -> bool:
    """Whether one of two paths is, or lies inside, the other (after following links)."""
    one, two = Path(os.path.realpath(first)), Path(os.path.realpath(second))
    return one == two or one in two.parents or two in one.parents

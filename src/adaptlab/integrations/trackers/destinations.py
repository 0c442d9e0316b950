"""Where a run's trackers record, checked before it trains, so that a tracker that cannot record
stops the run in one line instead of failing (or hanging) once training is under way.

TensorBoard: the event folder is a folder (or can be made), can be written, is no symbolic
link and holds no event files adaptlab did not write. MLflow: a file store is a folder that can
be written; a server answers within `PROBE_SECONDS` (MLflow's own client would retry for
minutes); a database store has its package; the run's names, tags and parameters are text
MLflow can keep. Nothing is written.
"""

from __future__ import annotations

import importlib.util
import os
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from adaptlab.checks import shown
from adaptlab.errors import ConfigError
from adaptlab.integrations.trackers.choice import NAMED_STORES, Tracking, file_store, shown_uri
from adaptlab.integrations.trackers.records import flat_params
from adaptlab.integrations.trackers.tensorboard import EVENTS_MARK, foreign_events
from adaptlab.paths import check_not_link, listed, write_denied

PROBE_SECONDS = 5.0
"""How long a tracking server has to answer one request before the run is refused."""
SERVER_SCHEMES = ("http", "https")
DATABASE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")
"""MLflow's SQLAlchemy stores (`postgresql+psycopg2:` names a driver too)."""
PLUGIN_STORES = "mlflow.tracking_store"
"""The entry-point group through which a package adds tracking URI schemes to MLflow."""
MAX_EXPERIMENT = 500
"""The longest experiment name MLflow takes."""
ELSEWHERE = "or put the run (--out) or the study's store elsewhere"


def check_destinations(runs: Sequence[tuple[Tracking, Mapping[str, Any]]]) -> None:
    """Fail in one line, writing nothing, unless each (tracking, spec) of `runs` can be recorded
    where its trackers write (module doc); each MLflow store is asked once."""
    stores: dict[str, None] = {}
    for tracking, spec in runs:
        if "tensorboard" in tracking.trackers:
            check_event_folder(Path(tracking.log_dir))
        if "mlflow" in tracking.trackers:
            check_mlflow_text(tracking, flat_params(spec))
            stores[tracking.tracking_uri] = None
    for uri in stores:
        check_mlflow_store(uri)


def check_event_folder(folder: Path) -> None:
    """A folder TensorBoard events can go to, holding no other writer's event files."""
    check_not_link(folder, "the TensorBoard folder")
    if folder.exists() and not folder.is_dir():
        raise ConfigError(
            f"the TensorBoard folder {folder} is a file, not a folder; move it away, {ELSEWHERE}"
        )
    reason = write_denied(folder)
    if reason is not None:
        raise ConfigError(
            f"cannot write TensorBoard events to {folder} ({reason}); make room there, {ELSEWHERE}"
        )
    foreign = foreign_events(folder)
    if foreign:
        raise ConfigError(
            f"the TensorBoard folder {folder} holds event files adaptlab did not write "
            f"({listed(foreign)}), which a run never replaces (its own end in {EVENTS_MARK}); "
            f"move them away, {ELSEWHERE}"
        )


def check_mlflow_text(tracking: Tracking, params: Mapping[str, str]) -> None:
    """The experiment, run name, tags and parameters are text MLflow can keep (UTF-8, and an
    experiment name of at most `MAX_EXPERIMENT` characters)."""
    texts = [
        ("MLflow experiment", tracking.experiment),
        ("MLflow run name", tracking.run_name),
        *((f"MLflow tag {key}", value) for key, value in tracking.tags),
        *((f"parameter {key}", value) for key, value in params.items()),
    ]
    for what, text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(
                f"{what} {shown(text)} is not UTF-8 text (a file name's bytes?), which MLflow "
                "cannot store; rename what it names, or leave mlflow out of the trackers"
            ) from None
    if len(tracking.experiment) > MAX_EXPERIMENT:
        raise ConfigError(
            f"MLflow experiment name has {len(tracking.experiment)} characters; MLflow takes at "
            f"most {MAX_EXPERIMENT}: set MLFLOW_EXPERIMENT_NAME to a shorter one"
        )


def check_mlflow_store(uri: str) -> None:
    """The tracking URI names a store MLflow can record to from here (module doc)."""
    scheme = urlsplit(uri).scheme.lower()
    folder = file_store(uri)
    if folder is not None:
        _check_file_store(folder)
    elif scheme in SERVER_SCHEMES:
        _check_server(uri)
    elif scheme.partition("+")[0] in DATABASE_SCHEMES:
        if importlib.util.find_spec("sqlalchemy") is None:
            raise ConfigError(
                f"MLFLOW_TRACKING_URI {shown_uri(uri)} is a database store, which needs the full "
                "MLflow package: pip install mlflow==3.17.2 (mlflow-skinny has none)"
            )
    elif uri not in NAMED_STORES and scheme not in NAMED_STORES and scheme not in _plugins():
        raise ConfigError(
            f"MLFLOW_TRACKING_URI {shown_uri(uri)}: MLflow has no store for {scheme + ':'!r}; "
            "give a folder, a file: URI, an http(s):// server or a database URI"
        )


def _check_file_store(folder: Path) -> None:
    """A file store: a folder that can be written, which MLflow is allowed to use."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(
            f"MLflow's file store {folder} (MLFLOW_TRACKING_URI, else ./mlruns) is a file, not a "
            "folder; move it away or set MLFLOW_TRACKING_URI to a folder or a server"
        )
    reason = write_denied(folder)
    if reason is not None:
        raise ConfigError(
            f"cannot write MLflow's file store {folder} ({reason}); set MLFLOW_TRACKING_URI to "
            "a folder you can write to, or to a server"
        )
    allowed = os.environ.get("MLFLOW_ALLOW_FILE_STORE")
    if allowed is not None and allowed.strip().lower() not in ("true", "1"):
        raise ConfigError(
            f"MLFLOW_ALLOW_FILE_STORE is {allowed!r}, so MLflow refuses its file store {folder}; "
            "set it to true (or leave it unset), or set MLFLOW_TRACKING_URI to a server"
        )


def _check_server(uri: str) -> None:
    """A tracking server answers one request (any HTTP status) within `PROBE_SECONDS`."""
    parts = urlsplit(uri)
    netloc = parts.netloc.rpartition("@")[2]  # credentials travel in MLflow's own requests
    probe = parts._replace(netloc=netloc, path=parts.path.rstrip("/") + "/health", query="")
    context = ssl.create_default_context()
    context.check_hostname = False  # whether it answers, not whom MLflow will trust
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(probe.geturl(), timeout=PROBE_SECONDS, context=context):
            return
    except urllib.error.HTTPError:
        return  # an error status is an answer: MLflow's own requests say more
    except (OSError, ValueError) as error:
        raise ConfigError(
            f"MLflow server {shown_uri(uri)} does not answer ({_why(error)}); start it, or set "
            "MLFLOW_TRACKING_URI to one that answers"
        ) from None


def _why(error: BaseException) -> str:
    """A failed request's cause in a few words: `connection refused`, `nothing in 5 s`."""
    cause = getattr(error, "reason", error)
    if isinstance(cause, TimeoutError):
        return f"nothing in {PROBE_SECONDS:g} s"
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror.lower()
    return str(cause) or type(cause).__name__


def _plugins() -> set[str]:
    """The URI schemes installed packages add to MLflow."""
    return {entry.name for entry in entry_points(group=PLUGIN_STORES)}

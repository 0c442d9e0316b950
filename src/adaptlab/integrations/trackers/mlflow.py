"""MLflow: a run as an MLflow run (its spec as parameters, tags, metrics per step and epoch, the
adapter folder as an artifact), through an `MlflowClient` on the run's own tracking URI (no
process-wide active run, so runs in one process never mix).

Step metrics are buffered and sent with `log_batch` at each epoch's end and every
`BATCH_METRICS` values, not one request (or file write) per step. MLflow 3 refuses a file
store unless `MLFLOW_ALLOW_FILE_STORE` is set: with a `file:` URI (the default ./mlruns)
adaptlab sets it to true in its own process unless the user set it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from adaptlab.errors import ConfigError
from adaptlab.integrations.trackers.choice import Tracking, shown_uri
from adaptlab.integrations.trackers.reporter import Status

if TYPE_CHECKING:
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

BATCH_METRICS = 500
"""Buffered metric values sent at once (MLflow takes at most 1,000 per batch)."""
BATCH_PARAMS = 100
"""Parameters or tags per batch (MLflow's limit)."""
MAX_PARAM = 6000
"""Characters of a parameter value MLflow keeps."""
ARTIFACT = "adapter"


@contextmanager
def _answering(uri: str) -> Iterator[None]:
    """MLflow's errors (a server that does not answer, a bad URI, a file store that cannot be
    written) as one line naming the URI."""
    from mlflow.exceptions import MlflowException

    try:
        yield
    except (MlflowException, OSError) as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ConfigError(f"MLflow at {shown_uri(uri)}: {first}") from None


class MlflowSink:
    """One MLflow run of `tracking.experiment` (made if missing) named `tracking.run_name`.

    A study cell's earlier runs (same `run_id` tag: a try that was cut off, or a run whose data
    changed since) are moved to MLflow's trash first, so the experiment holds one run per cell
    (`MlflowClient.restore_run` brings one back). A `resumed` run goes on in the latest MLflow
    run of its name when that one did not finish."""

    def __init__(
        self, tracking: Tracking, params: Mapping[str, str], resumed: bool = False
    ) -> None:
        from mlflow.tracking import MlflowClient

        uri = tracking.tracking_uri
        if uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self._uri = uri
        self._pending: list[Metric] = []
        with _answering(uri):
            self._client = MlflowClient(tracking_uri=uri)
            self._run = _start(self._client, tracking, params, resumed)

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self._pending += [Metric(key, float(value), now, step) for key, value in values.items()]
        if len(self._pending) >= BATCH_METRICS:
            self.flush()

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        with _answering(self._uri):
            for start in range(0, len(pending), BATCH_METRICS):
                self._client.log_batch(self._run, metrics=pending[start : start + BATCH_METRICS])

    def close(self, status: Status, artifact: Path | None) -> None:
        self.flush()
        with _answering(self._uri):
            if artifact is not None and artifact.is_dir():
                self._client.log_artifacts(self._run, str(artifact), ARTIFACT)
            self._client.set_terminated(self._run, status)


def _start(
    client: MlflowClient, tracking: Tracking, params: Mapping[str, str], resumed: bool
) -> str:
    """The id of the run to record into: the stopped try of a resumed run, else a new run
    with the tags and parameters (earlier runs of the same study cell trashed first)."""
    from mlflow.entities import Param

    experiment = _experiment(client, tracking.experiment)
    stopped = _stopped_run(client, experiment, tracking.run_name) if resumed else None
    if stopped is not None:
        client.update_run(stopped, status="RUNNING")
        return stopped
    tags = dict(tracking.tags)
    if "run_id" in tags:
        _trash_earlier(client, experiment, tags["run_id"])
    run = client.create_run(experiment, run_name=tracking.run_name, tags=tags).info.run_id
    values = [Param(key, value[:MAX_PARAM]) for key, value in params.items()]
    for start in range(0, len(values), BATCH_PARAMS):
        client.log_batch(run, params=values[start : start + BATCH_PARAMS])
    return str(run)


def _experiment(client: MlflowClient, name: str) -> str:
    """The id of the experiment `name`, made if missing (another process may make it first)."""
    from mlflow.exceptions import MlflowException

    found = client.get_experiment_by_name(name)
    if found is None:
        try:
            return str(client.create_experiment(name))
        except MlflowException:
            found = client.get_experiment_by_name(name)
            if found is None:
                raise
    if found.lifecycle_stage == "deleted":
        raise ConfigError(
            f"MLflow experiment {name!r} is in the trash; restore it (`mlflow experiments "
            "restore`) or delete it for good (`mlflow gc`)"
        )
    return str(found.experiment_id)


def _trash_earlier(client: MlflowClient, experiment: str, run_id: str) -> None:
    """Move the experiment's earlier runs of the study cell `run_id` to the trash."""
    for earlier in client.search_runs([experiment], filter_string=f"tags.run_id = '{run_id}'"):
        client.delete_run(earlier.info.run_id)


def _stopped_run(client: MlflowClient, experiment: str, name: str) -> str | None:
    """The latest run named `name` in the experiment, if it did not finish (a try to resume)."""
    runs = client.search_runs([experiment], order_by=["attributes.start_time DESC"])
    latest = next((run for run in runs if run.info.run_name == name), None)
    return None if latest is None or latest.info.status == "FINISHED" else latest.info.run_id

"""A run's folder (adapter/, metrics.json, splits.json, train.log), written atomically: files
go to a hidden sibling folder that is renamed into place only when the run has finished, so
nothing half-written is left."""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import replace
from pathlib import Path

from torch import nn

from adaptlab.engine.outputs import (
    ADAPTER_FOLDER,
    LOG_FILE,
    METRICS_FILE,
    SPLITS_FILE,
    check_run_folder,
)
from adaptlab.fileio import publish_folder, staging_folder
from adaptlab.methods.persistence import save_adapter
from adaptlab.paths import Inputs
from adaptlab.records.result import RunResult
from adaptlab.records.split_record import SplitRecord


class RunFolder:
    """`out` checked now, apart from the run's `inputs` (`adaptlab.engine.outputs`); inside
    `with`, the log goes to the staging folder; `publish` writes the adapter and result and
    renames."""

    def __init__(self, out: Path | None, overwrite: bool, inputs: Inputs = ()) -> None:
        if out is not None:
            check_run_folder(out, overwrite, inputs)
        self.out = out
        self.staging: Path | None = None
        self._handler: logging.Handler | None = None

    def __enter__(self) -> RunFolder:
        if self.out is not None:
            self.staging = staging_folder(self.out)
            self._handler = _log_to(self.staging / LOG_FILE)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._close_log()
        if self.staging is not None and self.staging.exists():
            shutil.rmtree(self.staging)

    def publish(
        self,
        model: nn.Module,
        result: RunResult,
        started: float,
        splits: SplitRecord,
    ) -> RunResult:
        """Save the trained adapter, `result` (its wall time set) and the rows of its `splits`,
        then move the folder to `out`; without `out`, only set the wall time."""
        if self.staging is not None and self.out is not None:
            adapter = save_adapter(
                model,
                self.staging / ADAPTER_FOLDER,
                base_model_id=result.spec.model,
                task=result.data.task,
                label_names=result.data.labels,
                metrics={"dev": dict(result.dev), "test": dict(result.test)},
            )
            result = replace(
                result,
                adapter_bytes=sum(f.stat().st_size for f in adapter.iterdir()),
                wall_seconds=time.perf_counter() - started,
            )
            (self.staging / METRICS_FILE).write_text(json.dumps(result.to_dict(), indent=2))
            (self.staging / SPLITS_FILE).write_text(json.dumps(splits.to_dict()) + "\n")
            self._close_log()
            publish_folder(self.staging, self.out)
        return replace(result, wall_seconds=time.perf_counter() - started)

    def _close_log(self) -> None:
        if self._handler is not None:
            logging.getLogger("adaptlab").removeHandler(self._handler)
            self._handler.close()
            self._handler = None


def _log_to(path: Path) -> logging.Handler:
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger = logging.getLogger("adaptlab")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return handler

"""The driver's view of Ray nodes leaving the cluster while a study's runs are on them.

Ray starts a task again elsewhere when its node dies (the task's `max_retries`) without telling
the driver; the driver watches the cluster's nodes as it waits for results and logs each lost
node and the runs lost with it (to the `adaptlab.study` logger). Which runs were on the node
comes from Ray's state API, which the cluster's dashboard serves; without it the log names the
node only. A run whose retries are used up comes back as `NodeDiedError`, which `lost_line`
turns into the run's one-line error.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from adaptlab.errors import one_line
from adaptlab.study.planned import Planned

log = logging.getLogger("adaptlab.study")

WATCH_SECONDS = 1.0
"""How often the driver looks at the cluster's nodes while no result arrives."""


class NodeWatch:
    """Logs the nodes that left the cluster since the last `check`, and the runs on them."""

    def __init__(self, ray: ModuleType, max_retries: int) -> None:
        self._ray = ray
        self._max_retries = max_retries
        self._alive = self._alive_nodes()

    def check(self, pending: Mapping[Any, Planned[Any]]) -> None:
        """Log each node gone since the last check and the runs of `pending` (ref -> run) on it."""
        alive = self._alive_nodes()
        for node in self._alive.keys() - alive.keys():
            self._lost(node, self._alive[node], pending)
        self._alive = alive

    def _alive_nodes(self) -> dict[str, str]:
        """Node id -> address of every node alive now."""
        return {
            node["NodeID"]: node["NodeManagerAddress"]
            for node in self._ray.nodes()
            if node["Alive"]
        }

    def _lost(self, node: str, address: str, pending: Mapping[Any, Planned[Any]]) -> None:
        runs = {ref.task_id().hex(): run for ref, run in pending.items()}
        attempts = self._attempts_on(node, set(runs))
        if attempts is None:
            log.warning(
                "Ray node %s (%s) left the cluster; Ray retries the runs that were on it "
                "(max_retries: %d)",
                node,
                address,
                self._max_retries,
            )
            return
        log.warning("Ray node %s (%s) left the cluster", node, address)
        for task, attempt in sorted(attempts.items(), key=lambda item: runs[item[0]].run_id):
            run_id = runs[task].run_id
            if attempt < self._max_retries:
                log.warning(
                    "run %s lost with node %s; Ray retries it (%d of %d)",
                    run_id,
                    node,
                    attempt + 1,
                    self._max_retries,
                )
            else:
                log.warning(
                    "run %s lost with node %s; no retries left (max_retries: %d)",
                    run_id,
                    node,
                    self._max_retries,
                )

    def _attempts_on(self, node: str, tasks: set[str]) -> dict[str, int] | None:
        """Task id -> attempt number of each of `tasks` that ran on `node`; None when the
        cluster serves no state API (no dashboard)."""
        from ray.util.state import list_tasks
        from ray.util.state.exception import RayStateApiException

        try:
            states = list_tasks(
                filters=[("node_id", "=", node)], timeout=10, raise_on_missing_output=False
            )
        except RayStateApiException:
            return None
        return {state.task_id: state.attempt_number for state in states if state.task_id in tasks}


def lost_line(failure: BaseException, max_retries: int) -> str:
    """A run's one-line error when Ray gave up on it after its node died (`NodeDiedError`)."""
    node = re.search(r"node ID: ([0-9a-f]+)", str(failure))
    if node is None:  # Ray worded it otherwise: keep its own line
        return f"lost with its Ray node after {max_retries} retries: {one_line(failure)}"
    return (
        f"lost with Ray node {node.group(1)} after {max_retries} retries (resources: max_retries)"
    )

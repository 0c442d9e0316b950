"""`adaptlab neurons compare`: a trained run's base and adapted model on the same facts,
written as compare.json and compare.png.

Every option, the run's task, the facts and the output folder are checked before the model
loads, so a mistake ends in one line with nothing written.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptlab.engine.restore import load_trained
from adaptlab.errors import ConfigError, DataError
from adaptlab.fileio import atomic_write
from adaptlab.finite import finite_json
from adaptlab.knowledge.checks import check_count, check_fraction, check_output_folder
from adaptlab.knowledge.compare import (
    FactComparison,
    compare_facts,
    row_data,
    summarise,
)
from adaptlab.knowledge.fact_sources import load_facts
from adaptlab.knowledge.hooks import lm_head
from adaptlab.knowledge.lm import KnowledgeLM, LMKind, wrap_lm
from adaptlab.knowledge.plots import compare_plot
from adaptlab.knowledge.quadrature import DEFAULT_RULE, check_rule
from adaptlab.knowledge.window import check_window
from adaptlab.methods.adapt import get_handle
from adaptlab.methods.manifest import adapter_folder
from adaptlab.methods.persistence import read_manifest
from adaptlab.models.device import torch_device
from adaptlab.paths import existing
from adaptlab.tasks.registry import get_task, task_names

COMPARE_FILE = "compare.json"
COMPARE_PLOT = "compare.png"
COMPARE_KEYS = ("adapter", "summary", "rows")
"""What marks a compare.json as written here (and so replaceable)."""
DEFAULT_FOLDER = "neurons-compare"
"""Where the results go by default: this folder inside the run (or adapter) folder."""
LM_KINDS: dict[str, LMKind] = {"causal_lm": "causal", "masked_lm": "masked"}
"""The run's model kind -> how its facts are asked (the answer next, or at a mask)."""


@dataclass
class CompareReport:
    """What `compare` found and wrote."""

    rows: list[FactComparison]
    summary: dict[str, Any]
    num_layers: int
    files: list[Path]


def language_model_kind(run: str, task: object) -> LMKind:
    """How a run of `task` is asked facts; a run whose model is no causal or masked LM (a
    classifier, a tagger, a sequence-to-sequence LM) is refused in one line."""
    model_kind = get_task(str(task)).model_kind if task else None
    if model_kind in LM_KINDS:
        return LM_KINDS[model_kind]
    tasks = ", ".join(task_names(lambda t: t.model_kind in LM_KINDS))
    trained = f"trained task {task} (a {model_kind} model)" if task else "names no task"
    raise ConfigError(
        f"{run} {trained}; knowledge neurons are read from a language model's answers, so "
        f"compare needs a run of one of: {tasks}"
    )


def output_folder(
    adapter: str | os.PathLike[str],
    out: str | os.PathLike[str] | None,
    inputs: list[tuple[Path, str]],
) -> Path:
    """`out`, or `neurons-compare/` inside the run folder, checked: writable, apart from the
    inputs and the adapter (unless it is the default folder), holding nothing but earlier
    compare results."""
    default = Path(adapter) / DEFAULT_FOLDER
    folder = Path(out) if out is not None else default
    if os.path.realpath(folder) != os.path.realpath(default):
        inputs = [*inputs, (adapter_folder(adapter), "adapter")]
    outputs = {COMPARE_FILE: COMPARE_KEYS, COMPARE_PLOT: ()}
    check_output_folder(folder, outputs, own=tuple(outputs), inputs=inputs)
    return folder


def check_head(lm: KnowledgeLM, run: str) -> None:
    """Attribution computes the logits from the LM head's weight (its closed form): an adapter
    that changes the head's output through a hook would go unseen, so it is refused."""
    if lm_head(lm)._forward_hooks:
        raise ConfigError(
            f"{run}: the adapter acts on the LM head's output, which attribution computes from "
            "the head's weight alone; compare needs an adapter that leaves the head a plain "
            "linear layer"
        )


def run_compare(
    adapter: str | os.PathLike[str],
    facts_source: str,
    relation: str | None = None,
    out: str | os.PathLike[str] | None = None,
    limit: int | None = None,
    steps: int | None = None,
    templates: str | None = None,
    min_correct: float = 0.5,
    progress: bool = True,
    device: str = "cpu",
    rule: str = DEFAULT_RULE,
    tolerance: float | None = None,
    model: str | None = None,
) -> CompareReport:
    """Answer the facts (of `relation`, or every one) with the run's base and adapted model,
    in order until `limit` are answered by either; find the neurons of those in both; write
    compare.json and compare.png. `model` is the base to load the adapter onto (default: the
    one its manifest names); the other options are `neurons find`'s."""
    check_rule(rule, steps, tolerance)
    check_count("--limit", limit)
    check_fraction("--min-correct", min_correct)
    torch_device(device)
    run = str(adapter)
    manifest = read_manifest(adapter_folder(adapter))
    kind = language_model_kind(run, manifest.get("task"))
    inputs = existing([(facts_source, "facts"), (templates, "templates"), (model, "base model")])
    folder = output_folder(adapter, out, inputs)
    facts = load_facts(facts_source, templates)
    if relation is not None:
        facts = facts.of_relation(relation)
        if not facts.facts:
            raise DataError(f"{facts.name}: no facts of relation {relation!r}")
    started = time.perf_counter()
    loaded, manifest = load_trained(adapter, device, model=model)
    lm = wrap_lm(loaded.model, loaded.tokenizer, kind, loaded.model_id)
    check_head(lm, run)
    check_window(lm, facts)
    rows = compare_facts(
        lm, facts, min_correct=min_correct, limit=limit, steps=steps, rule=rule,
        tolerance=tolerance, progress=progress,
    )  # fmt: skip
    if all(row.outcome == "neither" for row in rows):
        raise DataError(
            f"neither the base nor the adapted model of {run} answers any of the {len(rows)} "
            f"checked facts correctly under at least {min_correct:g} of their templates; give "
            "facts or templates they complete with the object, or a lower --min-correct"
        )
    summary = summarise(rows, lm.num_layers)
    data = {
        "adapter": run,
        "task": manifest.get("task"),
        "methods": list(get_handle(loaded.model).method_names),
        "base_model": loaded.model_id,
        "kind": kind,
        "facts": facts_source,
        "templates": templates,
        "relation": relation,
        "limit": limit,
        "min_correct": min_correct,
        "quadrature": rule,
        "steps": steps,
        "tolerance": tolerance,
        "num_layers": lm.num_layers,
        "summary": summary,
        "rows": [row_data(row) for row in rows],
        "seconds": time.perf_counter() - started,
    }
    hint = "the model's answer probabilities or scores overflow; are its weights finite?"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / COMPARE_FILE
    atomic_write(path, finite_json(data, COMPARE_FILE, hint))
    plot = folder / COMPARE_PLOT
    compare_plot(summary, f"base against adapted: {run}", plot)
    return CompareReport(rows, summary, lm.num_layers, [path, plot])

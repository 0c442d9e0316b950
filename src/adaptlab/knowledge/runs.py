"""The `adaptlab neurons` jobs: find neurons, then scale or edit them, writing JSON and plots."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from adaptlab.fileio import atomic_write
from adaptlab.knowledge.attribution import DEFAULT_STEPS
from adaptlab.knowledge.edit_experiments import (
    erase_experiment,
    summarise_updates,
    update_experiment,
)
from adaptlab.knowledge.effects import neuron_effects, summarise
from adaptlab.knowledge.facts import FactSet, load_facts
from adaptlab.knowledge.lm import KnowledgeLM, load_lm
from adaptlab.knowledge.neurons import (
    FactNeurons,
    find_neurons,
    layer_histogram,
    load_neurons,
    save_neurons,
)
from adaptlab.knowledge.plots import effect_plot, layer_histogram_plot
from adaptlab.knowledge.scoring import known_facts

NEURONS_FILE = "neurons.json"


@dataclass
class FindReport:
    """What `find` produced: the per-fact neurons, the layer histogram and the files written."""

    results: list[FactNeurons]
    histogram: list[int]
    checked: int
    known: int
    files: list[Path]


def run_find(
    model: str,
    facts_source: str,
    relation: str,
    out: Path,
    limit: int | None = None,
    steps: int = DEFAULT_STEPS,
    templates: str | None = None,
    kind: str | None = None,
    min_correct: float = 0.5,
    progress: bool = True,
    device: str = "cpu",
) -> FindReport:
    """Filter the relation's facts to those the model knows, find their neurons, write files."""
    facts = load_facts(facts_source, templates).of_relation(relation)
    lm = load_lm(model, kind, device)
    known, checked = known_facts(lm, facts, min_correct, limit, progress)
    results = find_neurons(lm, known, steps, progress=progress)
    histogram = layer_histogram(results, lm.num_layers)
    meta = {
        "model": model,
        "kind": lm.kind,
        "facts": facts_source,
        "templates": templates,
        "relation": relation,
        "steps": steps,
        "min_correct": min_correct,
        "num_layers": lm.num_layers,
        "checked": checked,
        "known": len(known.facts),
        "histogram": histogram,
    }
    out.mkdir(parents=True, exist_ok=True)
    save_neurons(out / NEURONS_FILE, results, meta)
    plot = out / "layers.png"
    layer_histogram_plot(histogram, f"{relation}: knowledge neurons per layer ({model})", plot)
    return FindReport(results, histogram, checked, len(known.facts), [out / NEURONS_FILE, plot])


def _reload(
    neurons_file: Path, device: str
) -> tuple[dict[str, Any], KnowledgeLM, FactSet, list[FactNeurons]]:
    """The model (on `device`), facts and found neurons that a neuron file names."""
    meta, results = load_neurons(neurons_file)
    lm = load_lm(meta["model"], meta["kind"], device)
    facts = load_facts(meta["facts"], meta.get("templates"))
    return meta, lm, facts, results


def _others(facts: FactSet, relation: str) -> FactSet:
    return facts.with_facts([f for f in facts.facts if f.relation != relation])


def _write(path: Path, data: dict[str, Any]) -> Path:
    atomic_write(path, json.dumps(data, indent=2).encode("utf-8"))
    return path


def run_scaling(
    neurons_file: Path,
    factor: float,
    name: str,
    seed: int = 0,
    progress: bool = True,
    device: str = "cpu",
) -> tuple[dict[str, float], list[Path]]:
    """Suppress (factor 0) or amplify (2) each fact's neurons and random controls; write files."""
    meta, lm, facts, results = _reload(neurons_file, device)
    rows = neuron_effects(lm, facts.of_relation(meta["relation"]), results, factor, seed, progress)
    summary = summarise(rows)
    out = neurons_file.parent
    data = {"factor": factor, "seed": seed, **meta, "summary": summary}
    data["rows"] = [
        {**asdict(r), "knowledge_change": r.knowledge_change, "random_change": r.random_change}
        for r in rows
    ]
    plot = out / f"{name}.png"
    effect_plot(summary["knowledge_change"], summary["random_change"], f"{name} x{factor:g}", plot)
    return summary, [_write(out / f"{name}.json", data), plot]


def run_update(
    neurons_file: Path,
    lambda1: float,
    lambda2: float,
    seed: int = 0,
    limit: int | None = None,
    progress: bool = True,
    device: str = "cpu",
) -> tuple[dict[str, dict[str, float]], list[Path]]:
    """Update each fact (the first `limit`) to another object of its relation; write the table."""
    meta, lm, facts, results = _reload(neurons_file, device)
    results = results[:limit]
    relation = meta["relation"]
    rows = update_experiment(
        lm, facts.of_relation(relation), _others(facts, relation), results,
        lambda1, lambda2, seed, progress,
    )  # fmt: skip
    table = summarise_updates(rows)
    data = {"lambda1": lambda1, "lambda2": lambda2, "seed": seed, "limit": limit, **meta}
    data["summary"] = table
    data["rows"] = [asdict(r) for r in rows]
    return table, [_write(neurons_file.parent / "edit.json", data)]


def run_erase(
    neurons_file: Path, seed: int = 0, device: str = "cpu"
) -> tuple[list[dict[str, Any]], list[Path]]:
    """Erase the relation (zero its neurons' value slots) and a random control; write JSON."""
    meta, lm, facts, results = _reload(neurons_file, device)
    relation = meta["relation"]
    found = erase_experiment(
        lm, facts.of_relation(relation), _others(facts, relation), results, seed
    )
    rows = [asdict(r) for r in found]
    data = {"seed": seed, **meta, "rows": rows}
    return rows, [_write(neurons_file.parent / "erase.json", data)]

"""The `adaptlab neurons` jobs: find neurons, then scale or edit them, writing JSON and plots.

Each job checks all its options, its input files and its output folder before it loads a
model, so a mistake ends in one line before any work.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import adaptlab.checks as checks
from adaptlab.errors import DataError
from adaptlab.fileio import atomic_write
from adaptlab.finite import finite_json
from adaptlab.knowledge.checks import (
    check_count,
    check_finite,
    check_fraction,
    check_kind,
    check_output_folder,
)
from adaptlab.knowledge.edit_experiments import (
    erase_experiment,
    summarise_updates,
    update_experiment,
)
from adaptlab.knowledge.effects import neuron_effects, summarise
from adaptlab.knowledge.fact_sources import load_facts
from adaptlab.knowledge.facts import FactSet
from adaptlab.knowledge.lm import KnowledgeLM, load_lm
from adaptlab.knowledge.neuron_file import (
    NEURON_KEYS,
    NEURONS_FILE,
    NeuronFile,
    check_fits,
    load_neurons,
    neuron_data,
)
from adaptlab.knowledge.neurons import FactNeurons, find_neurons, layer_histogram
from adaptlab.knowledge.plots import effect_plot, layer_histogram_plot
from adaptlab.knowledge.quadrature import DEFAULT_RULE, check_rule
from adaptlab.knowledge.scoring import known_facts
from adaptlab.knowledge.window import check_window
from adaptlab.models.device import torch_device
from adaptlab.models.resolve import names_local_model
from adaptlab.paths import existing

LAYERS_PLOT = "layers.png"
OUTPUT_FILES = (
    NEURONS_FILE,
    LAYERS_PLOT,
    *(f"{name}.{kind}" for name in ("suppress", "amplify") for kind in ("json", "png")),
    "edit.json",
    "erase.json",
)
"""Every file the neurons commands write into a neurons folder (and all that it may hold)."""
SCALING_KEYS = ("factor", "summary", "rows")
"""What marks a suppress.json or amplify.json as written here (and so replaceable)."""
SAME_MODEL = "is it the model `find` ran on, with finite weights?"
"""What to check when a model's answers come out NaN or infinite."""


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
    steps: int | None = None,
    templates: str | None = None,
    kind: str | None = None,
    min_correct: float = 0.5,
    progress: bool = True,
    device: str = "cpu",
    rule: str = DEFAULT_RULE,
    tolerance: float | None = None,
) -> FindReport:
    """Filter the relation's facts to those the model knows, find their neurons, write files.

    `steps`, `rule` and `tolerance` choose the quadrature (`adaptlab.knowledge.attribute`).
    """
    check_rule(rule, steps, tolerance)
    check_count("--limit", limit)
    check_fraction("--min-correct", min_correct)
    check_kind(kind)
    torch_device(device)
    inputs = existing([(facts_source, "facts"), (templates, "templates"), (model, "model")])
    outputs = {NEURONS_FILE: NEURON_KEYS, LAYERS_PLOT: ()}
    check_output_folder(out, outputs, own=OUTPUT_FILES, inputs=inputs)
    facts = load_facts(facts_source, templates).of_relation(relation)
    if not facts.facts:
        raise DataError(f"{facts.name}: no facts of relation {relation!r}")
    lm = load_lm(model, kind, device)
    check_window(lm, facts)
    known, checked = known_facts(lm, facts, min_correct, limit, progress)
    if not known.facts:
        raise DataError(
            f"{model} answers none of the {checked} checked {relation!r} facts correctly under "
            f"at least {min_correct:g} of their {len(facts.templates[relation])} templates; "
            "give templates it completes with the object (--templates) or a lower --min-correct"
        )
    results = find_neurons(lm, known, steps, progress=progress, rule=rule, tolerance=tolerance)
    histogram = layer_histogram(results, lm.num_layers)
    found = NeuronFile(
        model=model,
        kind=lm.kind,
        facts=facts_source,
        relation=relation,
        results=results,
        templates=templates,
        quadrature=rule,
        steps=steps,
        tolerance=tolerance,
        min_correct=min_correct,
        num_layers=lm.num_layers,
        checked=checked,
        known=len(known.facts),
        histogram=histogram,
    )
    hint = "the model's answer probabilities or scores overflow; are its weights finite?"
    data = finite_json(neuron_data(found), NEURONS_FILE, hint)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / NEURONS_FILE, data)
    plot = out / LAYERS_PLOT
    layer_histogram_plot(histogram, f"{relation}: knowledge neurons per layer ({model})", plot)
    return FindReport(results, histogram, checked, len(known.facts), [out / NEURONS_FILE, plot])


def _read(neurons_file: Path, outputs: dict[str, tuple[str, ...]], device: str) -> NeuronFile:
    """The checked neuron file, once the device and the output files beside it are checked."""
    torch_device(device)
    found = load_neurons(neurons_file)
    check_output_folder(neurons_file.parent, outputs, option="--neurons folder", own=OUTPUT_FILES)
    if not any(result.neurons for result in found.results):
        facts = f"{len(found.results)} facts" if found.results else "no facts"
        raise DataError(
            f"{neurons_file}: {facts} with knowledge neurons; run `adaptlab neurons find` on "
            "facts the model knows"
        )
    return found


def _load(
    neurons_file: Path,
    found: NeuronFile,
    model: str | None,
    device: str,
    others: bool = False,
) -> tuple[KnowledgeLM, FactSet, dict[str, Any]]:
    """The neuron file's fact set and its model (or `model`) on `device`, checked against the
    file, and every prompt the job reads (the relation's, and with `others` the other
    relations') against the model's window; and the file's fields to record with the results
    (the model as loaded). The file's own model is loaded only when it is a built-in or hub
    name: a folder it names (which could be anything on this machine) must come as `model`."""
    if model is None and names_local_model(found.model):
        raise DataError(
            f"{neurons_file}: names the local model {found.model!r}; pass --model "
            f"{found.model} to load it (a neuron file's paths are not followed on their own)"
        )
    facts = load_facts(found.facts, found.templates)
    own = facts.of_relation(found.relation)  # the relation is known
    lm = load_lm(model or found.model, found.kind, device)
    check_fits(neurons_file, found, lm)
    check_window(lm, facts if others else own)
    return lm, facts, {**found.meta(), "model": lm.model_id}


def _others(facts: FactSet, relation: str) -> FactSet:
    return facts.with_facts([f for f in facts.facts if f.relation != relation])


def _write(path: Path, data: dict[str, Any], hint: str) -> Path:
    """`data` as JSON at `path`; a DataError naming the field (and `hint`) where a number came
    out NaN or infinite."""
    atomic_write(path, finite_json(data, path.name, hint))
    return path


def run_scaling(
    neurons_file: Path,
    factor: float,
    name: str,
    seed: int = 0,
    progress: bool = True,
    device: str = "cpu",
    model: str | None = None,
) -> tuple[dict[str, float], list[Path]]:
    """Suppress (factor 0) or amplify (2) each fact's neurons and random controls; write files.

    `model` replaces the neuron file's model (the same model, moved or renamed).
    """
    checks.seed(seed, "--seed")
    found = _read(neurons_file, {f"{name}.json": SCALING_KEYS, f"{name}.png": ()}, device)
    lm, facts, meta = _load(neurons_file, found, model, device)
    own = facts.of_relation(found.relation)
    rows = neuron_effects(lm, own, found.results, factor, seed, progress)
    summary = summarise(rows)
    if not summary["facts"]:
        raise DataError(
            f"{neurons_file}: the model gives every fact's answer probability 0, so no relative "
            "change can be measured; is it the model `find` ran on?"
        )
    out = neurons_file.parent
    data = {"factor": factor, "seed": seed, **meta, "summary": summary}
    data["rows"] = [
        {**asdict(r), "knowledge_change": r.knowledge_change, "random_change": r.random_change}
        for r in rows
    ]
    plot = out / f"{name}.png"
    path = _write(out / f"{name}.json", data, f"the scaled model's answers overflow; {SAME_MODEL}")
    effect_plot(summary["knowledge_change"], summary["random_change"], f"{name} x{factor:g}", plot)
    return summary, [path, plot]


def run_update(
    neurons_file: Path,
    lambda1: float,
    lambda2: float,
    seed: int = 0,
    limit: int | None = None,
    progress: bool = True,
    device: str = "cpu",
    model: str | None = None,
) -> tuple[dict[str, dict[str, float | None]], list[Path]]:
    """Update each fact (the first `limit`) to another object of its relation; write the table."""
    check_finite("--lambda1", lambda1)
    check_finite("--lambda2", lambda2)
    check_count("--limit", limit)
    checks.seed(seed, "--seed")
    found = _read(neurons_file, {"edit.json": ("lambda1", "lambda2", "summary")}, device)
    if len({result.fact.object for result in found.results}) < 2:
        raise DataError(
            f"{neurons_file}: updating a fact needs another object of its relation, and every "
            "fact here has the same one; find neurons for more facts"
        )
    chosen = found.results[:limit]
    if not any(result.neurons for result in chosen):
        raise DataError(
            f"{neurons_file}: none of the first {limit} facts has knowledge neurons; raise --limit"
        )
    if len({result.fact.object for result in chosen}) < 2:
        raise DataError(
            f"{neurons_file}: updating a fact turns its object into another object of the facts "
            f"updated, and the first {limit} facts have the same one; raise --limit"
        )
    lm, facts, meta = _load(neurons_file, found, model, device, others=True)
    own, others = facts.of_relation(found.relation), _others(facts, found.relation)
    rows = update_experiment(lm, own, others, chosen, lambda1, lambda2, seed, progress)
    table = summarise_updates(rows)
    data: dict[str, Any] = {"lambda1": lambda1, "lambda2": lambda2, "seed": seed, "limit": limit}
    data.update({**meta, "summary": table, "rows": [asdict(r) for r in rows]})
    hint = "the edited value slots overflow the model's outputs; lower --lambda1 and --lambda2"
    return table, [_write(neurons_file.parent / "edit.json", data, hint)]


def run_erase(
    neurons_file: Path, seed: int = 0, device: str = "cpu", model: str | None = None
) -> tuple[list[dict[str, Any]], list[Path]]:
    """Erase the relation (zero its neurons' value slots) and a random control; write JSON."""
    checks.seed(seed, "--seed")
    found = _read(neurons_file, {"erase.json": ("seed", "relation", "rows")}, device)
    lm, facts, meta = _load(neurons_file, found, model, device, others=True)
    own, others = facts.of_relation(found.relation), _others(facts, found.relation)
    rows = [asdict(r) for r in erase_experiment(lm, own, others, found.results, seed)]
    data = {"seed": seed, **meta, "rows": rows}
    hint = f"the model's perplexity overflows; {SAME_MODEL}"
    return rows, [_write(neurons_file.parent / "erase.json", data, hint)]

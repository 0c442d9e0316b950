"""Find each fact's knowledge neurons: attribute every prompt of the fact, then refine."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from adaptlab.errors import DataError
from adaptlab.fileio import atomic_write
from adaptlab.knowledge.attribution import DEFAULT_STEPS, attribute
from adaptlab.knowledge.facts import Fact, FactSet
from adaptlab.knowledge.hooks import Neuron
from adaptlab.knowledge.lm import KnowledgeLM
from adaptlab.knowledge.refine import SHARE, THRESHOLD, refine


@dataclass
class FactNeurons:
    """One fact's knowledge neurons (integrated gradients) and the activation-baseline ones."""

    fact: Fact
    neurons: list[Neuron]
    scores: list[float]
    share: float
    probability: float  # the answer's probability, mean over the relation's templates
    baseline_neurons: list[Neuron] = field(default_factory=list)


def find_fact_neurons(
    lm: KnowledgeLM,
    facts: FactSet,
    fact: Fact,
    steps: int = DEFAULT_STEPS,
    threshold: float = THRESHOLD,
    share: float = SHARE,
) -> FactNeurons:
    """Attribute the fact under each template of its relation and refine across them."""
    parts = [
        attribute(lm, template, fact.subject, fact.object, steps)
        for template in facts.templates[fact.relation]
    ]
    found = refine([p.scores for p in parts], threshold, share)
    baseline = refine([p.activations for p in parts], threshold, share)
    probability = sum(p.probability for p in parts) / len(parts)
    return FactNeurons(
        fact, found.neurons, found.scores, found.share, probability, baseline.neurons
    )


def find_neurons(
    lm: KnowledgeLM,
    facts: FactSet,
    steps: int = DEFAULT_STEPS,
    threshold: float = THRESHOLD,
    share: float = SHARE,
    progress: bool = True,
) -> list[FactNeurons]:
    """Knowledge neurons of every fact in `facts`."""
    return [
        find_fact_neurons(lm, facts, fact, steps, threshold, share)
        for fact in tqdm(facts.facts, desc="attributing", disable=not progress, unit="fact")
    ]


def layer_histogram(results: list[FactNeurons], num_layers: int) -> list[int]:
    """How many knowledge neurons each layer holds, over all facts ("KNs @ layer")."""
    counts = [0] * num_layers
    for result in results:
        for layer, _ in result.neurons:
            counts[layer] += 1
    return counts


REQUIRED_META = ("model", "kind", "facts", "relation")
"""What the suppress / amplify / edit / erase jobs read back from a neuron file."""


def save_neurons(path: Path, results: list[FactNeurons], meta: dict[str, Any]) -> None:
    """Write the found neurons with what produced them (model, facts, relation, steps) as JSON."""
    rows = [asdict(result) for result in results]
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps({**meta, "results": rows}, indent=2).encode("utf-8"))


def load_neurons(path: Path) -> tuple[dict[str, Any], list[FactNeurons]]:
    """Read a file written by `save_neurons`: its metadata and the per-fact neurons."""
    if not path.is_file():
        raise DataError(f"neuron file {str(path)!r} does not exist; run `adaptlab neurons find`")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        results = [
            FactNeurons(
                Fact(**row["fact"]),
                [(int(a), int(b)) for a, b in row["neurons"]],
                [float(s) for s in row["scores"]],
                float(row["share"]),
                float(row["probability"]),
                [(int(a), int(b)) for a, b in row["baseline_neurons"]],
            )
            for row in data.pop("results")
        ]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise DataError(f"{path}: not a neuron file written by `adaptlab neurons find`") from error
    missing = [key for key in REQUIRED_META if key not in data]
    if missing:
        raise DataError(f"{path}: no {', '.join(missing)} in this neuron file; run `find` again")
    return data, results

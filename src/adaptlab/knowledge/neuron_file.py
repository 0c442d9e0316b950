"""neurons.json: the found neurons with what produced them, written by `find`, read as untrusted.

The file comes back from users and other people, so every field is checked before anything is
built: types, ranges, and (`check_fits`) the layers and neuron indices against the model that
is loaded for it. Each problem is one line naming the field.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, NoReturn

from adaptlab.checks import shown
from adaptlab.errors import DataError
from adaptlab.knowledge.facts import Fact
from adaptlab.knowledge.hooks import Neuron
from adaptlab.knowledge.lm import KnowledgeLM
from adaptlab.knowledge.neurons import FactNeurons
from adaptlab.knowledge.quadrature import MAX_STEPS, RULES

NEURONS_FILE = "neurons.json"
NEURON_KEYS = ("model", "kind", "facts", "relation", "results")
"""The fields every neuron file holds."""


@dataclass
class NeuronFile:
    """What `find` found (`results`) and what produced it; the other commands read it back."""

    model: str
    kind: str
    facts: str
    relation: str
    results: list[FactNeurons]
    templates: str | None = None
    quadrature: str | None = None
    steps: int | None = None
    tolerance: float | None = None
    min_correct: float | None = None
    num_layers: int | None = None
    checked: int | None = None
    known: int | None = None
    histogram: list[int] | None = field(default=None)

    def meta(self) -> dict[str, Any]:
        """Every field but the results, as JSON values."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "results"}


def neuron_data(found: NeuronFile) -> dict[str, Any]:
    """`found` as the JSON object a neuron file holds."""
    return {**found.meta(), "results": [asdict(result) for result in found.results]}


class _Fields:
    """Reads typed fields of one JSON object, naming the field and file in every error."""

    def __init__(self, path: Path, data: Any, where: str = "") -> None:
        self.path, self.where = path, where
        if not isinstance(data, dict):
            self.fail("", "must be a JSON object", data)
        self.data: dict[str, Any] = data

    def fail(self, name: str, problem: str, value: Any) -> NoReturn:
        place = self._place(name)
        what = f"field {place!r}" if place else "the file"
        raise DataError(
            f"{self.path}: {what} {problem}, got {shown(value)}; is it a {NEURONS_FILE} "
            "written by `adaptlab neurons find`?"
        )

    def get(self, name: str, required: bool) -> Any:
        """The field's value; a missing optional field is None, a missing required one an error."""
        if name not in self.data:
            if required:
                raise DataError(
                    f"{self.path}: no field {self._place(name)!r}; is it a {NEURONS_FILE} "
                    "written by `adaptlab neurons find`? (run find again)"
                )
            return None
        return self.data[name]

    def _place(self, name: str) -> str:
        """The field's path in the file, as `results[2].fact.subject`."""
        return ".".join(part for part in (self.where, name) if part)

    def text(self, name: str, required: bool = True, choices: tuple[str, ...] = ()) -> Any:
        value = self.get(name, required)
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value.strip():
            self.fail(name, "must be a non-empty string", value)
        if choices and value not in choices:
            self.fail(name, f"must be one of {', '.join(choices)}", value)
        return value

    def whole(self, name: str, low: int, high: int | None = None) -> Any:
        value = self.get(name, False)
        if value is not None and not (_is_whole(value, low) and (high is None or value <= high)):
            bounds = f"from {low} to {high}" if high is not None else f"of at least {low}"
            self.fail(name, f"must be a whole number {bounds}", value)
        return value

    def number(self, name: str, low: float, high: float, required: bool = False) -> Any:
        value = self.get(name, required)
        if value is None and not required:
            return None
        if not _is_number(value) or not low <= value <= high:
            self.fail(name, f"must be a number from {low:g} to {high:g}", value)
        return float(value)

    def items(self, name: str) -> list[Any]:
        value = self.get(name, True)
        if not isinstance(value, list):
            self.fail(name, "must be a list", value)
        return list(value)

    def neurons(self, name: str) -> list[Neuron]:
        found: list[Neuron] = []
        seen: set[Neuron] = set()
        for k, pair in enumerate(self.items(name)):
            if not (
                isinstance(pair, list) and len(pair) == 2 and all(_is_whole(v, 0) for v in pair)
            ):
                self.fail(
                    f"{name}[{k}]", "must be a pair [layer, index] of whole numbers >= 0", pair
                )
            neuron = (pair[0], pair[1])
            if neuron in seen:
                self.fail(f"{name}[{k}]", "repeats a neuron listed before it", pair)
            seen.add(neuron)
            found.append(neuron)
        return found


def _is_whole(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _result(path: Path, row: Any, k: int, relation: str) -> FactNeurons:
    where = f"results[{k}]"
    read = _Fields(path, row, where)
    fact = _Fields(path, read.get("fact", True), f"{where}.fact")
    subject, object_ = fact.text("subject"), fact.text("object")
    if fact.text("relation") != relation:
        fact.fail("relation", f"must be the file's relation {relation!r}", fact.data["relation"])
    neurons = read.neurons("neurons")
    scores = read.items("scores")
    for i, score in enumerate(scores):
        if not _is_number(score):
            read.fail(f"scores[{i}]", "must be a finite number", score)
    if len(scores) != len(neurons):
        read.fail("scores", f"must hold one score per neuron ({len(neurons)})", scores)
    return FactNeurons(
        Fact(subject, relation, object_),
        neurons,
        [float(s) for s in scores],
        read.number("share", 0.0, 1.0, required=True),
        read.number("probability", 0.0, 1.0, required=True),
        read.neurons("baseline_neurons"),
    )


def load_neurons(path: Path) -> NeuronFile:
    """Read and check a neuron file; every problem is one line naming the field."""
    if not path.exists():
        raise DataError(f"neuron file {str(path)!r} does not exist; run `adaptlab neurons find`")
    if not path.is_file():
        raise DataError(f"neuron file {str(path)!r} is not a file; give the {NEURONS_FILE} in it")
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError) as error:  # ValueError: bad JSON or UTF-8
        reason = getattr(error, "strerror", None) or type(error).__name__
        raise DataError(
            f"{path}: not a neuron file written by `adaptlab neurons find` ({reason})"
        ) from None
    read = _Fields(path, data)
    relation = read.text("relation")
    histogram = read.get("histogram", False)
    if histogram is not None and not (
        isinstance(histogram, list) and all(_is_whole(v, 0) for v in histogram)
    ):
        read.fail("histogram", "must be a list of whole numbers >= 0", histogram)
    return NeuronFile(
        model=read.text("model"),
        kind=read.text("kind", choices=("masked", "causal")),
        facts=read.text("facts"),
        relation=relation,
        results=[_result(path, row, k, relation) for k, row in enumerate(read.items("results"))],
        templates=read.text("templates", required=False),
        quadrature=read.text("quadrature", required=False, choices=RULES),
        steps=read.whole("steps", 1, MAX_STEPS),
        tolerance=read.number("tolerance", 0.0, 1.0),
        min_correct=read.number("min_correct", 0.0, 1.0),
        num_layers=read.whole("num_layers", 1),
        checked=read.whole("checked", 0),
        known=read.whole("known", 0),
        histogram=histogram,
    )


def check_fits(path: Path, found: NeuronFile, lm: KnowledgeLM) -> None:
    """Every layer and neuron index of the file exists in `lm` (no negative indexing)."""
    if found.num_layers is not None and found.num_layers != lm.num_layers:
        raise DataError(
            f"{path}: written for a model with {found.num_layers} layers, but "
            f"{lm.model_id or 'the model'} has {lm.num_layers}; use the model that `find` ran on "
            "(--model)"
        )
    if found.histogram is not None and len(found.histogram) != lm.num_layers:
        raise DataError(
            f"{path}: field 'histogram' has {len(found.histogram)} layers, the model "
            f"{lm.num_layers}"
        )
    for k, result in enumerate(found.results):
        for name in ("neurons", "baseline_neurons"):
            for i, (layer, index) in enumerate(getattr(result, name)):
                if layer >= lm.num_layers or index >= lm.num_neurons:
                    raise DataError(
                        f"{path}: field 'results[{k}].{name}[{i}]' is {shown([layer, index])}, "
                        f"but the model has layers 0..{lm.num_layers - 1} and neurons "
                        f"0..{lm.num_neurons - 1}"
                    )

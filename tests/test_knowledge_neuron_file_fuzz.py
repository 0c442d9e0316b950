"""Seeded random edits of a valid neurons.json: each loads correctly or fails in one line.

Never a traceback: reading and checking the file against the model (what every neurons
command does before its work) either raises an AdaptlabError with a one-line message naming
the file, or returns a file whose every neuron exists in the model. A sample of the edits also
goes through `adaptlab neurons suppress` end to end.
"""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from cli_cases import run_cli
from test_knowledge_cli import FACTS
from test_knowledge_lm import tiny_lm

from adaptlab.errors import AdaptlabError
from adaptlab.knowledge.lm import KnowledgeLM
from adaptlab.knowledge.neuron_file import check_fits, load_neurons
from adaptlab.knowledge.runs import run_find

CASES = 300
THROUGH_THE_CLI = (3, 8)
"""How many of the loaded and of the refused files also go through `neurons suppress`."""
BAD_VALUES: list[Any] = [
    None, -1, 0, 1, 2, 10**30, -(10**30), 1.5, -0.0, math.nan, math.inf, -math.inf, True,
    False, "", "text", "-1", "../../etc", "[bold]x[/]", [], [1], [-1, -5], [99, 1066],
    [[-1, -5]], [[99, 1066]], [[0, 1], [0, 1]], {}, {"a": 1}, [None, None], "1e400",
]  # fmt: skip


@pytest.fixture(scope="module")
def setting(tmp_path_factory: pytest.TempPathFactory) -> tuple[KnowledgeLM, Path, dict[str, Any]]:
    """The tiny model (in memory and as a folder) and a valid neuron file of it."""
    root = tmp_path_factory.mktemp("fuzz")
    lm = tiny_lm("bert")
    folder = root / "bert"
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    lm.model_id = str(folder)
    facts = root / "facts.json"
    facts.write_text(json.dumps(FACTS))
    run_find(str(folder), str(facts), "capital", root / "found", min_correct=0, progress=False)
    data = json.loads((root / "found" / "neurons.json").read_text())
    assert data["results"] and all(row["neurons"] for row in data["results"])
    return lm, folder, data


def _nodes(tree: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into `tree` (keys and indices), the root excluded."""
    found = []
    children = (
        tree.items()
        if isinstance(tree, dict)
        else enumerate(tree)
        if isinstance(tree, list)
        else []
    )
    for key, child in children:
        found.append((*path, key))
        found.extend(_nodes(child, (*path, key)))
    return found


def _at(tree: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def _mutate(data: dict[str, Any], rng: random.Random) -> str:
    """1 to 3 random edits; returns the file's text (sometimes cut short)."""
    data = copy.deepcopy(data)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(_nodes(data))
        parent, key = _at(data, path[:-1]), path[-1]
        value = parent[key]
        edit = rng.choice(["delete", "replace", "replace", "negate", "huge", "wrap", "string",
                           "duplicate", "swap"])  # fmt: skip
        if edit == "delete":
            del parent[key]
        elif edit == "replace":
            parent[key] = copy.deepcopy(rng.choice(BAD_VALUES))
        elif edit == "negate" and isinstance(value, int | float):
            parent[key] = -value - 1
        elif edit == "huge" and isinstance(value, int | float):
            parent[key] = 10 ** rng.choice([9, 30, 400]) if isinstance(value, int) else 1e308
        elif edit == "wrap":
            parent[key] = [value]
        elif edit == "string":
            parent[key] = json.dumps(value)
        elif edit == "duplicate" and isinstance(value, list) and value:
            value.append(copy.deepcopy(value[0]))
        elif edit == "swap" and isinstance(value, list) and len(value) == 2:
            value.reverse()
    text = json.dumps(data)
    if rng.random() < 0.05:
        text = text[: rng.randrange(len(text))]
    return text


def _check_loaded(lm: KnowledgeLM, path: Path) -> bool:
    """Reads as the commands do: a one-line error naming the file (False), or a file that
    fits the model (True)."""
    try:
        found = load_neurons(path)
        check_fits(path, found, lm)
    except AdaptlabError as error:
        message = str(error)
        assert "\n" not in message and str(path) in message and len(message) < 500, message
        return False
    for result in found.results:
        assert len(result.scores) == len(result.neurons)
        assert all(math.isfinite(s) for s in result.scores)
        for layer, index in [*result.neurons, *result.baseline_neurons]:
            assert type(layer) is int and type(index) is int
            assert 0 <= layer < lm.num_layers and 0 <= index < lm.num_neurons
        assert 0 <= result.share <= 1 and 0 <= result.probability <= 1
    return True


def test_random_edits_load_or_fail_in_one_line(
    setting: tuple[KnowledgeLM, Path, dict[str, Any]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lm, folder, data = setting
    rng = random.Random(21)
    outcomes: dict[str, list[Path]] = {"loaded": [], "refused": []}
    for case in range(CASES):
        path = tmp_path / f"case{case}" / "neurons.json"
        path.parent.mkdir()
        path.write_text(_mutate(data, rng))
        outcomes["loaded" if _check_loaded(lm, path) else "refused"].append(path)
    assert len(outcomes["loaded"]) > 10 and len(outcomes["refused"]) > CASES / 2
    for outcome, count in (("loaded", THROUGH_THE_CLI[0]), ("refused", THROUGH_THE_CLI[1])):
        for path in outcomes[outcome][:count]:
            args = ["neurons", "suppress", "--neurons", str(path), "--model", str(folder)]
            code, _, err = run_cli(args, capsys)
            assert code in (0, 1) and "Traceback" not in err, err
            assert code == 0 or err.endswith("\n") and err[:-1].split("\n")[-1].startswith("error:")
            assert (code == 0) == (path.parent / "suppress.json").is_file()

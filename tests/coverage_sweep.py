"""Backbone discovery over every model type transformers ships with a causal-LM,
sequence-classification, token-classification or sequence-to-sequence head: each model is
built from its default config on the meta device (shapes, no memory) and read by
`find_backbone`, which finds its parts or refuses in one line.

`sweep` runs it in a process of its own: building every family imports every modeling module
transformers has, and what those imports set up (loggers, kernels, hub hooks) stays out of the
test process. `python coverage_sweep.py OUT` writes the outcomes to OUT as JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import torch
import transformers as T
from transformers.models.auto import modeling_auto as auto

from adaptlab.backbone.discovery import find_backbone
from adaptlab.errors import BackboneError

HEADS = (
    auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES,
    auto.MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES,
    auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
)
UNBUILT = "unbuilt"
"""The outcome for a type whose default config transformers cannot build a model from."""


def sweep() -> dict[str, str | None]:
    """`outcomes()`, computed in a fresh Python process."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "sweep.json"
        script = Path(__file__).resolve()
        done = subprocess.run(
            [sys.executable, str(script), str(out)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(out.read_text())  # type: ignore[no-any-return]


def outcomes() -> dict[str, str | None]:
    """Model type -> None where discovery finds every part of its first head class, the
    refusal where it refuses, `UNBUILT` where transformers cannot build it from defaults."""
    outcomes: dict[str, str | None] = {}
    types = sorted({model_type for names in HEADS for model_type in names})
    for model_type in types:
        class_name = next(names[model_type] for names in HEADS if model_type in names)
        outcomes[model_type] = _outcome(model_type, class_name)
    return outcomes


def _outcome(model_type: str, class_name: str) -> str | None:
    try:
        config = T.AutoConfig.for_model(model_type)
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            model = getattr(T, class_name)._from_config(config)
    except Exception:  # transformers' own defaults (a missing extra, an unset field)
        return UNBUILT
    try:
        find_backbone(model)
    except BackboneError as refusal:
        return str(refusal)
    return None


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(outcomes()))

"""`adaptlab analyze forgetting`: a trained causal-LM run scored on source probes, base and
adapted, written as `forgetting.json` and a PNG beside the other analyses."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from adaptlab.analysis.api import Written, output_folder, write_analysis
from adaptlab.engine.restore import load_trained
from adaptlab.errors import ConfigError
from adaptlab.forgetting.measure import measure_forgetting
from adaptlab.forgetting.options import ProbeOptions
from adaptlab.forgetting.plots import forgetting_figure
from adaptlab.forgetting.probes import build_probes, default_probes, split
from adaptlab.methods.adapt import get_handle
from adaptlab.methods.manifest import adapter_folder
from adaptlab.methods.persistence import read_manifest
from adaptlab.tasks.registry import get_task, known_task

NAME = "forgetting"


def forgetting_analysis(
    path: str | os.PathLike[str],
    probes: Sequence[str] | None = None,
    *,
    options: ProbeOptions | None = None,
    out: str | os.PathLike[str] | None = None,
    device: str = "cpu",
    model: str | None = None,
    progress: bool = True,
) -> Written:
    """The forgetting of the trained run at `path` on each of `probes` (`kind:value`; None: the
    built-in probes, `default_probes`), its base being the same model with adaptation off."""
    options = options or ProbeOptions()
    manifest = read_manifest(adapter_folder(path))
    check_language_model(str(path), manifest.get("task"))
    names = list(probes) if probes else list(default_probes())
    check_harness_include(options.include, names)
    folder = output_folder(path, out, NAME, "", model)
    started = time.perf_counter()
    loaded, _ = load_trained(path, device, model=model)
    options = replace(options, run_task=manifest["task"])
    built = build_probes(names, loaded.tokenizer, options)
    results = measure_forgetting(loaded.model, loaded.tokenizer, built, progress=progress)
    result = {
        "analysis": NAME,
        "adapter": str(path),
        "methods": list(get_handle(loaded.model).method_names),
        "base_model": loaded.model_id,
        "options": {"limit": options.limit, "seed": options.seed, "window": options.window},
        "probes": [r.to_dict() for r in results],
        "seconds": time.perf_counter() - started,
    }
    figure = forgetting_figure(results, f"forgetting of {path}")
    return write_analysis(result, figure, folder, NAME, "a probe's scores are not finite")


def check_language_model(run: str, task: object) -> None:
    """Probes score next-token predictions: a run whose model is no causal LM (a classifier,
    a tagger, a masked or sequence-to-sequence LM), or whose manifest names no task adaptlab
    knows, is refused in one line."""
    kind = get_task(str(task)).model_kind if known_task(task) else None
    if kind != "causal_lm":
        known = f"trained task {task} (a {kind} model)"
        trained = known if kind else f"names no task adaptlab knows ({task!r})"
        raise ConfigError(
            f"{run} {trained}; forgetting probes score a causal LM's next-token predictions, "
            "so they need a causal-lm, sft or chat run"
        )


def check_harness_include(include: Path | None, probes: Sequence[str]) -> None:
    """`--harness-include` is the folder of task YAML that harness: probes read: refused where
    no probe reads it, or where it is no folder."""
    if include is None:
        return
    if not any(split(name)[0] == "harness" for name in probes):
        raise ConfigError(
            f"--harness-include {include} is read by harness: probes only; name one "
            "(--probe harness:TASK) or drop --harness-include"
        )
    if not include.is_dir():
        raise ConfigError(
            f"--harness-include {include} is not a folder; give the folder of your task YAML files"
        )

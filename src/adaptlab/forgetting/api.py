"""`adaptlab analyze forgetting`: a trained causal-LM run scored on source probes, base and
adapted, written as `forgetting.json` and a PNG beside the other analyses."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import replace

from adaptlab.analysis.api import Written, output_folder, write_analysis
from adaptlab.engine.restore import load_trained
from adaptlab.errors import ConfigError
from adaptlab.forgetting.measure import measure_forgetting
from adaptlab.forgetting.options import ProbeOptions
from adaptlab.forgetting.plots import forgetting_figure
from adaptlab.forgetting.probes import build_probes, default_probes
from adaptlab.methods.adapt import get_handle
from adaptlab.methods.manifest import adapter_folder
from adaptlab.methods.persistence import read_manifest
from adaptlab.tasks.registry import get_task

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
    check_language_model(str(path), manifest["task"])
    names = list(probes) if probes else list(default_probes())
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


def check_language_model(run: str, task: str) -> None:
    """Probes score next-token predictions: a run whose model is no causal LM (a classifier,
    a tagger, a masked or sequence-to-sequence LM) is refused in one line."""
    kind = get_task(task).model_kind
    if kind != "causal_lm":
        raise ConfigError(
            f"{run} trained task {task} (a {kind} model); forgetting probes score a causal "
            "LM's next-token predictions, so they need a causal-lm, sft or chat run"
        )

"""One call per analysis of a trained run: load it, measure, write JSON and a PNG plot."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptlab.analysis.landscape import (
    DEFAULT_POINTS,
    DEFAULT_SPAN,
    alphas,
    check_finite,
    loss_landscape,
)
from adaptlab.analysis.plots import (
    fusion_figure,
    landscape_figure,
    layer_figure,
    spectrum_figure,
)
from adaptlab.analysis.similarity import MEASURES, check_tokens, compare_to_base, get_measure
from adaptlab.analysis.spectrum import (
    EPSILON,
    TOP_K,
    check_intruder_options,
)
from adaptlab.analysis.target import load_target
from adaptlab.analysis.tokens import DEFAULT_TOKENS, sample_tokens
from adaptlab.analysis.updates import model_spectrum
from adaptlab.engine.outputs import ADAPTER_FOLDER, ANALYSIS_FOLDER
from adaptlab.engine.restore import load_trained
from adaptlab.errors import ConfigError
from adaptlab.fileio import atomic_write, save_png
from adaptlab.finite import finite_json
from adaptlab.methods.adapt import get_handle
from adaptlab.methods.manifest import adapter_folder, read_manifest_file
from adaptlab.paths import (
    check_output_file,
    check_output_folder,
    check_own_folder,
    existing,
    has_prefix,
    json_with_key,
)
from adaptlab.runs.fusion_weights import mean_fusion_weights

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
OTHER_ANALYSES = ("landscape", "fusion", "spectrum", "forgetting")
"""What analyses other than the similarity measures name their files (`forgetting.json` is
`adaptlab.forgetting`'s), which an analysis folder may hold."""


@dataclass(frozen=True)
class Written:
    """An analysis result and the files it was written to."""

    result: dict[str, Any]
    json_path: Path
    png_path: Path


def similarity_analysis(
    path: str | os.PathLike[str],
    data: str,
    measure: str = "rsa",
    *,
    tokens: int = DEFAULT_TOKENS,
    seed: int = 0,
    split: str = "dev",
    data_options: Mapping[str, Any] | None = None,
    out: str | os.PathLike[str] | None = None,
    device: str = "cpu",
    model: str | None = None,
    progress: bool = True,
) -> Written:
    """Per-layer `measure` (rsa, cka, cka-debiased) of the trained run against its base."""
    get_measure(measure)  # an unknown measure, or too few tokens, fails before anything loads
    check_tokens(measure, tokens)
    folder = output_folder(path, out, measure, data, model)
    started = time.perf_counter()
    target = load_target(path, data, data_options, split=split, device=device, model=model)
    sample = sample_tokens(target.features, target.special_ids, tokens, seed)
    scores = compare_to_base(
        target.model,
        target.collator,
        target.features,
        sample,
        (measure,),
        seed=seed,
        progress=progress,
    )[measure]
    result = {
        "analysis": measure,
        "adapter": str(path),
        "data": target.data,
        **scores.to_dict(),
        "seconds": time.perf_counter() - started,
    }
    fig = layer_figure({str(path): scores.scores}, measure, f"{measure.upper()}: {target.data}")
    return write_analysis(result, fig, folder, measure, "the representations are not finite")


def landscape_analysis(
    path: str | os.PathLike[str],
    data: str,
    *,
    points: int = DEFAULT_POINTS,
    span: float = DEFAULT_SPAN,
    split: str = "dev",
    data_options: Mapping[str, Any] | None = None,
    out: str | os.PathLike[str] | None = None,
    device: str = "cpu",
    model: str | None = None,
    batch_size: int = 64,
    progress: bool = True,
) -> Written:
    """The loss along theta0 + a (theta1 - theta0) on `split` (§5)."""
    grid = alphas(points, span)
    folder = output_folder(path, out, "landscape", data, model)
    started = time.perf_counter()
    target = load_target(path, data, data_options, split=split, device=device, model=model)
    curve = loss_landscape(
        target.model,
        target.labelled("landscape"),
        target.features,
        target.task,
        target.label_names,
        grid,
        batch_size=batch_size,
        progress=progress,
    )
    check_finite(curve)
    result = {
        "analysis": "landscape",
        "adapter": str(path),
        "data": target.data,
        **curve.to_dict(),
        "seconds": time.perf_counter() - started,
    }
    fig = landscape_figure({str(path): (curve.alphas, curve.losses)}, f"loss: {target.data}")
    return write_analysis(
        result, fig, folder, "landscape", "the losses are not finite; lower --span"
    )


def fusion_analysis(
    path: str | os.PathLike[str],
    data: str,
    *,
    split: str = "dev",
    data_options: Mapping[str, Any] | None = None,
    out: str | os.PathLike[str] | None = None,
    device: str = "cpu",
    model: str | None = None,
    batch_size: int = 64,
) -> Written:
    """A trained fusion's mean weight per adapter at each fusion layer on `split`."""
    folder = output_folder(path, out, "fusion", data, model)
    started = time.perf_counter()
    target = load_target(path, data, data_options, split=split, device=device, model=model)
    encoder = target.labelled("fusion")
    fusion = get_handle(target.model)
    if not fusion.is_fusion:
        raise ConfigError(f"{path}: not a fusion run ({'+'.join(fusion.method_names)})")
    sites = mean_fusion_weights(target.model, fusion, encoder, target.features, batch_size)
    result = {
        "analysis": "fusion",
        "adapter": str(path),
        "data": target.data,
        "sites": [site.to_dict() for site in sites],
        "seconds": time.perf_counter() - started,
    }
    layers = {a: [site.weights[a] for site in sites] for a in fusion.fused}
    fig = fusion_figure(layers, f"fusion weights: {target.data}")
    hint = "the fusion's weights are not finite, so the run diverged; train it again"
    return write_analysis(result, fig, folder, "fusion", hint)


def spectrum_analysis(
    path: str | os.PathLike[str],
    *,
    top_k: int = TOP_K,
    epsilon: float = EPSILON,
    out: str | os.PathLike[str] | None = None,
    device: str = "cpu",
    model: str | None = None,
) -> Written:
    """The spectrum of every weight matrix the trained run changes (`adaptlab.analysis.spectrum`):
    ΔW's singular values and effective ranks, its norm against W, the intruder dimensions of
    W + ΔW among its top `top_k` singular vectors at threshold `epsilon`."""
    check_intruder_options(top_k, epsilon)
    folder = output_folder(path, out, "spectrum", "", model)
    started = time.perf_counter()
    loaded, _ = load_trained(path, device, model=model)
    spectrum = model_spectrum(loaded.model, top_k, epsilon)
    if not spectrum["matrices"]:
        raise ConfigError(
            f"{path}: {'+'.join(spectrum['methods'])} changes no weight matrix (it inserts "
            "modules beside the weights or trains vectors), so its update has no spectrum; "
            "measure what it changed with adaptlab analyze rsa or cka"
        )
    layers = spectrum["layers"]
    result = {
        "analysis": "spectrum",
        "adapter": str(path),
        **spectrum,
        "seconds": time.perf_counter() - started,
    }
    fig = spectrum_figure(layers, f"update spectrum: {path}")
    return write_analysis(
        result, fig, folder, "spectrum", "the update is not finite: the run diverged"
    )


def output_folder(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str] | None,
    name: str,
    data: str,
    model: str | None,
) -> Path:
    """The folder the results go to, checked before any work: writable, new or holding only
    earlier analysis results, apart from the adapter analysed (the default `analysis/` beside
    or inside it excepted), and `name`.json and .png in it new or earlier results of this
    analysis (nothing else is replaced); apart from the `data` and `model` too. `path` is
    checked first to be an adapter or run folder, so a wrong one is named as such."""
    read_manifest_file(adapter_folder(path))
    default = Path(path) / ANALYSIS_FOLDER
    folder = Path(out) if out is not None else default
    adapter = Path(path) / ADAPTER_FOLDER if (Path(path) / ADAPTER_FOLDER).is_dir() else Path(path)
    inputs = existing([(data, "data"), (model, "base model")])
    if os.path.realpath(folder) != os.path.realpath(default):
        inputs.append((adapter, "adapter"))
    check_output_folder(folder, "the analysis folder", inputs)
    check_output_file(
        folder / f"{name}.json",
        "analysis result",
        replaceable=lambda p: json_with_key(p, "analysis"),
    )
    check_output_file(
        folder / f"{name}.png", "analysis plot", replaceable=lambda p: has_prefix(p, PNG_SIGNATURE)
    )
    check_own_folder(folder, "the analysis folder", _earlier_analysis)
    return folder


def _earlier_analysis(path: Path) -> bool:
    """Whether `path` is a result or plot an analysis writes (what a folder of them holds)."""
    names = (*MEASURES, *OTHER_ANALYSES)
    if path.suffix == ".json" and path.stem in names:
        return json_with_key(path, "analysis")
    return path.suffix == ".png" and path.stem in names and has_prefix(path, PNG_SIGNATURE)


def write_analysis(result: dict[str, Any], fig: Any, folder: Path, name: str, hint: str) -> Written:
    """The result as `name`.json and the figure as `name`.png in `folder`; nothing is written
    when a number of the result is NaN or infinite (a DataError naming it, then `hint`)."""
    json_path, png_path = folder / f"{name}.json", folder / f"{name}.png"
    data = finite_json(result, json_path.name, hint)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(json_path, data)
    save_png(fig, png_path)
    return Written(result=result, json_path=json_path, png_path=png_path)

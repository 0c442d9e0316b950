"""One call per analysis of a trained run: load it, measure, write JSON and a PNG plot."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptlab.analysis.landscape import DEFAULT_POINTS, DEFAULT_SPAN, alphas, loss_landscape
from adaptlab.analysis.plots import fusion_figure, landscape_figure, layer_figure, save_png
from adaptlab.analysis.similarity import compare_to_base, get_measure
from adaptlab.analysis.target import load_target
from adaptlab.analysis.tokens import DEFAULT_TOKENS, sample_tokens
from adaptlab.errors import ConfigError
from adaptlab.fileio import atomic_write
from adaptlab.methods import get_handle
from adaptlab.paths import check_output_file, check_output_folder, has_prefix, json_with_key
from adaptlab.train.fusion_weights import mean_fusion_weights
from adaptlab.train.outputs import ANALYSIS_FOLDER

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


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
    get_measure(measure)  # an unknown measure fails before anything loads
    folder = _output_folder(path, out, measure)
    started = time.perf_counter()
    target = load_target(path, data, data_options, split=split, device=device, model=model)
    sample = sample_tokens(target.features, target.special_ids, tokens, seed)
    scores = compare_to_base(
        target.model,
        target.encoder,
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
    return _write(result, fig, folder, measure)


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
    folder = _output_folder(path, out, "landscape")
    started = time.perf_counter()
    target = load_target(path, data, data_options, split=split, device=device, model=model)
    curve = loss_landscape(
        target.model,
        target.encoder,
        target.features,
        target.task,
        target.label_names,
        grid,
        batch_size=batch_size,
        progress=progress,
    )
    result = {
        "analysis": "landscape",
        "adapter": str(path),
        "data": target.data,
        **curve.to_dict(),
        "seconds": time.perf_counter() - started,
    }
    fig = landscape_figure({str(path): (curve.alphas, curve.losses)}, f"loss: {target.data}")
    return _write(result, fig, folder, "landscape")


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
    folder = _output_folder(path, out, "fusion")
    started = time.perf_counter()
    target = load_target(path, data, data_options, split=split, device=device, model=model)
    fusion = get_handle(target.model)
    if not fusion.is_fusion:
        raise ConfigError(f"{path}: not a fusion run ({'+'.join(fusion.method_names)})")
    sites = mean_fusion_weights(target.model, fusion, target.encoder, target.features, batch_size)
    result = {
        "analysis": "fusion",
        "adapter": str(path),
        "data": target.data,
        "sites": [site.to_dict() for site in sites],
        "seconds": time.perf_counter() - started,
    }
    layers = {a: [site.weights[a] for site in sites] for a in fusion.fused}
    fig = fusion_figure(layers, f"fusion weights: {target.data}")
    return _write(result, fig, folder, "fusion")


def _output_folder(
    path: str | os.PathLike[str], out: str | os.PathLike[str] | None, name: str
) -> Path:
    """The folder the results go to, checked before any work: writable, and `name`.json and
    .png in it new or earlier results of this analysis (nothing else is replaced)."""
    folder = Path(out) if out is not None else Path(path) / ANALYSIS_FOLDER
    check_output_folder(folder, "the analysis folder")
    check_output_file(
        folder / f"{name}.json",
        "analysis result",
        replaceable=lambda p: json_with_key(p, "analysis"),
    )
    check_output_file(
        folder / f"{name}.png", "analysis plot", replaceable=lambda p: has_prefix(p, PNG_SIGNATURE)
    )
    return folder


def _write(result: dict[str, Any], fig: Any, folder: Path, name: str) -> Written:
    folder.mkdir(parents=True, exist_ok=True)
    json_path, png_path = folder / f"{name}.json", folder / f"{name}.png"
    atomic_write(json_path, json.dumps(result, indent=2).encode())
    save_png(fig, png_path)
    return Written(result=result, json_path=json_path, png_path=png_path)

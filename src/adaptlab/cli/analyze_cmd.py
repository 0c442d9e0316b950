"""`adaptlab analyze`: what adaptation changed: per-layer RSA / CKA, loss landscapes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from adaptlab.analysis.api import Written, fusion_analysis, landscape_analysis, similarity_analysis
from adaptlab.analysis.landscape import (
    DEFAULT_POINTS,
    DEFAULT_SPAN,
    MAX_POINTS,
    MAX_SPAN,
    MIN_SPAN,
)
from adaptlab.analysis.tokens import DEFAULT_TOKENS
from adaptlab.cli.console import console
from adaptlab.cli.data_file_options import (
    DEFAULT_DATA_FILE,
    DataFileOptions,
    with_data_file_options,
)
from adaptlab.cli.options import (
    BaseModel,
    DataOption,
    Device,
    at_least_two,
    positive,
    positive_finite,
    seed,
)

app = typer.Typer(
    help="See what adaptation changed: per-layer RSA / CKA against the base, loss landscapes, "
    "AdapterFusion weights.",
    no_args_is_help=True,
)

AdapterOption = Annotated[
    Path, typer.Option(help="Run folder (or adapter folder) of a trained model.")
]
Split = Annotated[str, typer.Option(help="train, dev or test; a run folder's own split.")]
Out = Annotated[
    Path | None,
    typer.Option(help="Folder for the JSON and PNG; default: <adapter>/analysis."),
]
Tokens = Annotated[int, typer.Option(help="Tokens sampled (paper: 5000).", callback=at_least_two)]
Seed = Annotated[int, typer.Option(help="Seed of the token sample.", callback=seed)]
Progress = Annotated[bool, typer.Option(help="Show progress bars.")]


@app.command("rsa")
@with_data_file_options()
def rsa(
    adapter: AdapterOption,
    data: DataOption,
    tokens: Tokens = DEFAULT_TOKENS,
    seed: Seed = 0,
    split: Split = "dev",
    out: Out = None,
    data_file: DataFileOptions = DEFAULT_DATA_FILE,
    device: Device = "auto",
    model: BaseModel = None,
    progress: Progress = True,
) -> None:
    """Per-layer RSA of the trained model against its base (adaptation switched off).

    Example:

        adaptlab analyze rsa --adapter runs/rt-houlsby --data rotten-tomatoes
    """
    options = data_file.load_options()
    _similarity("rsa", adapter, data, tokens, seed, split, out, options, device, model, progress)


@app.command("cka")
@with_data_file_options()
def cka(
    adapter: AdapterOption,
    data: DataOption,
    tokens: Tokens = DEFAULT_TOKENS,
    seed: Seed = 0,
    debiased: Annotated[
        bool, typer.Option(help="Use the unbiased HSIC estimator (Song et al. 2012).")
    ] = False,
    split: Split = "dev",
    out: Out = None,
    data_file: DataFileOptions = DEFAULT_DATA_FILE,
    device: Device = "auto",
    model: BaseModel = None,
    progress: Progress = True,
) -> None:
    """Per-layer linear CKA of the trained model against its base.

    Example:

        adaptlab analyze cka --adapter runs/rt-houlsby --data rotten-tomatoes --debiased
    """
    options = data_file.load_options()
    measure = "cka-debiased" if debiased else "cka"
    _similarity(measure, adapter, data, tokens, seed, split, out, options, device, model, progress)


@app.command("landscape")
@with_data_file_options()
def landscape(
    adapter: AdapterOption,
    data: DataOption,
    points: Annotated[
        int,
        typer.Option(
            help=f"Evenly spaced alphas (0 and 1 are added), 2 to {MAX_POINTS}: each is one "
            "pass over the split.",
            callback=at_least_two,
        ),
    ] = DEFAULT_POINTS,
    span: Annotated[
        float,
        typer.Option(
            help=f"alpha runs from -span to span, {MIN_SPAN:g} to {MAX_SPAN:g}: alpha counts "
            "training steps (1 = trained), so a narrower span stays within 1% of the start and "
            "a wider one overflows the loss.",
            callback=positive_finite,
        ),
    ] = DEFAULT_SPAN,
    split: Split = "dev",
    out: Out = None,
    batch_size: Annotated[int, typer.Option(help="Evaluation batch size.", callback=positive)] = 64,
    data_file: DataFileOptions = DEFAULT_DATA_FILE,
    device: Device = "auto",
    model: BaseModel = None,
    progress: Progress = True,
) -> None:
    """Loss along theta0 + alpha (theta1 - theta0) over the trained parameters.

    Example:

        adaptlab analyze landscape --adapter runs/rt-houlsby --data rotten-tomatoes
    """
    options = data_file.load_options()
    written = landscape_analysis(
        adapter,
        data,
        points=points,
        span=span,
        split=split,
        data_options=options,
        out=out,
        device=device,
        model=model,
        batch_size=batch_size,
        progress=progress,
    )
    table = Table(title=f"loss landscape of {adapter} on {written.result['data']}")
    table.add_column("alpha", justify="right")
    table.add_column("loss", justify="right")
    for alpha, loss in zip(written.result["alphas"], written.result["losses"], strict=True):
        table.add_row(f"{alpha:+.3f}", f"{loss:.4f}")
    console().print(table)
    _print_files(written)


@app.command("fusion")
@with_data_file_options()
def fusion(
    adapter: AdapterOption,
    data: DataOption,
    split: Split = "dev",
    out: Out = None,
    batch_size: Annotated[int, typer.Option(help="Evaluation batch size.", callback=positive)] = 64,
    data_file: DataFileOptions = DEFAULT_DATA_FILE,
    device: Device = "auto",
    model: BaseModel = None,
) -> None:
    """A fusion run's mean attention weight per adapter at each fusion layer, over every token.

    Example:

        adaptlab analyze fusion --adapter runs/rt-fusion --data rotten-tomatoes
    """
    written = fusion_analysis(
        adapter,
        data,
        split=split,
        data_options=data_file.load_options(),
        out=out,
        device=device,
        model=model,
        batch_size=batch_size,
    )
    sites = written.result["sites"]
    table = Table(title=f"fusion weights of {adapter} on {written.result['data']}")
    table.add_column("layer", justify="right")
    table.add_column("site")
    adapters = list(sites[0]["weights"])
    for name in adapters:
        table.add_column(name, justify="right")
    for site in sites:
        weights = [f"{site['weights'][name]:.3f}" for name in adapters]
        table.add_row(str(site["block"]), site["role"], *weights)
    means = [sum(s["weights"][n] for s in sites) / len(sites) for n in adapters]
    table.add_row("", "mean", *(f"{m:.3f}" for m in means))
    console().print(table)
    _print_files(written)


def _similarity(
    measure: str,
    adapter: Path,
    data: str,
    tokens: int,
    seed: int,
    split: str,
    out: Path | None,
    options: dict[str, Any],
    device: str,
    model: str | None,
    progress: bool,
) -> None:
    """Run one per-layer similarity analysis and print its table."""
    written = similarity_analysis(
        adapter,
        data,
        measure,
        tokens=tokens,
        seed=seed,
        split=split,
        data_options=options,
        out=out,
        device=device,
        model=model,
        progress=progress,
    )
    result = written.result
    table = Table(
        title=f"{result['measure']} of {result['adapter']} against its base, "
        f"{result['tokens']} tokens of {result['data']}"
    )
    table.add_column("layer", justify="right")
    table.add_column("module")
    table.add_column(result["measure"], justify="right")
    for row in result["layers"]:
        table.add_row(str(row["layer"]), row["module"], f"{row['score']:.4f}")
    console().print(table)
    _print_files(written)


def _print_files(written: Written) -> None:
    print(f"wrote {written.json_path} and {written.png_path}")

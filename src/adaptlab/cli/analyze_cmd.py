"""`adaptlab analyze`: what adaptation changed: per-layer RSA / CKA, loss landscapes, the
spectrum of weight updates, forgetting of what the base could do, AdapterFusion weights."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from adaptlab.analysis.api import (
    Written,
    fusion_analysis,
    landscape_analysis,
    similarity_analysis,
    spectrum_analysis,
)
from adaptlab.analysis.landscape import (
    DEFAULT_POINTS,
    DEFAULT_SPAN,
    MAX_POINTS,
    MAX_SPAN,
    MIN_SPAN,
)
from adaptlab.analysis.spectrum import EPSILON, TOP_K
from adaptlab.analysis.tokens import DEFAULT_TOKENS
from adaptlab.cli.analysis_options import (
    AdapterOption,
    AnalysisTarget,
    Out,
    with_analysis_options,
)
from adaptlab.cli.console import console
from adaptlab.cli.data_file_options import (
    DEFAULT_DATA_FILE,
    DataFileOptions,
    with_data_file_options,
)
from adaptlab.cli.options import BaseModel, Device, at_least_two, positive, positive_finite, seed
from adaptlab.forgetting.options import DEFAULT_LIMIT, DEFAULT_WINDOW, ProbeOptions

app = typer.Typer(
    help="See what adaptation changed: per-layer RSA / CKA against the base, loss landscapes, "
    "the spectrum of weight updates, forgetting of what the base could do, AdapterFusion "
    "weights.",
    no_args_is_help=True,
)

Tokens = Annotated[int, typer.Option(help="Tokens sampled (paper: 5000).", callback=at_least_two)]
Seed = Annotated[int, typer.Option(help="Seed of the token sample.", callback=seed)]
BatchSize = Annotated[int, typer.Option(help="Evaluation batch size.", callback=positive)]


@app.command("rsa")
@with_analysis_options()
@with_data_file_options()
def rsa(
    target: AnalysisTarget,
    tokens: Tokens = DEFAULT_TOKENS,
    seed: Seed = 0,
    data_file: DataFileOptions = DEFAULT_DATA_FILE,
) -> None:
    """Per-layer RSA of the trained model against its base (adaptation switched off).

    Example:

        adaptlab analyze rsa --adapter runs/rt-houlsby --data rotten-tomatoes
    """
    _similarity("rsa", target, tokens, seed, data_file)


@app.command("cka")
@with_analysis_options()
@with_data_file_options()
def cka(
    target: AnalysisTarget,
    tokens: Tokens = DEFAULT_TOKENS,
    seed: Seed = 0,
    debiased: Annotated[
        bool, typer.Option(help="Use the unbiased HSIC estimator (Song et al. 2012).")
    ] = False,
    data_file: DataFileOptions = DEFAULT_DATA_FILE,
) -> None:
    """Per-layer linear CKA of the trained model against its base.

    Example:

        adaptlab analyze cka --adapter runs/rt-houlsby --data rotten-tomatoes --debiased
    """
    _similarity("cka-debiased" if debiased else "cka", target, tokens, seed, data_file)


@app.command("landscape")
@with_analysis_options()
@with_data_file_options()
def landscape(
    target: AnalysisTarget,
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
    batch_size: BatchSize = 64,
    data_file: DataFileOptions = DEFAULT_DATA_FILE,
) -> None:
    """Loss along theta0 + alpha (theta1 - theta0) over the trained parameters.

    Example:

        adaptlab analyze landscape --adapter runs/rt-houlsby --data rotten-tomatoes
    """
    written = landscape_analysis(
        points=points,
        span=span,
        batch_size=batch_size,
        progress=target.progress,
        **target.keywords(data_file),
    )
    table = Table(title=f"loss landscape of {target.adapter} on {written.result['data']}")
    table.add_column("alpha", justify="right")
    table.add_column("loss", justify="right")
    for alpha, loss in zip(written.result["alphas"], written.result["losses"], strict=True):
        table.add_row(f"{alpha:+.3f}", f"{loss:.4f}")
    console().print(table)
    _print_files(written)


@app.command("spectrum")
def spectrum(
    adapter: AdapterOption,
    model: BaseModel = None,
    out: Out = None,
    device: Device = "auto",
    top_k: Annotated[
        int,
        typer.Option(
            help="Top singular vectors of each adapted matrix checked for intruder dimensions "
            "(Shuttleworth et al.'s k).",
            callback=positive,
        ),
    ] = TOP_K,
    epsilon: Annotated[
        float,
        typer.Option(
            help="A top singular vector whose cosine with every singular vector of the base "
            "matrix stays below this is an intruder dimension.",
            callback=positive_finite,
        ),
    ] = EPSILON,
) -> None:
    """The spectrum of each weight update ΔW the run made: effective rank (the singular values
    holding 90% of its squared spectrum), size against W, intruder dimensions.

    Example:

        adaptlab analyze spectrum --adapter runs/qa-lora
    """
    written = spectrum_analysis(
        adapter, top_k=top_k, epsilon=epsilon, out=out, device=device, model=model
    )
    result = written.result
    table = Table(title=f"update spectrum of {adapter} ({'+'.join(result['methods'])})")
    for name in ("block", "kind", "matrices", "effective rank (90%)", "intruders"):
        table.add_column(name, justify="left" if name == "kind" else "right")
    for layer in result["layers"]:
        for kind, summary in ((k, v) for k, v in layer.items() if k != "layer"):
            table.add_row(
                str(layer["layer"]),
                kind,
                str(summary["matrices"]),
                f"{summary['mean_effective_rank']:.1f}",
                str(summary["intruders"]),
            )
    console().print(table)
    if result["without_matrix"]:
        print(f"no weight matrix changed by: {', '.join(result['without_matrix'])}")
    _print_files(written)


@app.command("forgetting")
def forgetting(
    adapter: AdapterOption,
    probes: Annotated[
        list[str] | None,
        typer.Option(
            "--probe",
            "--probes",
            help="kind:value, repeatable: text:fairy-tales or text:FILE.txt, facts:countries or "
            "facts:FILE, harness:TASK (lm-eval), data:DATA (its test split, encoded for the "
            "run's task). Default: the built-in probes.",
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option(help="Most items per probe (a seeded sample).", callback=positive)
    ] = DEFAULT_LIMIT,
    seed: Seed = 0,
    window: Annotated[
        int, typer.Option(help="Tokens per window of a text probe.", callback=at_least_two)
    ] = DEFAULT_WINDOW,
    harness_include: Annotated[
        Path | None,
        typer.Option(help="Folder of lm-eval task YAML for harness: probes (default: adaptlab's)."),
    ] = None,
    batch_size: BatchSize = 8,
    model: BaseModel = None,
    out: Out = None,
    device: Device = "auto",
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
) -> None:
    """What a causal-LM run lost of what its base could do: each probe scored on the base
    (adaptation off) and the adapted model, the difference (positive: a loss) with its paired
    standard error.

    Example:

        adaptlab analyze forgetting --adapter runs/smollm2-lora --probe text:fairy-tales
    """
    from adaptlab.forgetting.api import forgetting_analysis

    options = ProbeOptions(
        limit=limit, seed=seed, window=window, include=harness_include, batch_size=batch_size
    )
    written = forgetting_analysis(
        adapter, probes, options=options, out=out, device=device, model=model, progress=progress
    )
    result = written.result
    table = Table(title=f"forgetting of {adapter} ({'+'.join(result['methods'])})")
    for name in ("probe", "measure", "items", "base", "adapted", "forgetting", "± se"):
        table.add_column(name, justify="left" if name in ("probe", "measure") else "right")
    for row in result["probes"]:
        table.add_row(
            row["probe"],
            row["measure"],
            str(row["items"]),
            f"{row['base']:.4f}",
            f"{row['adapted']:.4f}",
            f"{row['forgetting']:+.4f}",
            f"{row['standard_error']:.4f}",
        )
    console().print(table)
    _print_files(written)


@app.command("fusion")
@with_analysis_options(progress=False)
@with_data_file_options()
def fusion(
    target: AnalysisTarget,
    batch_size: BatchSize = 64,
    data_file: DataFileOptions = DEFAULT_DATA_FILE,
) -> None:
    """A fusion run's mean attention weight per adapter at each fusion layer, over every token.

    Example:

        adaptlab analyze fusion --adapter runs/rt-fusion --data rotten-tomatoes
    """
    written = fusion_analysis(
        batch_size=batch_size,
        **target.keywords(data_file),
    )
    sites = written.result["sites"]
    table = Table(title=f"fusion weights of {target.adapter} on {written.result['data']}")
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
    measure: str, target: AnalysisTarget, tokens: int, seed: int, data_file: DataFileOptions
) -> None:
    """Run one per-layer similarity analysis and print its table."""
    written = similarity_analysis(
        measure=measure,
        tokens=tokens,
        seed=seed,
        progress=target.progress,
        **target.keywords(data_file),
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

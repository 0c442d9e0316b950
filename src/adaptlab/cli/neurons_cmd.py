"""`adaptlab neurons`: find the FFN neurons that express facts; suppress, amplify, edit, erase."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from adaptlab.cli.options import Device
from adaptlab.knowledge.attribution import DEFAULT_STEPS
from adaptlab.knowledge.editing import LAMBDA1, LAMBDA2
from adaptlab.knowledge.effects import AMPLIFY, SUPPRESS
from adaptlab.knowledge.runs import NEURONS_FILE, run_erase, run_find, run_scaling, run_update

app = typer.Typer(
    help="Knowledge neurons: find, suppress, amplify, edit, erase.", no_args_is_help=True
)

NeuronsFile = Annotated[
    Path,
    typer.Option("--neurons", help=f"The {NEURONS_FILE} written by `adaptlab neurons find`."),
]
Seed = Annotated[int, typer.Option(help="Seed of the random control neurons.")]


def _files(console: Console, files: list[Path]) -> None:
    console.print("wrote " + ", ".join(str(f) for f in files), highlight=False)


@app.command("find")
def find(
    model: Annotated[str, typer.Option(help="Built-in name (smollm2-135m), folder or hub name.")],
    facts: Annotated[
        str, typer.Option(help="builtin:countries, a facts JSON file or a facts CSV file.")
    ],
    relation: Annotated[str, typer.Option(help="The relation whose facts to attribute.")],
    limit: Annotated[
        int | None, typer.Option(help="Stop after this many facts the model answers correctly.")
    ] = None,
    steps: Annotated[int, typer.Option(help="Integrated-gradient steps m.")] = DEFAULT_STEPS,
    templates: Annotated[
        str | None, typer.Option(help="JSON of {relation: [templates]} (needed for CSV facts).")
    ] = None,
    kind: Annotated[
        str | None, typer.Option(help="masked or causal; inferred from the model when omitted.")
    ] = None,
    min_correct: Annotated[
        float,
        typer.Option(help="Keep facts answered correctly under this share of their templates."),
    ] = 0.5,
    out: Annotated[Path, typer.Option(help="Folder for neurons.json and plots.")] = Path(
        "runs/neurons"
    ),
    device: Device = "cpu",
) -> None:
    """Find each known fact's knowledge neurons and count them per layer.

    Example:

        adaptlab neurons find --model smollm2-135m --facts builtin:countries --relation capital \\
            --limit 20
    """
    report = run_find(
        model, facts, relation, out, limit, steps, templates, kind, min_correct, device=device
    )
    console = Console()
    console.print(
        f"{report.known} of {report.checked} checked {relation} facts answered correctly",
        highlight=False,
    )
    for result in report.results:
        fact = result.fact
        neurons = ", ".join(
            f"L{layer}#{index} ({score:.3g})"
            for (layer, index), score in zip(result.neurons, result.scores, strict=True)
        )
        console.print(
            f"<{fact.subject}, {fact.relation}, {fact.object}> p={result.probability:.3f} "
            f"share={result.share:.2f}: {neurons or 'none'}",
            highlight=False,
        )
    table = Table(title="knowledge neurons per layer")
    table.add_column("layer", justify="right")
    table.add_column("neurons", justify="right")
    table.add_column("")
    for layer, count in enumerate(report.histogram):
        table.add_row(str(layer), str(count), "█" * count)
    console.print(table)
    _files(console, report.files)


def _scaling(neurons: Path, factor: float, name: str, seed: int, device: str) -> None:
    summary, files = run_scaling(neurons, factor, name, seed, device=device)
    console = Console()
    console.print(
        f"{name} over {summary['facts']} facts: mean change of P(correct answer) "
        f"{100 * summary['knowledge_change']:+.1f}% with knowledge neurons, "
        f"{100 * summary['random_change']:+.1f}% with as many random neurons",
        highlight=False,
    )
    _files(console, files)


@app.command("suppress")
def suppress(neurons: NeuronsFile, seed: Seed = 0, device: Device = "cpu") -> None:
    """Set each fact's knowledge neurons to 0 (and, separately, as many random ones).

    Example:

        adaptlab neurons suppress --neurons runs/neurons/neurons.json
    """
    _scaling(neurons, SUPPRESS, "suppress", seed, device)


@app.command("amplify")
def amplify(neurons: NeuronsFile, seed: Seed = 0, device: Device = "cpu") -> None:
    """Double each fact's knowledge neurons (and, separately, as many random ones).

    Example:

        adaptlab neurons amplify --neurons runs/neurons/neurons.json
    """
    _scaling(neurons, AMPLIFY, "amplify", seed, device)


@app.command("edit")
def edit(
    neurons: NeuronsFile,
    lambda1: Annotated[float, typer.Option(help="Weight of the old answer removed.")] = LAMBDA1,
    lambda2: Annotated[float, typer.Option(help="Weight of the new answer added.")] = LAMBDA2,
    limit: Annotated[int | None, typer.Option(help="Update only the first N facts.")] = None,
    seed: Seed = 0,
    device: Device = "cpu",
) -> None:
    """Update each fact <h, r, t> to <h, r, t'> through its neurons' value slots.

    Example:

        adaptlab neurons edit --neurons runs/neurons/neurons.json
    """
    table, files = run_update(neurons, lambda1, lambda2, seed, limit, device=device)
    _print_rows(
        "fact updates",
        [{"neurons": name, **values} for name, values in table.items()],
    )
    _files(Console(), files)


@app.command("erase")
def erase(neurons: NeuronsFile, seed: Seed = 0, device: Device = "cpu") -> None:
    """Erase the relation: zero the value slots of all its facts' neurons.

    Example:

        adaptlab neurons erase --neurons runs/neurons/neurons.json
    """
    rows, files = run_erase(neurons, seed, device)
    _print_rows("relation erasure (perplexity)", rows)
    _files(Console(), files)


def _print_rows(title: str, rows: list[dict[str, Any]]) -> None:
    table = Table(title=title)
    for column in rows[0] if rows else []:
        table.add_column(column.replace("_", " "), justify="right")  # headers wrap at spaces
    for row in rows:
        table.add_row(*(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row.values()))
    Console().print(table)

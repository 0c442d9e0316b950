"""`adaptlab neurons`: find the FFN neurons that express facts; suppress, amplify, edit, erase."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from adaptlab.cli.options import BaseModel, Device
from adaptlab.knowledge.editing import LAMBDA1, LAMBDA2
from adaptlab.knowledge.effects import AMPLIFY, SUPPRESS
from adaptlab.knowledge.neuron_file import NEURONS_FILE
from adaptlab.knowledge.quadrature import DEFAULT_RULE, DEFAULT_STEPS, DEFAULT_TOLERANCE
from adaptlab.knowledge.runs import run_erase, run_find, run_scaling, run_update

app = typer.Typer(
    help="Knowledge neurons: find, suppress, amplify, edit, erase; compare a run with its base.",
    no_args_is_help=True,
)

NeuronsFile = Annotated[
    Path,
    typer.Option("--neurons", help=f"The {NEURONS_FILE} written by `adaptlab neurons find`."),
]
Seed = Annotated[int, typer.Option(help="Seed of the random control neurons.")]
ModelOverride = Annotated[
    str | None,
    typer.Option(
        "--model",
        help=f"The model `find` ran on, where it is now (default: the one {NEURONS_FILE} names, "
        "when a built-in or hub name: a model folder must be given here).",
    ),
]


def _console() -> Console:
    """Standard output that prints text as given: names from files and options are never
    read as markup or emoji codes."""
    return Console(markup=False, emoji=False, highlight=False)


def _files(console: Console, files: list[Path]) -> None:
    console.print("wrote " + ", ".join(str(f) for f in files))


Steps = Annotated[
    int | None,
    typer.Option(help=f"Integrated-gradient steps m of --quadrature riemann ({DEFAULT_STEPS})."),
]
Tolerance = Annotated[
    float | None,
    typer.Option(
        help="Estimated error over the scores' norm that --quadrature adaptive aims at "
        f"({DEFAULT_TOLERANCE:g})."
    ),
]
Templates = Annotated[
    str | None,
    typer.Option(
        help='A JSON file of {"relation": ["template with [X] and [Y]", ...]} (needed for CSV '
        "facts; replaces a JSON fact file's own)."
    ),
]


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
    quadrature: Annotated[
        str,
        typer.Option(
            help="adaptive (Gauss-Lobatto, refined where needed) or riemann (the paper's "
            "right Riemann sum, to reproduce its numbers)."
        ),
    ] = DEFAULT_RULE,
    steps: Steps = None,
    tolerance: Tolerance = None,
    templates: Templates = None,
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
    device: Device = "auto",
) -> None:
    """Find each known fact's knowledge neurons and count them per layer.

    Example:

        adaptlab neurons find --model smollm2-135m --facts builtin:countries --relation capital \\
            --limit 20
    """
    report = run_find(
        model, facts, relation, out, limit, steps, templates, kind, min_correct,
        device=device, rule=quadrature, tolerance=tolerance,
    )  # fmt: skip
    console = _console()
    console.print(f"{report.known} of {report.checked} checked {relation} facts answered correctly")
    for result in report.results:
        fact = result.fact
        neurons = ", ".join(
            f"L{layer}#{index} ({score:.3g})"
            for (layer, index), score in zip(result.neurons, result.scores, strict=True)
        )
        console.print(
            f"<{fact.subject}, {fact.relation}, {fact.object}> p={result.probability:.3f} "
            f"share={result.share:.2f}: {neurons or 'none'}"
        )
    table = Table(title="knowledge neurons per layer")
    table.add_column("layer", justify="right")
    table.add_column("neurons", justify="right")
    table.add_column("")
    for layer, count in enumerate(report.histogram):
        table.add_row(str(layer), str(count), "█" * count)
    console.print(table)
    _files(console, report.files)


@app.command("compare")
def compare(
    adapter: Annotated[
        Path, typer.Option(help="Run folder (or adapter folder) of a trained causal or masked LM.")
    ],
    facts: Annotated[
        str, typer.Option(help="builtin:countries, a facts JSON file or a facts CSV file.")
    ] = "builtin:countries",
    relation: Annotated[
        str | None, typer.Option(help="The relation whose facts to compare (default: all).")
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(help="Stop after this many facts the base or the adapted model answers."),
    ] = None,
    quadrature: Annotated[
        str, typer.Option(help="adaptive or riemann, as for `adaptlab neurons find`.")
    ] = DEFAULT_RULE,
    steps: Steps = None,
    tolerance: Tolerance = None,
    templates: Templates = None,
    min_correct: Annotated[
        float,
        typer.Option(help="A fact is answered when correct under this share of its templates."),
    ] = 0.5,
    model: BaseModel = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Folder for compare.json and compare.png; default: <adapter>/neurons-compare."
        ),
    ] = None,
    device: Device = "auto",
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
) -> None:
    """The base model (adaptation off) against the adapted one on the same facts: the facts
    each answers, those lost and gained, and how each fact's knowledge neurons moved.

    Example:

        adaptlab neurons compare --adapter runs/qa-lora --facts builtin:countries --limit 10
    """
    from adaptlab.knowledge.compare_run import run_compare

    report = run_compare(
        adapter, facts, relation, out, limit, steps, templates, min_correct, progress,
        device=device, rule=quadrature, tolerance=tolerance, model=model,
    )  # fmt: skip
    console = _console()
    summary = report.summary
    answered = summary["answered"]
    console.print(
        f"{summary['checked']} facts checked: the base answers {answered['base']}, the adapted "
        f"model {answered['adapted']}; kept {answered['kept']}, lost {answered['lost']}, "
        f"gained {answered['gained']}"
    )
    table = Table(title="facts either model answers: answer (probability), neurons base -> adapted")
    for column in ("fact", "base", "adapted", "outcome", "neurons", "kept/lost/new", "Jaccard"):
        table.add_column(column, justify="left" if column == "fact" else "right")
    for row in report.rows:
        found = row.neurons
        if found is None:
            continue
        fact = row.fact
        table.add_row(
            f"<{fact.subject}, {fact.relation}, {fact.object}>",
            _answer_cell(row.base.answered, row.base.probability),
            _answer_cell(row.adapted.answered, row.adapted.probability),
            row.outcome,
            f"{len(found.base)} -> {len(found.adapted)}",
            f"{found.kept}/{found.lost}/{found.new}",
            _cell(found.jaccard),
        )
    console.print(table)
    for group, who in (("base_known", "the base"), ("adapted_known", "the adapted model")):
        part = summary[group]
        counts = part["neurons"]
        console.print(
            f"facts {who} answers ({part['facts']}): mean Jaccard {_cell(part['mean_jaccard'])}; "
            f"neurons {counts['base']} -> {counts['adapted']} (kept {counts['kept']}, lost "
            f"{counts['lost']}, new {counts['new']})"
        )
    layers = Table(title="knowledge neurons per layer, base -> adapted")
    layers.add_column("layer", justify="right")
    layers.add_column("facts the base answers", justify="right")
    layers.add_column("facts the adapted model answers", justify="right")
    base_known, adapted_known = summary["base_known"]["layers"], summary["adapted_known"]["layers"]
    for layer in range(report.num_layers):
        layers.add_row(
            str(layer),
            f"{base_known['base'][layer]} -> {base_known['adapted'][layer]}",
            f"{adapted_known['base'][layer]} -> {adapted_known['adapted'][layer]}",
        )
    console.print(layers)
    _files(console, report.files)


def _answer_cell(answered: bool, probability: float) -> str:
    return f"{'right' if answered else 'wrong'} ({probability:.2g})"


def _scaling_command(name: str, factor: float, effect: str) -> None:
    """Add the command `name`: scale each fact's knowledge neurons by `factor` (`effect` says
    how, for its help) and, separately, as many random ones; print the mean change."""

    def command(
        neurons: NeuronsFile, seed: Seed = 0, device: Device = "auto", model: ModelOverride = None
    ) -> None:
        summary, files = run_scaling(neurons, factor, name, seed, device=device, model=model)
        console = _console()
        console.print(
            f"{name} over {summary['facts']} facts: mean change of P(correct answer) "
            f"{100 * summary['knowledge_change']:+.1f}% with knowledge neurons, "
            f"{100 * summary['random_change']:+.1f}% with as many random neurons"
        )
        _files(console, files)

    command.__doc__ = f"""{effect} (and, separately, as many random ones).

    Example:

        adaptlab neurons {name} --neurons runs/neurons/neurons.json
    """
    app.command(name)(command)


_scaling_command("suppress", SUPPRESS, "Set each fact's knowledge neurons to 0")
_scaling_command("amplify", AMPLIFY, "Double each fact's knowledge neurons")


@app.command("edit")
def edit(
    neurons: NeuronsFile,
    lambda1: Annotated[float, typer.Option(help="Weight of the old answer removed.")] = LAMBDA1,
    lambda2: Annotated[float, typer.Option(help="Weight of the new answer added.")] = LAMBDA2,
    limit: Annotated[int | None, typer.Option(help="Update only the first N facts.")] = None,
    seed: Seed = 0,
    device: Device = "auto",
    model: ModelOverride = None,
) -> None:
    """Update each fact <h, r, t> to <h, r, t'> through its neurons' value slots.

    Example:

        adaptlab neurons edit --neurons runs/neurons/neurons.json
    """
    table, files = run_update(neurons, lambda1, lambda2, seed, limit, device=device, model=model)
    console = _console()
    _print_rows(console, "fact updates", [{"neurons": n, **values} for n, values in table.items()])
    _files(console, files)


@app.command("erase")
def erase(
    neurons: NeuronsFile, seed: Seed = 0, device: Device = "auto", model: ModelOverride = None
) -> None:
    """Erase the relation: zero the value slots of all its facts' neurons.

    Example:

        adaptlab neurons erase --neurons runs/neurons/neurons.json
    """
    rows, files = run_erase(neurons, seed, device, model)
    console = _console()
    _print_rows(console, "relation erasure (perplexity)", rows)
    _files(console, files)


def _print_rows(console: Console, title: str, rows: list[dict[str, Any]]) -> None:
    table = Table(title=title)
    for column in rows[0] if rows else []:
        table.add_column(column.replace("_", " "), justify="right")  # headers wrap at spaces
    for row in rows:
        table.add_row(*(_cell(v) for v in row.values()))
    console.print(table)
    if any(value is None for row in rows for value in row.values()):
        console.print("n/a: not measured, the facts file holds no facts of other relations")


def _cell(value: object) -> str:
    """A number to 4 digits; `n/a` for one not measured (no facts of other relations)."""
    if value is None:
        return "n/a"
    return f"{value:.4g}" if isinstance(value, float) else str(value)

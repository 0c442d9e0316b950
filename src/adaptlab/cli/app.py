"""The `adaptlab` command line: thin commands that parse, call one function, and print."""

from __future__ import annotations

import sys

import typer
from rich.text import Text

from adaptlab.cli import (
    adapters_cmd,
    analyze_cmd,
    data_cmd,
    eval_cmd,
    methods_cmd,
    neurons_cmd,
    predict_cmd,
    rank_cmd,
    study_cmd,
    train_cmd,
)
from adaptlab.cli.console import console
from adaptlab.errors import AdaptlabError

app = typer.Typer(
    name="adaptlab",
    help="Adapt pretrained transformers with few trainable parameters, compare, analyse.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _options(
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks for errors."),
) -> None:
    """Adapt pretrained transformers with few trainable parameters, compare, analyse."""


app.command("train")(train_cmd.train)
app.command("eval")(eval_cmd.evaluate)
app.command("predict")(predict_cmd.predict)
app.command("methods")(methods_cmd.methods)
app.command("rank")(rank_cmd.rank_models)
app.command("export")(adapters_cmd.export)
app.command("import")(adapters_cmd.import_)
app.add_typer(adapters_cmd.app, name="adapters")
app.add_typer(data_cmd.app, name="data")
app.add_typer(study_cmd.app, name="study")
app.add_typer(analyze_cmd.app, name="analyze")
app.add_typer(neurons_cmd.app, name="neurons")

_stderr = console(stderr=True)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; user errors print one line (a traceback only with --debug) and exit 1.

    Typer itself answers usage errors (exit 2, with the usage line) and Ctrl-C (exit 130).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    if debug:  # accepted anywhere on the line, handed to the top-level option
        args = ["--debug", *(a for a in args if a != "--debug")]
    try:
        app(args=args, prog_name="adaptlab")
    except AdaptlabError as error:
        if debug:
            raise
        message = Text.assemble(("error:", "bold red"), f" {error}")
        _stderr.print(message, highlight=False, soft_wrap=True)
        sys.exit(1)

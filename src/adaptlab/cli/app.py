"""The `adaptlab` command line: thin commands that parse, call one function, and print.

A command's module is imported only when the command runs, so `adaptlab --help` loads no torch.
"""

from __future__ import annotations

import logging
import sys

import typer
from rich.text import Text

from adaptlab.cli.console import console
from adaptlab.cli.lazy_group import Target, lazy_group
from adaptlab.cli.relaunch import remember_command_line
from adaptlab.engine.launched import follow_launcher
from adaptlab.errors import AdaptlabError
from adaptlab.threads import parse_threads, share_cpus, use_threads

COMMANDS: dict[str, Target] = {
    "train": ("train_cmd", "train"),
    "eval": ("eval_cmd", "evaluate"),
    "predict": ("predict_cmd", "predict"),
    "methods": ("methods_cmd", "methods"),
    "rank": ("rank_cmd", "rank_models"),
    "sequence": ("sequence_cmd", "sequence"),
    "combine": ("combine_cmd", "combine"),
    "export": ("adapters_cmd", "export"),
    "import": ("adapters_cmd", "import_"),
    "serve": ("serve_cmd", "serve"),
    "adapters": ("adapters_cmd", "app"),
    "data": ("data_cmd", "app"),
    "study": ("study_cmd", "app"),
    "analyze": ("analyze_cmd", "app"),
    "neurons": ("neurons_cmd", "app"),
}
"""Each command, in listing order: its module in adaptlab.cli and the function there (or the
typer app of a group of commands)."""
TRAINING_COMMANDS = ("train", "sequence", "study")
"""The commands that train through adaptlab's loop, whose thread governor guards them on a
busy machine: their OpenMP threads keep OpenMP's default wait (`adaptlab.threads.share_cpus`)."""

app = typer.Typer(
    name="adaptlab",
    help="Adapt pretrained transformers with few trainable parameters, compare, analyse.",
    cls=lazy_group(COMMANDS),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _options(
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks for errors."),
    threads: int | None = typer.Option(
        None,
        "--threads",
        help="CPU threads each process computes with (default: the CPUs this command may use, "
        "its affinity and cgroup quota, shared among its processes; or ADAPTLAB_THREADS).",
    ),
) -> None:
    """Adapt pretrained transformers with few trainable parameters, compare, analyse."""


_stderr = console(stderr=True)


class _ToStderr(logging.Handler):
    """Shows the library's notes for the user (the device a run trains on, a Ray node a study
    lost) on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        _stderr.print(record.getMessage(), highlight=False, soft_wrap=True)


for _notes in map(logging.getLogger, ("adaptlab.device", "adaptlab.study")):
    if not any(isinstance(handler, _ToStderr) for handler in _notes.handlers):
        _notes.addHandler(_ToStderr())
        _notes.setLevel(logging.INFO)


def _set_threads(args: list[str]) -> list[str]:
    """Choose this process's CPU threads and OpenMP wait policy before torch loads
    (`adaptlab.threads`), from `--threads` wherever it stands; the arguments with it handed to
    the top-level option. Called where torch is loaded already (the CLI run from Python), only
    a `--threads` given changes anything."""
    threads, rest = _take_threads(args)
    command = next((arg for arg in rest if not arg.startswith("-")), None)
    if "torch" not in sys.modules:
        count = None if threads is None else parse_threads(threads)
        share_cpus(count, training=command in TRAINING_COMMANDS)
    elif threads is not None:
        use_threads(parse_threads(threads))
    return rest if threads is None else ["--threads", threads, *rest]


def _take_threads(args: list[str]) -> tuple[str | None, list[str]]:
    """The value of `--threads N` (or `--threads=N`) wherever it stands, and the other
    arguments; a `--threads` with no value is left for typer to refuse."""
    for index, arg in enumerate(args):
        if arg.startswith("--threads="):
            return arg.partition("=")[2], args[:index] + args[index + 1 :]
        if arg == "--threads" and index + 1 < len(args):
            return args[index + 1], args[:index] + args[index + 2 :]
    return None, args


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; user errors print one line (a traceback only with --debug) and exit 1.

    Typer itself answers usage errors (exit 2, with the usage line) and Ctrl-C (exit 130).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    if debug:  # accepted anywhere on the line, handed to the top-level option
        args = ["--debug", *(a for a in args if a != "--debug")]
    remember_command_line(args)
    follow_launcher()  # in a process of `--nproc N`: end with the command that started it
    try:
        args = _set_threads(args)
        app(args=args, prog_name="adaptlab")
    except AdaptlabError as error:
        if debug:
            raise
        message = Text.assemble(("error:", "bold red"), f" {error}")
        _stderr.print(message, highlight=False, soft_wrap=True)
        sys.exit(1)

"""The consoles commands print to. Markup is off: text that a user or a file supplies (a file
name, a label, a model name holding `[/x]` or `[bold red]`) prints exactly as written and can
never break or restyle the output; styles are given as `rich.text.Text` spans instead."""

from __future__ import annotations

import sys

from rich.console import Console

PIPE_WIDTH = 160
"""Line width when the output is not a terminal (a file, a pipe), where rich would use 80."""


def console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr) with markup off; wide lines when not a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, markup=False, width=None if stream.isatty() else PIPE_WIDTH)

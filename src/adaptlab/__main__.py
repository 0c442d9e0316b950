"""`python -m adaptlab` is the `adaptlab` command (how `--nproc` starts its processes)."""

from adaptlab.cli.app import main

main()

"""A peer library in a small virtual environment of its own that sees `.venv`'s packages.

Used for peers whose declared dependencies would drag extra packages into `.venv` (ckatorch
needs seaborn and pandas to import) or that only need a package or two beside adaptlab's
torch and transformers (knowledge-neurons needs einops). The overlay venv gets just `packages`,
installed without dependencies, and a `.pth` file that puts `.venv`'s site-packages on its
path (torch, transformers, ...; not the editable adaptlab, whose own `.pth` inside `.venv` is
not read from there, so peer code runs without adaptlab). Created once, on demand; its Python
is what a benchmark's peer subprocess runs.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

READY = ".overlay-ready"


def overlay_venv(folder: Path, packages: Sequence[str]) -> Path:
    """The Python of the overlay venv at `folder` holding `packages` (pinned, no deps)."""
    python = folder / "bin" / "python"
    wanted = "\n".join(packages)
    ready = folder / READY
    if not (ready.is_file() and ready.read_text() == wanted and python.exists()):
        print(f"creating {folder} with {', '.join(packages)} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(folder)], check=True)
        install = [str(python), "-m", "pip", "install", "-q", "--no-deps", *packages]
        subprocess.run(install, check=True)
        ready.write_text(wanted)
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    (Path(site) / "zz_adaptlab_venv.pth").write_text(ours + "\n")
    return python

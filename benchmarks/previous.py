"""The sources of an earlier adaptlab commit, for benchmarks that measure today's code against
them in the same virtual environment (their `src` first on PYTHONPATH)."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent


def previous_sources(rev: str) -> Path:
    """The `src` folder of adaptlab at `rev`, extracted once under benchmarks/."""
    folder = BENCH_DIR / f".previous-{rev}"
    if not (folder / "src" / "adaptlab" / "__init__.py").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "src"],
            check=True,
            capture_output=True,
        ).stdout
        tar_path = folder / "src.tar"
        tar_path.write_bytes(archive)
        with tarfile.open(tar_path) as tar:
            tar.extractall(folder, filter="data")
        tar_path.unlink()
    return folder / "src"

"""The report in a real headless Chromium: it loads offline with no console error, every plot
decodes and takes room on the page, and a screenshot is not blank.

The report itself has no script. The test loads a copy with a small probe script added (it
records errors and, on `load`, the size of every image) and reads the probe's result from
`--dump-dom`; console messages come from Chromium's log on stderr (`CONSOLE(...)` lines).
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image
from test_report_records import make_study

from adaptlab.report import write_report

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
]
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian Chromium: apt-get install -y chromium"
    ),
]

HEAD_PROBE = """<script>window.__errors = [];
addEventListener("error", e => __errors.push(String(e.message || e.target.src)), true);
</script>"""
BODY_PROBE = """<script>addEventListener("load", () => {
  const sizes = [...document.images].map(i => {
    const r = i.getBoundingClientRect();
    return [i.complete, i.naturalWidth, Math.round(r.width), Math.round(r.height)];
  });
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify({sizes: sizes, errors: __errors});
  document.body.appendChild(out);
});</script>"""


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tempfile.mkdtemp(dir=tmp_path, prefix="profile-")  # a fresh, empty profile
    return subprocess.run(
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
    )


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two training sizes, two learning rates, two methods: 7 plots."""
    records = make_study(methods=("full", "houlsby(hidden_size=64)"), seeds=(0, 1))
    return write_report(records, tmp_path_factory.mktemp("report") / "report.html", title="t")


def test_report_loads_without_errors_and_shows_every_plot(report: Path, tmp_path: Path) -> None:
    page = report.read_text(encoding="utf-8")
    probed = tmp_path / "probed.html"
    probed.write_text(
        page.replace("<head>", "<head>" + HEAD_PROBE, 1).replace("</body>", BODY_PROBE + "</body>")
    )
    done = chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", probed.as_uri())
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    assert found, f"probe did not run; stderr:\n{done.stderr[-2000:]}"
    probe = json.loads(html.unescape(found.group(1)))
    assert probe["errors"] == []
    assert console_lines(done.stderr) == []
    assert len(probe["sizes"]) == 7
    for complete, natural, width, height in probe["sizes"]:
        assert complete and natural > 0 and width > 300 and height > 100


def test_screenshot_shows_coloured_plots(report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    done = chromium(tmp_path, "--window-size=1000,2400", f"--screenshot={shot}", report.as_uri())
    assert console_lines(done.stderr) == []
    pixels = image.imread(shot)[..., :3]
    assert pixels.std() > 0.05  # not a blank page
    saturation = pixels.max(axis=-1) - pixels.min(axis=-1)
    assert np.mean(saturation > 0.4) > 0.001  # the plots' colours, absent from text and tables

"""The report in a real headless Chromium: it loads offline with no console error, every plot
decodes and takes room on the page, and a screenshot is not blank. The report of the real
Reuters-R8 study (tests/fixtures/reuters-imbalance.json) also shows, on the page, that it is
judged by macro-F1 and its per-class table.

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
from typing import Any

import numpy as np
import pytest
from matplotlib import image
from test_report_records import load_fixture_runs, make_study

from adaptlab.report import write_report

CHROMIUM = Path("/usr/bin/chromium")
REUTERS = Path(__file__).parent / "fixtures" / "reuters-imbalance.json"
REUTERS_BY_SUPPORT = ["earn", "acq", "crude", "money-fx", "interest", "trade", "ship", "grain"]
"""Reuters-R8's test classes by support (1083, 696, 121, 87, 81, 75, 36, 10)."""
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
  const judged = document.querySelector("p.judged");
  const classes = document.querySelector("#per-class table");
  const box = classes ? classes.getBoundingClientRect() : null;
  const rows = classes ? [...classes.tBodies[0].rows] : [];
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify({
    sizes: sizes,
    errors: __errors,
    judged: judged ? judged.innerText : null,
    classes: rows.map(r => [r.className, r.cells[0].innerText]),
    classesBox: box ? [Math.round(box.width), Math.round(box.height)] : null,
  });
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


@pytest.fixture(scope="module")
def reuters_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real study of examples/reuters-imbalance.yaml: one setting, no learning-rate grid."""
    out = tmp_path_factory.mktemp("reuters") / "report.html"
    return write_report(load_fixture_runs(REUTERS), out, title="reuters-imbalance")


def probe(report: Path, tmp_path: Path) -> dict[str, Any]:
    """What the probe script saw once the page loaded in Chromium."""
    page = report.read_text(encoding="utf-8")
    probed = tmp_path / "probed.html"
    probed.write_text(
        page.replace("<head>", "<head>" + HEAD_PROBE, 1).replace("</body>", BODY_PROBE + "</body>")
    )
    done = chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", probed.as_uri())
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    assert found, f"probe did not run; stderr:\n{done.stderr[-2000:]}"
    assert console_lines(done.stderr) == []
    seen: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    assert seen["errors"] == []
    for complete, natural, width, height in seen["sizes"]:
        assert complete and natural > 0 and width > 300 and height > 100
    return seen


def test_report_loads_without_errors_and_shows_every_plot(report: Path, tmp_path: Path) -> None:
    assert len(probe(report, tmp_path)["sizes"]) == 7


def test_the_reuters_report_is_judged_by_macro_f1_and_shows_its_classes(
    reuters_report: Path, tmp_path: Path
) -> None:
    seen = probe(reuters_report, tmp_path)
    assert len(seen["sizes"]) == 2  # efficiency and dev curves (one size, one rate)
    assert seen["judged"].startswith("Methods are judged by macro-F1 on reuters-r8 (the largest")
    assert [name.rstrip(" ∅\u00a0") for _, name in seen["classes"]] == REUTERS_BY_SUPPORT
    width, height = seen["classesBox"]
    assert width > 400 and height > 8 * 15  # all eight rows take room on the page


def test_screenshot_shows_coloured_plots(report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    done = chromium(tmp_path, "--window-size=1000,3600", f"--screenshot={shot}", report.as_uri())
    assert console_lines(done.stderr) == []
    pixels = image.imread(shot)[..., :3]
    assert pixels.std() > 0.05  # not a blank page
    saturation = pixels.max(axis=-1) - pixels.min(axis=-1)
    assert np.mean(saturation > 0.4) > 0.001  # the plots' colours, absent from text and tables

"""The HTML report looked at in a real browser (issue 15, item 13): headless Chromium renders the demo's
report at a desktop and a narrow window; the page never scrolls sideways (a wide table scrolls inside
itself), nothing sticks out past the window, every figure loads and fits, and a screenshot is taken.

Skips, saying so, where no Chromium is installed (Debian: ``apt-get install chromium``)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parents[1] / "golden" / "demo_report.json"
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get install chromium); the "
    "report's layout in a browser is not checked here")

#: Run after the page (and its data: URI figures) loaded; writes what it measured into the page.
CHECK = """
window.addEventListener('load', () => {
  const vw = document.documentElement.clientWidth;
  const sticking = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (el.parentElement && el.parentElement.closest('table, pre')) continue;  // they scroll inside
    if (el.getBoundingClientRect().right > vw + 1) sticking.push(el.tagName + ': ' + el.textContent.slice(0, 60));
  }
  const out = {
    clientWidth: vw, scrollWidth: document.documentElement.scrollWidth, sticking: sticking,
    images: [...document.images].map(i => ({loaded: i.complete && i.naturalWidth > 0,
      right: i.getBoundingClientRect().right, width: i.getBoundingClientRect().width})),
    headings: [...document.querySelectorAll('h2')].map(h => h.textContent),
    tables: document.querySelectorAll('table').length,
  };
  const pre = document.createElement('pre');
  pre.id = 'layout-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
"""


def _chromium(*args: str, profile: Path) -> str:
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from prmkit.eval import write_report

    out = tmp_path_factory.mktemp("report")
    paths = write_report(json.loads(GOLDEN.read_text()), out / "report", title="prmkit demo")
    return paths


@pytest.mark.parametrize("width", [1280, 800])
def test_the_report_renders_without_overflow_and_its_figures_load(report, width, tmp_path):
    page = tmp_path / "report.html"
    page.write_text(report["html"].read_text().replace("</body>", f"<script>{CHECK}</script>\n</body>"))
    dom = _chromium(f"--window-size={width},900", "--virtual-time-budget=5000", "--dump-dom",
                    page.as_uri(), profile=tmp_path / "profile")
    found = re.search(r'<pre id="layout-check">(.*?)</pre>', dom, re.S)
    assert found, "the check did not run: " + dom[-500:]
    m = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                   .replace("&gt;", ">"))
    assert m["scrollWidth"] <= m["clientWidth"], f"the page scrolls sideways at {width} px: {m['sticking'][:5]}"
    assert m["sticking"] == [], m["sticking"][:5]
    figures = [k for k in report if k.startswith("figure:")]
    assert len(m["images"]) == len(figures) >= 3
    for img in m["images"]:
        assert img["loaded"], "a figure did not load"
        assert img["right"] <= m["clientWidth"] and img["width"] > 200
    assert {"Process-supervision card", "Best-of-N", "Step metrics"} <= set(m["headings"])
    assert m["tables"] >= 10


def test_a_screenshot_is_taken(report, tmp_path):
    shot = tmp_path / "report.png"
    _chromium("--window-size=1280,4000", f"--screenshot={shot}", report["html"].as_uri(),
              profile=tmp_path / "profile")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000  # a rendered page, not a blank one

"""What the page tests share (tests/test_ui_page.py, tests/test_ui_page_early.py): Debian's
Chromium, headless, driven by Selenium through Debian's chromedriver (scripts/setup.sh installs
both; docs/UI.md), one per test module; the page's state read in one call; a wait on it; a
screenshot of the whole page; a sampler or service watch that hands the page a given value.

Outside CI a missing browser skips the tests; under ``CI=true`` it fails them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from tests.unavailable import unavailable

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--window-size=1300,1000")
WAIT_S = 60.0

# What the test reads off the page, in one call: the page's own data-* marks and texts.
PAGE_STATE = """
const q = (s, r = document) => [...r.querySelectorAll(s)];
const shown = (id) => {
  const e = document.getElementById(id);
  return e.hidden ? null : e.textContent;
};
const card = (id) => {
  const c = document.getElementById(id);
  if (!c) return null;
  return {load: c.dataset.load, state: c.dataset.state, role: c.dataset.role, text: c.textContent,
    facts: Object.fromEntries(q("dd[data-fact]", c).map((d) => [d.dataset.fact, d.textContent])),
    phases: Object.fromEntries(q("tr[data-phase]", c).map((r) => [r.dataset.phase,
      {open: Number(r.dataset.open),
       done: r.dataset.done === "" ? null : Number(r.dataset.done)}])),
    cells: q(".cell", c).length, early: early(c)};
};
const early = (c) => {
  const e = c.querySelector(".early");
  if (!e) return null;
  return {state: e.dataset.earlyState, keyShare: Number(e.dataset.keyShare),
    bytesShare: Number(e.dataset.bytesShare), demandBytes: Number(e.dataset.demandBytes),
    keysWaiting: Number(e.dataset.keysWaiting), badge: e.querySelector(".badge").textContent,
    text: e.textContent,
    figures: Object.fromEntries(q("[data-early-figure]", e).map((f) => [f.dataset.earlyFigure,
      f.textContent])),
    bars: Object.fromEntries(q("[data-early] .progress > span", e).map((b) => [
      b.closest("[data-early]").dataset.early, b.style.width])),
    sparks: q("canvas.spark", e).map((s) => s.title)};
};
return {
  empty: shown("empty"), previous: shown("previous"),
  banners: q("#banners .banner").map((b) => [b.dataset.kind, b.textContent]),
  services: Object.fromEntries(q(".service").map((s) => [s.dataset.service, s.dataset.ok])),
  current: card("day-current"), loading: card("day-loading"),
  cells: q("#buckets .cell").map((c) => ({b: Number(c.dataset.b), state: c.dataset.state,
    title: c.title, outlined: c.classList.contains("hot-demand"),
    shade: Number(c.style.getPropertyValue("--shade"))})),
  routes: Object.fromEntries(q("#answers-legend [data-route]").map((r) => [r.dataset.route,
    {total: Number(r.dataset.total), rate: Number(r.dataset.rate)}])),
  running: q("#running-jobs li").map((li) => li.textContent),
  failed: q("#failed-table tr[data-b]").map((r) => r.textContent),
  claims: q(".claims h3").map((h) => [h.dataset.claims, h.dataset.earlyAnswers, h.textContent]),
  claimRows: q(".claims-table tr[data-claim]").map((r) => q("td", r).map((td) => td.textContent)),
  rejects: q("#reject-table tr").slice(1).map((r) => q("td", r).map((td) => td.textContent)),
  followers: q("#followers li").map((li) => [li.dataset.state, li.textContent]),
  fresh: shown("fresh-section") === null ? null
    : document.getElementById("fresh-applied").textContent,
  problems: shown("problems-section") === null ? null
    : document.getElementById("problems-section").textContent,
};
"""

# Pixels of the chart in a route's colour (ui.js's ROUTES), to see the line was drawn.
CHART_PIXELS = """
const c = document.getElementById("answers-chart");
const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
const [r, g, b] = arguments[0];
let n = 0;
for (let i = 0; i < d.length; i += 4) {
  if (Math.abs(d[i] - r) < 8 && Math.abs(d[i + 1] - g) < 8 && Math.abs(d[i + 2] - b) < 8) n++;
}
return n;
"""
RAW_BLUE, IMMEDIATE_GREEN = (0x3b, 0x82, 0xf6), (0x22, 0xa0, 0x6b)
EARLY_FUCHSIA = (0xc0, 0x26, 0xd3)


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module, on a fresh profile."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium (pip, the dev extra)")
    if missing:
        message = f"no browser to test the page with: {', '.join(missing)} missing " \
                  "(scripts/setup.sh installs them)"
        unavailable(message)
    profile = tempfile.mkdtemp(prefix="debl-ui-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def page(driver) -> dict:
    return driver.execute_script(PAGE_STATE)


def wait_for(driver, what: str, check, timeout: float = WAIT_S) -> dict:
    """The page's state once *check(state)* holds; fails naming *what* and the last state."""
    deadline = time.monotonic() + timeout
    while True:
        state = page(driver)
        if check(state):
            return state
        if time.monotonic() > deadline:
            pytest.fail(f"the page never showed {what}; it showed {state}", pytrace=False)
        time.sleep(0.2)


def screenshot(driver, path: Path, variable: str = "UI_SCREENSHOT") -> None:
    """The whole page as a PNG at *path*, and where the environment's *variable* names a file,
    there too (docs/img/ui.png is made so: docs/UI.md)."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    # the window's size counts the browser's own bars, headless too: without them the page's
    # last part is cut off
    bars = driver.execute_script("return window.outerHeight - window.innerHeight")
    driver.set_window_size(1300, min(max(height + bars + 20, 600), 4000))
    driver.save_screenshot(str(path))
    if os.environ.get(variable):
        shutil.copyfile(path, os.environ[variable])
    driver.set_window_size(1300, 1000)


class Given:
    """A sampler or service watch that hands the page what the test gives it."""

    def __init__(self, value):
        self.value = value

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def snapshot(self):
        return self.value

    def marks(self):
        return self.value

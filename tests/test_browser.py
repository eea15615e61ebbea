"""What a learner sees: JupyterLab 4 in a real (headless) browser, offline.

Starts JupyterLab on 127.0.0.1 with a fresh token and its own config, runtime, settings and
workspace folders, serving a temporary folder; drives Debian's Chromium with Selenium; and
checks, as a learner would meet them (issue 15):

- notebook 04 opened as stored is not marked modified, shows the note that says what to
  run in place of the bertviz view, and no "Javascript Error";
- notebook 04's bertviz cells (tagged "browser-test"), run in the browser, draw the head
  view and the model view offline: SVG attention lines present, the note gone, no
  "Javascript Error", no console error;
- notebook 05's masking explorer (its tagged cells), run in the browser, redraws its
  picture when the seed slider moves.

Screenshots go to this test's temporary folder. The server it started is stopped by its
PID. Skipped, saying why, only where Chromium or chromedriver is not installed
(`apt-get install chromium chromium-driver`; .ci/run installs them).
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
TAG = "browser-test"
STORED = ("00", "03", "04", "05")  # opened as stored: the map of BERT, Chinese figures, bertviz, widgets
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs Chromium and chromedriver on PATH: apt-get install -y chromium chromium-driver",
)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tagged_notebook(source: Path, extra_cells: tuple[str, ...] = ()) -> nbformat.NotebookNode:
    """The cells of `source` tagged "browser-test", without outputs, plus `extra_cells`."""
    nb = nbformat.read(source, as_version=4)
    cells = [c for c in nb.cells if TAG in c.metadata.get("tags", [])]
    assert cells, f"no cell of {source.name} is tagged {TAG!r}"
    for cell in cells:
        cell.outputs, cell.execution_count = [], None
    nb.cells = cells + [nbformat.v4.new_code_cell(code) for code in extra_cells]
    return nb


def _served_folder(tmp: Path) -> Path:
    """The notebooks the tests open: stored copies, and live ones cut down to their tagged cells."""
    served = tmp / "served"
    served.mkdir()
    for number in STORED:
        shutil.copy(next(NOTEBOOKS.glob(f"{number}_*.ipynb")), served / f"stored_{number}.ipynb")
    nbformat.write(
        _tagged_notebook(
            NOTEBOOKS / "04_encoder.ipynb",
            ("bertviz_offline.model_view(viz_attention, tokens, sentence_b_start, include_layers=shown_layers)",),
        ),
        served / "bertviz_live.ipynb",
    )
    nbformat.write(_tagged_notebook(NOTEBOOKS / "05_pretraining_data.ipynb"), served / "explorer_live.ipynb")
    return served


def _lab_environment(tmp: Path) -> dict:
    """JupyterLab's settings and folders, all under tmp; the environment that points the server at them."""
    config = tmp / "config"
    (config / "labconfig").mkdir(parents=True)
    # No news feed or extension listing: both would reach for the network.
    disabled = {
        "@jupyterlab/apputils-extension:announcements": True,
        "@jupyterlab/extensionmanager-extension": True,
    }
    (config / "labconfig" / "page_config.json").write_text(json.dumps({"disabledExtensions": disabled}))
    # Every cell in the page (not only those scrolled into view), so the checks see every output.
    tracker = tmp / "settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))
    return dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(config),
        JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"),
        IPYTHONDIR=str(tmp / "ipython"),
        PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),  # the kernel's python
        BERTEDU_FIGURES_DIR=str(tmp / "figures"),
    )


def _wait_until_up(server: subprocess.Popen, base: str, token: str, log_path: Path) -> None:
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"JupyterLab did not start; its log: {log_path.read_text()[-2000:]}")
        time.sleep(0.5)


def _shut_down(server: subprocess.Popen, base: str, token: str) -> None:
    try:  # a clean shutdown also stops the kernels it started
        req = urllib.request.Request(f"{base}/api/shutdown", method="POST", headers={"Authorization": f"token {token}"})
        urllib.request.urlopen(req, timeout=5)
        server.wait(timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        if server.poll() is None:
            os.kill(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(server.pid, signal.SIGKILL)
                server.wait()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server of our own on 127.0.0.1: (base url with token, served folder, tmp folder)."""
    tmp = tmp_path_factory.mktemp("browser")
    served = _served_folder(tmp)
    env = _lab_environment(tmp)
    token, port = secrets.token_hex(24), _free_port()
    log = open(tmp / "jupyterlab.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={served}", "--ServerApp.port_retries=0",
         "--allow-root",  # CI runs as root
         "--LabApp.extension_manager=readonly",  # no package index queries
         # window.jupyterapp, in JupyterLab and in Notebook 7: run the menus' commands
         "--LabApp.expose_app_in_browser=True", "--JupyterNotebookApp.expose_app_in_browser=True"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=served,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(server, base, token, tmp / "jupyterlab.log")
        yield base, token, tmp
    finally:
        _shut_down(server, base, token)
        log.close()


@pytest.fixture(scope="module")
def browser(lab):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    _, _, tmp = lab
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1400,1000", f"--user-data-dir={tmp / 'chromium-profile'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # An explicit driver path: Selenium Manager would otherwise try to download one.
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_script_timeout(30)
    # A headless window with a fresh --user-data-dir never gets the focus in Chromium 150
    # (document.hasFocus() stays false; 156 gives it), and JupyterLab sets
    # shell.currentWidget and runs its notebook commands on the widget that last had the
    # focus. Emulated focus is what every Chromium gives a page that is in front.
    driver.execute_cdp_cmd("Emulation.setFocusEmulationEnabled", {"enabled": True})
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver, condition, timeout: float, what: str, screenshot: Path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    driver.save_screenshot(str(screenshot))
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what} (screenshot: {screenshot})")


_WORKSPACES = itertools.count()
# The open notebook panel titled arguments[0], or undefined.
_PANEL_JS = """
    const panel = window.jupyterapp ? [...window.jupyterapp.shell.widgets('main')].find(
        w => w.title.label === arguments[0] && w.sessionContext) : undefined;
"""


def _open(driver, lab, name: str, ui: str = "lab"):
    """Open a notebook in JupyterLab ("lab") or in Notebook 7 ("notebook"); wait for its kernel.

    In JupyterLab, in a new, empty workspace: the notebooks opened before are not restored
    beside it (each would render again, all its outputs, on every page load).
    """
    base, token, tmp = lab
    path = {"lab": f"lab/workspaces/test-{next(_WORKSPACES)}/tree", "notebook": "notebooks"}[ui]
    driver.get(f"{base}/{path}/{name}?token={token}")
    # The panel is found by its title among the main area's widgets, not as shell.currentWidget,
    # which depends on where the focus is; then it is made the current one, as a click on its tab would.
    js = _PANEL_JS + """
        const kernel = panel?.sessionContext?.session?.kernel;
        const ready = kernel?.connectionStatus === 'connected' && kernel?.status === 'idle';
        if (ready && window.jupyterapp.shell.currentWidget !== panel) window.jupyterapp.shell.activateById(panel.id);
        return ready && window.jupyterapp.shell.currentWidget === panel;
    """
    _wait(driver, lambda: driver.execute_script(js, name), 90, f"{name} open with a connected, idle kernel",
          tmp / f"{name}-open.png")


def _run_all(driver, lab, name: str):
    """What Run > Run All Cells does, then wait until every code cell has run."""
    driver.execute_script("return window.jupyterapp.commands.execute('notebook:run-all-cells')")
    js = _PANEL_JS + """
        const prompts = [...panel.node.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
        const idle = panel.sessionContext.session?.kernel?.status === 'idle';
        return idle && prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
    """
    _wait(driver, lambda: driver.execute_script(js, name), 120, f"every cell of {name} to run", lab[2] / f"{name}-run.png")


def _page_text(driver) -> str:
    return driver.execute_script("return document.body.innerText")


def _console_errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


@pytest.mark.parametrize("number", STORED)
def test_a_stored_notebook_opens_unmodified(lab, browser, number):
    name = f"stored_{number}.ipynb"
    _open(browser, lab, name)
    time.sleep(2)  # give the kernel's language_info and the widget manager a moment to touch the metadata
    dirty = browser.execute_script("return document.querySelectorAll('.lm-TabBar-tab.jp-mod-dirty').length")
    browser.save_screenshot(str(lab[2] / f"stored_{number}.png"))
    assert dirty == 0, f"opening notebook {number} marked it modified (kernelspec or other metadata rewritten)"
    assert "Javascript Error" not in _page_text(browser)


def test_the_map_of_bert_shows(lab, browser):
    """Notebook 00's pictures, the "you are here" map of BERT first, render as images in JupyterLab."""
    _open(browser, lab, "stored_00.ipynb")
    images = browser.execute_script("""
        return [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output img')]
            .map(img => ({done: img.complete, width: img.naturalWidth}));
    """)
    browser.save_screenshot(str(lab[2] / "stored_00_map.png"))
    assert len(images) >= 2, f"expected the map and the histogram, found {images}"
    assert all(i["done"] and i["width"] > 200 for i in images), f"an image did not render: {images}"


def test_stored_bertviz_view_says_what_to_run(lab, browser):
    _open(browser, lab, "stored_04.ipynb")
    # Untrusted until its cells run, the stored view runs no script: its note stands in for it.
    assert "draws when you run this cell" in _page_text(browser)
    browser.execute_script("document.querySelector('.bertedu-bertviz-note').scrollIntoView({block: 'start'})")
    browser.save_screenshot(str(lab[2] / "stored_04_bertviz.png"))


@pytest.mark.parametrize("ui", ["lab", "notebook"])
def test_bertviz_head_and_model_views_draw_offline(lab, browser, ui):
    _open(browser, lab, "bertviz_live.ipynb", ui)
    browser.get_log("browser")  # start the console record here
    _run_all(browser, lab, "bertviz_live.ipynb")
    count_lines = """
        return [...document.querySelectorAll('[id^="bertviz-"]')].map(view => ({
            lines: view.querySelectorAll('svg line').length,
            visible: [...view.querySelectorAll('svg line')].filter(l => +(l.getAttribute('stroke-opacity') ?? 1) > 0).length,
            note: view.querySelectorAll('.bertedu-bertviz-note').length,
        }));
    """
    views = _wait(browser, lambda: [v for v in browser.execute_script(count_lines) if v["lines"] > 0] or None,
                  30, "bertviz to draw attention lines", lab[2] / "bertviz-lines.png")
    views = browser.execute_script(count_lines)
    browser.execute_script("document.querySelector('[id^=\"bertviz-\"]').scrollIntoView()")
    browser.save_screenshot(str(lab[2] / f"bertviz_head_view_{ui}.png"))
    browser.execute_script("document.querySelectorAll('[id^=\"bertviz-\"]')[1]?.scrollIntoView()")
    browser.save_screenshot(str(lab[2] / f"bertviz_model_view_{ui}.png"))
    assert len(views) == 2, f"expected a head view and a model view, found {views}"
    for kind, view in zip(("head", "model"), views):
        assert view["lines"] > 100 and view["visible"] > 0, f"{kind} view drew no attention lines: {view}"
        assert view["note"] == 0, f"{kind} view still shows its 'run this cell' note: it never drew"
    assert "Javascript Error" not in _page_text(browser)
    errors = _console_errors(browser)
    assert not errors, f"console errors: {errors}"


def test_masking_explorer_redraws_when_the_slider_moves(lab, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _open(browser, lab, "explorer_live.ipynb")
    browser.get_log("browser")
    _run_all(browser, lab, "explorer_live.ipynb")
    picture = "return document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .widget-output img')?.src"
    before = _wait(browser, lambda: browser.execute_script(picture), 30, "the explorer's picture",
                   lab[2] / "explorer-start.png")
    browser.save_screenshot(str(lab[2] / "explorer_before.png"))
    handles = browser.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) .widget-slider .noUi-handle")
    assert len(handles) == 2, "expected the seed and probability sliders"
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'}); arguments[0].focus();", handles[0])
    handles[0].send_keys(Keys.ARROW_RIGHT)  # the seed slider, one step, as a learner's arrow key moves it
    _wait(browser, lambda: browser.execute_script(picture) not in (None, before), 30,
          "the picture to change after moving the seed slider", lab[2] / "explorer-after.png")
    browser.save_screenshot(str(lab[2] / "explorer_after.png"))
    readout = browser.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) .widget-readout")
    assert readout[0].text != "0", "the seed slider did not move"
    assert "Javascript Error" not in _page_text(browser)
    errors = _console_errors(browser)
    assert not errors, f"console errors: {errors}"

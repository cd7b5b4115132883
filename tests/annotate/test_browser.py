"""The labeling page in a real browser: headless Chromium (Debian's ``chromium`` and ``chromium-driver``)
driven by Selenium, against the app on uvicorn in a thread. Log in, rate a trace by keyboard, reload
mid-trace, finish, export; a ``<script>`` step is shown as text and does not run.

Nothing is downloaded: the driver and the browser are the installed ones (``/usr/bin/chromedriver``,
``/usr/bin/chromium`` or ``$PRMKIT_CHROMEDRIVER`` / ``$PRMKIT_CHROMIUM``). Skipped, saying so, where
they or Selenium are missing. With ``PRMKIT_ANNOTATE_SCREENSHOTS=FOLDER`` the labeling and admin pages
are saved there (``docs/img/annotate-*.png`` were made so).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed: pip install selenium")

from prmkit.annotate import Store, create_app, export_labels  # noqa: E402
from prmkit.trace import Problem, Step, Trace, read_traces  # noqa: E402

CHROMIUM = os.environ.get("PRMKIT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = os.environ.get("PRMKIT_CHROMEDRIVER") or shutil.which("chromedriver")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="no headless browser: install Debian's chromium and chromium-driver "
           "(apt-get install -y chromium chromium-driver) to run the browser tests")]

TRACES = [
    Trace("arith-17", Problem("Ann has 12 apples. She buys 3 bags of 4 apples and gives away 5. "
                              "How many apples does she have?", answer="19", id="p17"),
          [Step("She buys 3 * 4 = 12 apples."), Step("Now she has 12 + 12 = 24 apples."),
           Step("<script>window.pwned = 1</script> She gives away 5: 24 - 5 = 18 apples."),
           Step("The answer is 18.")], final_answer="18", outcome="incorrect"),
    Trace("arith-18", Problem("What is 6 * 7 - 2?", answer="40", id="p18"),
          [Step("6 * 7 = 42."), Step("42 - 2 = 40."), Step("The answer is 40.")],
          final_answer="40", outcome="correct"),
]


@pytest.fixture()
def server(tmp_path):
    """The app on a free loopback port: (base URL, store, ann's token)."""
    store = Store(tmp_path / "labels.sqlite")
    ids = store.add_traces(TRACES)
    store.set_queue([(i, 1, None) for i in ids], strategy="file order")
    _, token = store.add_user("ann", admin=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(create_app(store), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline, "the app did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", store, token
    srv.should_exit = True
    thread.join(10)


@pytest.fixture()
def browser():
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1000,860", "--disable-extensions", "--no-first-run"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


def wait(driver, condition, what: str, timeout: float = 15.0):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(lambda d: condition(d), message=what)


def value_of(driver, step: int) -> str | None:
    return driver.find_element("id", f"step-{step}").get_attribute("data-value")


def current(driver) -> int:
    return int(driver.find_element("css selector", "li.step.current").get_attribute("data-step"))


def press(driver, key: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys(key).perform()


def test_label_a_trace_by_keyboard_reload_and_export(server, browser, tmp_path):
    from selenium.webdriver.common.keys import Keys

    url, store, token = server
    browser.get(url + "/label/1")
    assert "Log in" in browser.page_source  # 401 shows the log-in form
    browser.get(url + "/login")
    browser.find_element("id", "token").send_keys(token)
    browser.find_element("id", "login").click()
    wait(browser, lambda d: d.current_url.endswith("/label/1"), "the first queued trace after log-in")
    assert current(browser) == 0

    # the <script> step is text on the page, and it did not run
    step2 = browser.find_element("css selector", "#step-2 .text").text
    assert step2.startswith("<script>window.pwned = 1</script>")
    assert browser.execute_script("return typeof window.pwned") == "undefined"

    press(browser, "3")  # step 0: +1
    wait(browser, lambda d: value_of(d, 0) == "1" and current(d) == 1, "step 0 rated +1, step 1 current")
    press(browser, "2")  # step 1: 0 (okay)
    wait(browser, lambda d: value_of(d, 1) == "0", "step 1 rated 0")
    assert [(r.step, r.value) for r in store.ratings()] == [(0, 1), (1, 0)]  # committed as made
    shots = os.environ.get("PRMKIT_ANNOTATE_SCREENSHOTS")

    browser.refresh()  # mid-trace: the ratings are kept, the first unrated step is current
    wait(browser, lambda d: value_of(d, 0) == "1" and value_of(d, 1) == "0" and current(d) == 2,
         "ratings kept after a reload")
    press(browser, Keys.ARROW_UP)
    assert current(browser) == 1
    press(browser, Keys.ARROW_DOWN)
    press(browser, "1")  # step 2: -1
    wait(browser, lambda d: value_of(d, 2) == "-1" and current(d) == 3, "step 2 rated -1")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(shots) / "annotate-label.png"))
    press(browser, "1")  # step 3: -1
    wait(browser, lambda d: value_of(d, 3) == "-1", "step 3 rated -1")
    press(browser, Keys.ENTER)  # every step rated: Enter finishes, the next trace comes
    wait(browser, lambda d: d.current_url.endswith("/label/2"), "the next trace after finishing")
    assert [a.done is not None for a in store.assignments()] == [True, False]

    # stop at the first wrong step: the steps after it stay unrated
    browser.find_element("id", "stop-first-wrong").click()
    press(browser, "3")
    wait(browser, lambda d: value_of(d, 0) == "1", "step 0 rated +1")
    press(browser, "1")
    wait(browser, lambda d: value_of(d, 1) == "-1", "step 1 rated -1")
    assert "skipped" in browser.find_element("id", "step-2").get_attribute("class")
    browser.find_element("id", "note").send_keys("42 - 2 = 40 is right; checking the stop mode")
    browser.find_element("id", "finish-button").click()
    wait(browser, lambda d: "Nothing to label" in d.page_source, "an empty queue after both traces")

    if shots:
        browser.get(url + "/admin")
        browser.save_screenshot(str(Path(shots) / "annotate-admin.png"))

    result = export_labels(store.path, tmp_path / "human.jsonl")
    assert (result.traces, result.labels) == (2, 6)
    first, second = read_traces(tmp_path / "human.jsonl")
    assert [[(lab.value, lab.labeler, lab.source) for lab in s.labels] for s in first.steps] == [
        [(1, "ann", "human")], [(0, "ann", "human")], [(-1, "ann", "human")], [(-1, "ann", "human")]]
    assert [s.label().value if s.labels else None for s in second.steps] == [1, -1, None]
    assert second.meta["annotate"]["ann"]["note"].startswith("42 - 2 = 40")
    assert all(lab.cost["seconds"] >= 0 for s in first.steps for lab in s.labels)

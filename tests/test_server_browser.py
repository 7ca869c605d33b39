"""The search page in a real browser: Debian's headless Chromium driven by Selenium,
against `cortex serve` started as a user would (the console script, a free loopback port).

The browser comes from scripts/setup-test-env.sh (the README's test command runs it);
nothing is downloaded here (the driver and the binary are given by path, and Selenium
Manager is told to stay offline). A missing browser fails these tests, with the fix.

With ``CORTEX_SCREENSHOTS=<dir>`` set, the main states are saved there as PNGs
(``python scripts/screenshots.py`` refreshes docs/screenshots/).
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import cortex
from tests.conftest import SAMPLE
from tests.procs import cortex_command, free_port, wait_until_serving

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SHOTS = os.environ.get("CORTEX_SCREENSHOTS")
XSS = '<img src=x onerror="document.title=\'pwned\'"> <script>document.title="pwned"</script>'

os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must never download

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[str]:
    """A database of the sample notes and two dated projects, served by `cortex serve`."""
    db = tmp_path_factory.mktemp("served") / "memories.db"
    with cortex.open(db, embedder=embedder) as engine:
        assert not engine.import_path(SAMPLE).errors
        topics = ["deploy pipeline", "auth token refresh", "database migration", "release train"]
        for day in range(12):
            for n, topic in enumerate(topics):
                engine.add(
                    f"Day {day + 1}: notes on the {topic}; step {n} of the alpha rollout.",
                    project="alpha" if (day + n) % 3 else "beta",
                    category="ops",
                    session=f"s-{day}",
                    created_at=datetime(2026, 10, day + 10, 9 + n, tzinfo=UTC),
                    source_path=f"notes/2026-10-{day + 10:02d}.md",
                )
        engine.add(f"Untrusted text {XSS} about the deploy", project="alpha")
    port = free_port()
    log = db.with_name("serve.log")
    with log.open("w") as err:
        proc = subprocess.Popen(
            [*cortex_command(), "--db", str(db), "serve", "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_until_serving(proc, base + "/api/health")
        except RuntimeError as exc:
            proc.kill()
            pytest.fail(f"cortex serve did not start ({exc}): {log.read_text()[-2000:]}")
        with urllib.request.urlopen(base + "/api/health", timeout=10) as r:
            assert json.load(r)["status"] == "ok"
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} missing: run scripts/setup-test-env.sh (the README's test "
            "command does) to install Debian's chromium and chromium-driver"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1200,1000",
        "--lang=en-US",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def wait(driver: WebDriver, check: Callable[[WebDriver], Any], timeout: float = 30) -> Any:
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(check)


def shot(driver: WebDriver, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SHOTS) / f"{name}.png"))


def cards(driver: WebDriver) -> list[WebElement]:
    return driver.find_elements(By.CSS_SELECTOR, "#results article.card")


def projects(driver: WebDriver) -> set[str]:
    """The projects shown on the cards ("" for a memory without one)."""
    return {
        "".join(p.text for p in c.find_elements(By.CSS_SELECTOR, ".project")) for c in cards(driver)
    }


def searched(driver: WebDriver, action: Callable[[], Any]) -> None:
    """Do `action` and wait until the page has rendered the search it started."""
    count = driver.find_element(By.TAG_NAME, "body").get_attribute("data-searches") or "0"
    action()
    wait(driver, lambda d: (d.find_element(By.TAG_NAME, "body").get_attribute("data-searches")
                            or "0") != count)  # fmt: skip


def run_search(driver: WebDriver, base: str, query: str, *, fresh: bool = True) -> None:
    """Load the page (fresh), type `query` into the search bar and wait for the answer."""
    if fresh:
        driver.get(base + "/")
        wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#f-project option")) > 1)
    box = driver.find_element(By.ID, "q")
    box.clear()
    box.send_keys(query)
    searched(driver, lambda: box.send_keys(Keys.ENTER))


def test_type_a_query_and_see_cards(served: str, browser: WebDriver) -> None:
    run_search(browser, served, "deploy pipeline")
    found = cards(browser)
    assert found, browser.find_element(By.ID, "status").text
    assert browser.find_element(By.ID, "status").text.startswith("Showing 1–")
    marks = browser.find_elements(By.CSS_SELECTOR, "#results .snippet mark")
    assert marks and all(m.text.lower().startswith(("deploy", "pipeline")) for m in marks)
    first = found[0]
    assert first.find_element(By.CSS_SELECTOR, ".when").text[:4] in ("2026", "undated")
    assert "score" in first.find_element(By.CSS_SELECTOR, ".score").text
    explain = first.find_element(By.CSS_SELECTOR, "button.link")
    panel = first.find_element(By.CSS_SELECTOR, "dl.explain")
    assert not panel.is_displayed()
    explain.click()
    assert panel.is_displayed() and explain.get_attribute("aria-expanded") == "true"
    assert "bm25" in panel.text or "keyword" in panel.text
    shot(browser, "search")
    # nothing failed to load and the page's CSP blocked nothing (both log as SEVERE)
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []
    # the recent search is offered back as a suggestion
    recent = browser.find_elements(By.CSS_SELECTOR, "#recent option")
    assert "deploy pipeline" in [o.get_attribute("value") for o in recent]


def test_memory_text_is_never_markup(served: str, browser: WebDriver) -> None:
    run_search(browser, served, "untrusted text")
    assert cards(browser)
    assert not browser.find_elements(By.CSS_SELECTOR, "#results img, #results script")
    assert "<img src=x" in browser.find_element(By.ID, "results").text
    assert browser.title != "pwned"


def test_filter_by_project_and_mode(served: str, browser: WebDriver) -> None:
    run_search(browser, served, "rollout notes")
    assert projects(browser) >= {"alpha", "beta"}
    project = Select(browser.find_element(By.ID, "f-project"))
    searched(browser, lambda: project.select_by_value("alpha"))
    assert projects(browser) == {"alpha"}
    mode = Select(browser.find_element(By.ID, "f-mode"))
    searched(browser, lambda: mode.select_by_value("keyword"))
    assert "(keyword search)" in browser.find_element(By.ID, "status").text
    shot(browser, "filtered")


def test_pages(served: str, browser: WebDriver) -> None:
    browser.get(served + "/")
    Select(browser.find_element(By.ID, "f-mode")).select_by_value("keyword")
    run_search(browser, served, "rollout", fresh=False)
    first = [c.get_attribute("data-id") for c in cards(browser)]
    assert len(first) == 10
    prev, nxt = browser.find_element(By.ID, "prev-page"), browser.find_element(By.ID, "next-page")
    assert not prev.is_enabled() and nxt.is_enabled()
    searched(browser, lambda: nxt.click())
    second = [c.get_attribute("data-id") for c in cards(browser)]
    assert second and not set(first) & set(second)
    assert browser.find_element(By.ID, "page-no").text == "Page 2"
    assert browser.find_element(By.ID, "status").text.startswith("Showing 11–")
    searched(browser, lambda: browser.find_element(By.ID, "prev-page").click())
    assert [c.get_attribute("data-id") for c in cards(browser)] == first


def test_context_navigation_and_thread(served: str, browser: WebDriver) -> None:
    run_search(browser, served, "database migration")
    card = next(c for c in cards(browser) if c.find_elements(By.CSS_SELECTOR, ".project"))
    context = card.find_element(By.CSS_SELECTOR, ".context")
    buttons = {b.text: b for b in card.find_elements(By.CSS_SELECTOR, ".actions button")}
    buttons["Next →"].click()
    wait(browser, lambda d: context.find_elements(By.CSS_SELECTOR, ".chunk, p.help:not(:empty)")
         and "Loading" not in context.text)  # fmt: skip
    assert context.is_displayed() and card.get_attribute("aria-expanded") == "true"
    assert context.find_elements(By.CSS_SELECTOR, ".chunk") or "Nothing after" in context.text
    buttons["← Previous"].click()
    wait(browser, lambda d: "Previous" in context.text or "Nothing before" in context.text)
    buttons["View thread"].click()
    wait(browser, lambda d: context.find_elements(By.CSS_SELECTOR, "ol.thread li"))
    items = context.find_elements(By.CSS_SELECTOR, "ol.thread li")
    assert len(items) >= 2 and context.find_elements(By.CSS_SELECTOR, "ol.thread li.here")
    assert context.find_element(By.TAG_NAME, "h4").text.startswith("Session s-")
    shot(browser, "context")


def test_timeline_narrows_the_range(served: str, browser: WebDriver) -> None:
    run_search(browser, served, "release train")
    bars = browser.find_elements(By.CSS_SELECTOR, "#bars button.bar")
    assert len(bars) >= 2
    label = bars[0].get_attribute("aria-label")
    day = label.split(":")[0]
    searched(browser, lambda: bars[0].click())
    assert browser.find_element(By.ID, "f-since").get_attribute("value") == day
    assert browser.find_element(By.ID, "f-until").get_attribute("value") == day
    dates = {c.find_element(By.CSS_SELECTOR, ".when").text[:10] for c in cards(browser)}
    assert dates == {day}
    shot(browser, "timeline")


def test_keyboard_first(served: str, browser: WebDriver) -> None:
    browser.get(served + "/")
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys("/")
    assert browser.switch_to.active_element.get_attribute("id") == "q"
    run_search(browser, served, "auth token refresh", fresh=False)
    box = browser.find_element(By.ID, "q")
    box.send_keys(Keys.ARROW_DOWN)
    found = cards(browser)
    assert browser.switch_to.active_element == found[0]
    browser.switch_to.active_element.send_keys(Keys.ARROW_DOWN)
    assert browser.switch_to.active_element == found[1]
    browser.switch_to.active_element.send_keys(Keys.ARROW_UP)
    assert browser.switch_to.active_element == found[0]
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    assert found[0].get_attribute("aria-expanded") == "true"
    assert found[0].find_element(By.CSS_SELECTOR, ".detail .content").is_displayed()
    outline = browser.execute_script(
        "return getComputedStyle(arguments[0]).outlineStyle", browser.switch_to.active_element
    )
    assert outline not in ("", "none"), "the focused card shows no focus ring"


def test_a_misspelling_offers_the_right_word(served: str, browser: WebDriver) -> None:
    run_search(browser, served, "rollout pipelne")
    offer = browser.find_elements(By.CSS_SELECTOR, "#suggestions button.suggestion")
    assert offer and offer[0].text == "rollout pipeline"
    searched(browser, offer[0].click)
    assert browser.find_element(By.ID, "q").get_attribute("value") == "rollout pipeline"
    assert cards(browser)
    assert not browser.find_element(By.ID, "suggestions").is_displayed()  # nothing to fix


def test_empty_and_error_states(served: str, browser: WebDriver) -> None:
    run_search(browser, served, "qwxzvplorgh")
    assert browser.find_element(By.CSS_SELECTOR, "#results .empty").is_displayed()
    assert browser.find_element(By.ID, "status").text == "No results."
    shot(browser, "empty")
    # a value the server refuses (a NUL byte in the category) shows its one-line message
    browser.execute_script("document.getElementById('f-category').value = 'a\\u0000b'")
    run_search(browser, served, "deploy", fresh=False)
    error = browser.find_element(By.ID, "error")
    wait(browser, lambda d: error.is_displayed())
    assert error.get_attribute("role") == "alert"
    assert "Search failed" in error.text and "NUL" in error.text
    assert not cards(browser)


def test_accessibility(served: str, browser: WebDriver) -> None:
    browser.get(served + "/")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#f-project option"))
    unlabelled = browser.execute_script(
        """
        return Array.from(document.querySelectorAll('input, select, textarea, button'))
          .filter((el) => el.offsetParent !== null || el.type === 'search')
          .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                          && !(el.tagName === 'BUTTON' && el.textContent.trim()))
          .map((el) => el.outerHTML);
        """
    )
    assert unlabelled == []
    assert len(browser.find_elements(By.TAG_NAME, "h1")) == 1
    assert browser.find_elements(By.CSS_SELECTOR, "main") and browser.find_elements(
        By.CSS_SELECTOR, "[role=search]"
    )
    assert browser.find_element(By.ID, "status").get_attribute("aria-live") == "polite"
    # Tab order follows the page: skip link, API link, search, button, then the filters
    browser.execute_script("document.querySelector('a.skip').focus()")
    order: list[str] = []
    for _ in range(18):  # a date input takes one stop per part (month, day, year)
        browser.switch_to.active_element.send_keys(Keys.TAB)
        active = browser.switch_to.active_element
        name = active.get_attribute("id") or active.text
        if not order or order[-1] != name:
            order.append(name)
    expected = ["q", "go", "f-time", "f-since", "f-until", "f-project", "f-category", "f-mode"]
    ids = [x for x in order if x in expected]
    assert ids == expected, order
    assert order.index("q") < order.index("go") < order.index("f-time")
    for element_id in ("q", "f-mode"):
        element = browser.find_element(By.ID, element_id)
        browser.execute_script("arguments[0].focus()", element)
        style = browser.execute_script(
            "const s = getComputedStyle(arguments[0]); return [s.outlineStyle, s.outlineWidth]",
            element,
        )
        assert style[0] != "none" and style[1] != "0px", (element_id, style)

"""The compliance console in a real headless browser (Debian's chromium, driven by
Selenium), over a store of one real forget and a few thousand synthetic requests
(benchmarks/bench_console.py): the list renders one row per request with the totals and
the ledger's verdict, filters and paging work, the detail view shows a request's
timeline, no memory content is on it, and other tokens are turned away. The screenshots
are docs/compliance.md's (docs/images/compliance-console-*.png)."""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from http_server import running_server

from benchmarks.bench_console import fill
from memory_ledger.access import TokenStore
from memory_ledger.config import Settings
from memory_ledger.times import now

pytestmark = pytest.mark.slow
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
if not (CHROMIUM and DRIVER):
    if os.environ.get("CI", "").lower() == "true":
        raise RuntimeError("CI needs Debian's chromium and chromium-driver (.ci/run installs them)")
    pytest.skip("chromium and chromedriver are not installed", allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import (  # noqa: E402
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

SECRET = "Zebra Crossing 77"
IMAGES = Path(__file__).resolve().parent.parent / "docs" / "images"
# Read at import: the autouse fixture clears MEMORY_LEDGER_* for each test.
UPDATE_DOCS = os.environ.get("MEMORY_LEDGER_UPDATE_DOCS") == "1"
SYNTHETIC = 3000


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    data_dir = tmp_path_factory.mktemp("page") / "data"
    with running_server(data_dir) as base:
        store = TokenStore(Settings.resolve(data_dir), now)
        made = {
            "eraser": store.create("acme/alice", "agent", ["forget"])[1],
            "auditor": store.create("acme", "compliance")[1],
            "other": store.create("beta", "compliance")[1],
        }
        store.close()
        headers = {"Authorization": f"Bearer {made['eraser']}"}
        written = httpx.post(f"{base}/v1/memories", headers=headers, json={
            "kind": "fact", "subject": "user", "predicate": "home_address", "value": SECRET,
            "origin": "explicit", "sensitivity": "personal",
            "provenance": {"writer": "agent", "written_at": datetime.now(UTC).isoformat(),
                           "session_id": "s1", "turn_id": "t1"},
        }).json()["memories"][0]["item_id"]  # fmt: skip
        scope = {"scope": {"kind": "item", "item_ids": [written]}}
        forgotten = httpx.post(f"{base}/v1/forget-requests", headers=headers, json=scope).json()
        made["request_id"] = forgotten["request_id"]
        fill(data_dir, SYNTHETIC)  # after the server opened the store: it resumes nothing
        made["data_dir"] = str(data_dir)
        yield base, made


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(str(DRIVER)))
    yield driver
    driver.quit()


def _open(browser: webdriver.Chrome, base: str, token: str) -> str:
    browser.get(f"{base}/compliance")
    browser.delete_all_cookies()  # a fresh session: the form, not the last token's page
    browser.get(f"{base}/compliance")
    field = browser.find_element(By.NAME, "token")
    field.send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(browser, 20).until(lambda _: _replaced(field))  # the answer
    return str(browser.page_source)


def _replaced(field: WebElement) -> bool:
    """The form's field is no longer in the page: the answer has loaded. Chromium may say
    so with its own inspector error instead of a stale element (seen on a loaded machine)."""
    try:
        field.is_enabled()
    except StaleElementReferenceException:
        return True
    except WebDriverException as exc:
        if "does not belong to the document" in str(exc):
            return True
        raise
    return False


def _rows(browser: webdriver.Chrome) -> list[list[str]]:
    """The list's rows as cell texts, once the script has filled it."""
    return [
        [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
        for row in browser.find_elements(By.CSS_SELECTOR, "#list tbody tr")
    ]


def _wait(browser: webdriver.Chrome, test: Callable[[], object]) -> None:
    def ready(_: object) -> bool:
        try:
            return bool(test())
        except (StaleElementReferenceException, IndexError):
            return False

    WebDriverWait(browser, 30).until(ready)


def _listed(browser: webdriver.Chrome) -> bool:
    rows = _rows(browser)
    return (
        bool(rows) and len(rows[0]) == 9 and "page" in browser.find_element(By.ID, "pageinfo").text
    )


def _shoot(browser: webdriver.Chrome, name: str) -> bytes:
    """Check a screenshot is a real page's; with MEMORY_LEDGER_UPDATE_DOCS=1, save it
    for docs/compliance.md (a test run leaves the checkout as it found it)."""
    shot = browser.get_screenshot_as_png()
    if UPDATE_DOCS:
        IMAGES.mkdir(parents=True, exist_ok=True)
        (IMAGES / f"compliance-console-{name}.png").write_bytes(shot)
    width, height = struct.unpack(">II", shot[16:24])  # the PNG header's size
    assert shot[:8] == b"\x89PNG\r\n\x1a\n" and width >= 800 and height >= 600
    assert len(shot) > 10_000  # a page with text and tables, not a blank canvas
    return shot


def _apply(browser: webdriver.Chrome, **fields: str) -> None:
    form = browser.find_element(By.ID, "filters")
    for name, value in fields.items():
        field = form.find_element(By.NAME, name)
        if field.tag_name == "select":
            Select(field).select_by_visible_text(value)
        else:
            field.clear()
            field.send_keys(value)
    before = browser.find_element(By.ID, "pageinfo")
    browser.execute_script("arguments[0].textContent = ''", before)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    _wait(browser, lambda: _listed(browser))


def test_the_console_lists_totals_and_the_ledger_without_content(
    site: tuple[str, dict[str, str]], browser: webdriver.Chrome
) -> None:
    base, made = site
    _open(browser, base, made["auditor"])
    _wait(browser, lambda: _listed(browser))
    _wait(browser, lambda: "intact" in browser.find_element(By.ID, "ledger").text)
    _wait(browser, lambda: "not available" in browser.find_element(By.ID, "head").text
          or "record this" in browser.find_element(By.ID, "head").text)  # fmt: skip
    rows = _rows(browser)
    assert len(rows) == 50 and all(len(r) == 9 for r in rows)  # one row per request
    assert all(r[1] == "acme" or r[1].startswith("acme/") for r in rows)
    totals = browser.find_element(By.ID, "totals").text
    assert "By status" in totals and "Overdue" in totals and "median" in totals
    assert "retention_expiry" in totals and "completed" in totals
    source = str(browser.page_source)
    assert SECRET not in source and "Zebra" not in source
    _shoot(browser, "list")


def test_filters_and_paging_work_in_the_browser(
    site: tuple[str, dict[str, str]], browser: webdriver.Chrome
) -> None:
    base, made = site
    _open(browser, base, made["auditor"])
    _wait(browser, lambda: _listed(browser))
    first = [r[0] for r in _rows(browser)]
    browser.find_element(By.ID, "next").click()
    _wait(browser, lambda: "page 2" in browser.find_element(By.ID, "pageinfo").text)
    second = [r[0] for r in _rows(browser)]
    assert len(second) == 50 and not set(first) & set(second)
    browser.find_element(By.ID, "prev").click()
    _wait(browser, lambda: "page 1" in browser.find_element(By.ID, "pageinfo").text)
    assert [r[0] for r in _rows(browser)] == first
    _apply(browser, status="partial", basis="user_request")
    rows = _rows(browser)
    assert rows and all(r[6] == "partial" and r[2] == "user_request" for r in rows)
    assert all(int(r[7].split("/")[0]) < int(r[7].split("/")[1]) for r in rows)
    total = browser.find_element(By.ID, "totals").text
    assert "partial:" in total and "completed:" not in total
    csv_link = browser.find_element(By.ID, "csv").get_attribute("href") or ""
    assert "status=partial" in csv_link and "basis=user_request" in csv_link
    _shoot(browser, "filtered")


def test_the_detail_view_shows_the_requests_timeline(
    site: tuple[str, dict[str, str]], browser: webdriver.Chrome
) -> None:
    base, made = site
    _open(browser, base, made["auditor"])
    _wait(browser, lambda: _listed(browser))
    _apply(browser, search=made["request_id"][:12])
    link = browser.find_element(By.LINK_TEXT, made["request_id"])
    link.click()
    _wait(browser, lambda: browser.find_element(By.ID, "detail").is_displayed())
    _wait(browser, lambda: browser.find_element(By.ID, "detail-id").text == made["request_id"])
    steps = browser.find_element(By.ID, "timeline").text
    assert "filed: basis user_request" in steps and "resolved: 1 target(s)" in steps
    assert "event_log: tombstoned ok" in steps and "key_store: key_bytes_gone ok" in steps
    assert "files: scan_scheduled ok" in steps and "status: completed" in steps
    pack = browser.find_element(By.ID, "pack").get_attribute("href") or ""
    assert pack.endswith(f"/compliance/requests/{made['request_id']}/pack")
    url = browser.find_element(By.ID, "pack-url").text
    assert url == f"/v1/audit/requests/{made['request_id']}/pack"
    source = str(browser.page_source)
    assert SECRET not in source and "Zebra" not in source
    _shoot(browser, "detail")


def test_the_head_wraps_with_a_copy_button_and_not_yet_says_when_the_scan_is_due(
    site: tuple[str, dict[str, str]], browser: webdriver.Chrome
) -> None:
    """Issue 35, item 18: the signed head was one raw JSON line off the page's edge, and
    a request not yet scanned said "not yet" without when."""
    base, made = site
    _open(browser, base, made["auditor"])
    _wait(browser, lambda: browser.find_element(By.ID, "head-json").is_displayed())
    pre = browser.find_element(By.ID, "head-json")
    head = json.loads(pre.text)  # the whole head, as the audit route signed it
    assert set(head) >= {"size", "root", "time", "key_id", "signature", "public_key"}
    inside = browser.execute_script(
        "const e = arguments[0], r = e.getBoundingClientRect();"
        "return [e.scrollWidth <= e.clientWidth, r.right <= window.innerWidth];",
        pre,
    )
    assert inside == [True, True]  # wrapped within its card, not past the window's edge
    browser.find_element(By.ID, "copy-head").click()
    _wait(browser, lambda: browser.find_element(By.ID, "copied").text)
    copied = browser.find_element(By.ID, "copied").text
    if copied != "copied":  # no clipboard in this browser: the head is selected instead
        assert "Ctrl+C" in copied
        assert browser.execute_script("return getSelection().toString()") == pre.text
    _apply(browser, search=made["request_id"][:12])
    row = next(r for r in _rows(browser) if r[0] == made["request_id"])
    assert row[6] == "completed" and row[8].startswith("not yet: "), row
    assert row[8] == "not yet: not scheduled" or " UTC" in row[8], row  # or when it is due
    cell = browser.find_elements(By.CSS_SELECTOR, "#list tbody tr td:nth-child(9)")[0]
    assert "verification-scan" in (cell.get_attribute("title") or "")
    table = browser.find_element(By.ID, "list")
    assert browser.execute_script(  # the longer cell wraps: the list stays in the window
        "return arguments[0].getBoundingClientRect().right <= window.innerWidth", table
    )


def test_a_ledger_that_no_longer_extends_the_kept_head_is_a_banner(
    site: tuple[str, dict[str, str]], browser: webdriver.Chrome
) -> None:
    """A head kept at a size the ledger no longer reaches (rolled back): the banner says
    so above everything else; without it, there is no banner."""
    base, made = site
    _open(browser, base, made["auditor"])
    _wait(browser, lambda: "intact" in browser.find_element(By.ID, "ledger").text)
    assert not browser.find_element(By.ID, "banner").is_displayed()
    heads = Path(made["data_dir"]) / "audit-heads.jsonl"
    kept = {"size": 10**9, "root": "ab" * 32, "time": "2026-12-01T00:00:00Z",
            "key_id": "0" * 32, "signature": "x"}  # fmt: skip
    heads.write_text(json.dumps(kept) + "\n")
    try:
        _open(browser, base, made["auditor"])
        _wait(browser, lambda: browser.find_element(By.ID, "banner").is_displayed())
        text = browser.find_element(By.ID, "banner").text
        assert "does not extend the last signed head" in text and "size 1000000000" in text
    finally:
        heads.unlink()


def test_other_tokens_are_turned_away(
    site: tuple[str, dict[str, str]], browser: webdriver.Chrome
) -> None:
    base, made = site
    assert "This page is for compliance tokens" in _open(browser, base, made["eraser"])
    assert "That token is not valid" in _open(browser, base, "mlt_" + "0" * 16 + "_" + "x" * 43)
    other = _open(browser, base, made["other"])  # another tenant's auditor
    assert "Forget requests" in other
    _wait(browser, lambda: _listed(browser))
    rows = _rows(browser)
    assert rows and all(r[1].startswith("beta/") for r in rows)
    assert made["request_id"] not in str(browser.page_source)
    # The API the script reads refuses an agent token outright.
    refused = httpx.get(f"{base}/compliance/api/requests",
                        headers={"Authorization": f"Bearer {made['eraser']}"})  # fmt: skip
    assert refused.status_code == 403

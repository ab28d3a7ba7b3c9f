"""The compliance page in a real headless browser (Debian's chromium, driven by
Selenium): it renders the requests, their receipts and the ledger's verdict for a
compliance token, holds no memory content, and turns other tokens away."""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from http_server import running_server

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
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

SECRET = "Zebra Crossing 77"


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
        yield base, made


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,900"):
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


def test_the_page_shows_requests_receipts_and_the_ledger_without_content(
    site: tuple[str, dict[str, str]], browser: webdriver.Chrome, tmp_path: Path
) -> None:
    base, made = site
    source = _open(browser, base, made["auditor"])
    assert made["request_id"] in source and "completed" in source
    assert "intact" in source and "event_log: tombstoned" in source
    assert SECRET not in source and "Zebra" not in source
    shot = browser.get_screenshot_as_png()
    (tmp_path / "compliance.png").write_bytes(shot)
    width, height = struct.unpack(">II", shot[16:24])  # the PNG header's size
    assert shot[:8] == b"\x89PNG\r\n\x1a\n" and width >= 800 and height >= 600
    assert len(shot) > 10_000  # a page with text and tables, not a blank canvas


def test_other_tokens_are_turned_away(
    site: tuple[str, dict[str, str]], browser: webdriver.Chrome
) -> None:
    base, made = site
    assert "This page is for compliance tokens" in _open(browser, base, made["eraser"])
    assert "That token is not valid" in _open(browser, base, "mlt_" + "0" * 16 + "_" + "x" * 43)
    other = _open(browser, base, made["other"])  # another tenant's auditor
    assert made["request_id"] not in other and "Forget requests" in other

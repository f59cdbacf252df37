"""The memory editor page driven in headless Chromium (Debian's ``chromium`` + ``chromium-driver``).

The server is real (uvicorn on a free 127.0.0.1 port, in a thread); the browser is real; the
memories are real backends on files in ``tmp_path``. Set ``OVOS_MEMORY_EDITOR_SCREENSHOTS`` to
a folder (``docs/img``) to save screenshots of the main views while the tests run.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the editor extra (fastapi, uvicorn) is not installed")
pytest.importorskip("selenium", reason="selenium is not installed (it is in the test extra)")

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

pytestmark = pytest.mark.skipif(
    not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)),
    reason="Debian's Chromium is not installed: apt-get install -y chromium chromium-driver",
)

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from ovos_memory_plugins.editor import EditorServer  # noqa: E402
from ovos_memory_plugins.testing import exchange  # noqa: E402

SCRIPT_NOTE = '<script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2"> likes <b>bold</b> tea'


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    profile = tempfile.mkdtemp(prefix="editor-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1100,820",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait(driver: WebDriver, condition: Callable[[WebDriver], Any], timeout: float = 30) -> Any:
    """Poll ``condition`` until it is truthy (selenium's wait)."""
    waiter = WebDriverWait(driver, timeout, poll_frequency=0.05, ignored_exceptions=[StaleElementReferenceException])
    return waiter.until(condition)


def open_page(driver: WebDriver, server: EditorServer) -> None:
    driver.get(server.url)
    wait(driver, lambda d: d.execute_script("return document.body.dataset.ready === '1'"))


def shot(driver: WebDriver, name: str) -> None:
    """Save a screenshot when OVOS_MEMORY_EDITOR_SCREENSHOTS names a folder."""
    folder = os.environ.get("OVOS_MEMORY_EDITOR_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / f"editor-{name}.png"))


def texts(driver: WebDriver, selector: str) -> list[str]:
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, selector)]


def item(driver: WebDriver, list_id: str, contains: str) -> WebElement:
    """The list item of ``#list_id`` whose text contains ``contains`` (waits for it)."""

    def find(d: WebDriver) -> WebElement | None:
        for li in d.find_elements(By.CSS_SELECTOR, f"#{list_id} > li"):
            if contains in li.text:
                return li
        return None

    found: WebElement = wait(driver, find)
    return found


def test_archive_search_view_delete_and_script_as_text(browser: WebDriver, tmp_path: Path) -> None:
    from ovos_memory_plugins.lexical import LexicalMemory

    with LexicalMemory({"root": str(tmp_path / "m")}) as memory:
        memory.update_history(exchange("my bike is a red Gazelle", "a red Gazelle, noted"), "kitchen")
        memory.update_history(exchange(f"remember: Ada {SCRIPT_NOTE}", "noted"), "kitchen")
        memory.update_history(exchange("my sister lives in Porto", "Porto is lovely"), "bedroom")
        with EditorServer(memory, title="Ada") as server:
            open_page(browser, server)
            assert browser.find_element(By.ID, "view-archive").is_displayed()
            assert browser.title == "Ada — memory"
            assert browser.find_element(By.ID, "title").text == "Ada: what the persona remembers"
            assert "LexicalMemory" not in browser.find_element(By.TAG_NAME, "header").text
            icon = browser.execute_script(
                "const r = await fetch(document.querySelector('link[rel=icon]').href);"
                " return [r.status, r.headers.get('content-type')];"
            )
            assert icon == [200, "image/svg+xml"]
            browser.find_element(By.ID, "search-go").click()
            wait(browser, lambda d: d.find_element(By.ID, "banner").is_displayed())
            assert browser.find_element(By.ID, "banner-text").text == "Type what to search for first."
            browser.find_element(By.ID, "search-q").send_keys("tea Ada")
            browser.find_element(By.ID, "search-go").click()
            hit = item(browser, "search-results", "likes")
            assert "<script>window.__pwned = 1</script>" in hit.text
            assert "<b>bold</b>" in hit.text
            assert (
                browser.find_elements(By.CSS_SELECTOR, "#search-results script, #search-results img, #search-results b")
                == []
            )
            assert browser.execute_script("return window.__pwned === undefined")

            browser.find_element(By.ID, "search-q").clear()
            browser.find_element(By.ID, "search-q").send_keys("Gazelle bike")
            browser.find_element(By.ID, "search-go").click()
            hit = item(browser, "search-results", "red Gazelle")
            shot(browser, "archive")
            hit.find_element(By.CSS_SELECTOR, "button.delete").click()
            wait(browser, lambda d: not any("red Gazelle" in t for t in texts(d, "#search-results > li")))
            assert memory.search("Gazelle bike") == []
            # one delete, one undo: the bar at the bottom puts it back
            wait(browser, lambda d: d.find_element(By.ID, "toast").is_displayed())
            assert "red Gazelle" in browser.find_element(By.ID, "toast-text").text
            shot(browser, "undo")
            browser.find_element(By.ID, "toast-undo").click()
            item(browser, "search-results", "red Gazelle")
            assert memory.search("Gazelle bike")[0].content.startswith("Q: my bike is a red Gazelle")

            session = item(browser, "sessions", "bedroom")
            session.find_element(By.CSS_SELECTOR, "button.view").click()
            wait(browser, lambda d: "my sister lives in Porto" in d.find_element(By.ID, "messages").text)
            shot(browser, "conversation")
            delete = item(browser, "sessions", "bedroom").find_element(By.CSS_SELECTOR, "button.delete")
            delete.click()  # the first click only asks
            wait(browser, lambda d: delete.text == "Delete it for good?")
            assert memory.search("sister Porto"), "one click on a session's delete deletes nothing"
            delete.click()
            wait(browser, lambda d: not any("bedroom" in t for t in texts(d, "#sessions > li")))
            assert memory.search("sister Porto") == [] and memory.get_history("bedroom") == []

            browser.find_element(By.ID, "forget-all").click()  # without typing the word
            wait(browser, lambda d: "type the word everything" in d.find_element(By.ID, "banner-text").text)
            assert memory.stats()["history_messages"] > 0
            browser.find_element(By.ID, "confirm-all").send_keys("everything")
            browser.find_element(By.ID, "forget-all").click()
            wait(browser, lambda d: texts(d, "#sessions > li") == ["No recorded conversations."])
            assert memory.stats()["history_messages"] == 0


def context_text(memory: Any, utterance: str = "what do you know about me", session: str = "kitchen") -> str:
    """The system part of the persona's next context, as one text."""
    return "\n".join(m.content for m in memory.build_conversation_context(utterance, session)[:-1])


def test_sticky_add_edit_filter_delete_reach_the_next_context(browser: WebDriver, tmp_path: Path) -> None:
    from ovos_memory_plugins.sticky import StickyMemory

    with StickyMemory({"root": str(tmp_path / "sticky"), "namespace": "ada"}) as memory:
        memory.remember("the spare key is under the blue flower pot", session_id="kitchen")
        with EditorServer(memory) as server:
            open_page(browser, server)
            assert browser.find_element(By.ID, "view-notes").is_displayed()
            assert browser.title == "namespace ada — memory"
            item(browser, "notes-list", "blue flower pot")
            assert browser.find_element(By.ID, "dream-box").is_displayed() is False
            assert browser.find_element(By.ID, "notes-raw").is_displayed() is False

            browser.find_element(By.ID, "note-add").click()
            wait(browser, lambda d: d.find_element(By.ID, "banner-text").text == "Type the note first, then press Add.")
            browser.find_element(By.ID, "note-new").send_keys("my locker code is 4471")
            browser.find_element(By.ID, "note-add").click()
            item(browser, "notes-list", "locker code is 4471")
            assert "locker code is 4471" in context_text(memory)

            li = item(browser, "notes-list", "locker code is 4471")
            li.find_element(By.CSS_SELECTOR, "button.edit").click()
            field = li.find_element(By.CSS_SELECTOR, "input.edit-text")
            field.clear()
            field.send_keys("my locker code is 5582")
            li.find_element(By.CSS_SELECTOR, "button.save").click()
            item(browser, "notes-list", "locker code is 5582")
            context = context_text(memory)
            assert "5582" in context and "4471" not in context

            browser.find_element(By.ID, "notes-q").send_keys("locker")
            # the edit kept the old text as a retired note, listed after the active ones
            wait(
                browser,
                lambda d: (
                    texts(d, "#notes-list > li:not([hidden]) .text")
                    == ["my locker code is 5582", "my locker code is 4471"]
                ),
            )
            assert "retired" in item(browser, "notes-list", "4471").get_attribute("class")
            shot(browser, "sticky")

            # deleted elsewhere meanwhile: the page says so in words and offers to reload
            gone = next(n for n in memory.list_notes() if "5582" in n.text)
            memory.forget(gone.id)
            item(browser, "notes-list", "5582").find_element(By.CSS_SELECTOR, "button.delete").click()
            wait(browser, lambda d: d.find_element(By.ID, "banner").is_displayed())
            assert browser.find_element(By.ID, "banner-text").text.startswith(
                "The notes changed since this page loaded them"
            )
            browser.find_element(By.ID, "banner-reload").click()
            wait(browser, lambda d: not any("5582" in t for t in texts(d, "#notes-list > li")))
            assert "locker" not in context_text(memory)
            assert [n.text for n in memory.list_notes()] == ["the spare key is under the blue flower pot"]


def notes_config(root: Path, store: str) -> dict[str, Any]:
    return {"root": str(root), "store": store, "archive": None, "auto_curate": False}


def test_notes_add_edit_search_retire_restore_delete_reach_the_next_context(browser: WebDriver, tmp_path: Path) -> None:
    from ovos_memory_plugins.notes import NotesMemory

    root = tmp_path / "notes"
    with NotesMemory(notes_config(root, "sqlite")) as memory, EditorServer(memory) as server:
        memory.remember("[2026-10] User's daughter is called Mia")
        memory.remember("[2026-10] User drinks green tea every morning")
        persona = NotesMemory(notes_config(root, "sqlite"))  # the running persona's own instance
        try:
            open_page(browser, server)
            assert browser.find_element(By.ID, "view-notes").is_displayed()
            item(browser, "notes-list", "daughter is called Mia")

            browser.find_element(By.ID, "note-new").send_keys("User's bike is a red Gazelle")
            browser.find_element(By.ID, "note-add").click()
            item(browser, "notes-list", "red Gazelle")
            assert "red Gazelle" in context_text(persona)

            li = item(browser, "notes-list", "red Gazelle")
            li.find_element(By.CSS_SELECTOR, "button.edit").click()
            field = li.find_element(By.CSS_SELECTOR, "input.edit-text")
            field.clear()
            field.send_keys("User's bike is a blue Gazelle")
            li.find_element(By.CSS_SELECTOR, "button.save").click()
            item(browser, "notes-list", "blue Gazelle")
            assert "blue Gazelle" in context_text(persona) and "red Gazelle" not in context_text(persona)

            browser.find_element(By.ID, "note-new").send_keys(SCRIPT_NOTE)
            browser.find_element(By.ID, "note-add").click()
            script_li = item(browser, "notes-list", "likes")
            assert "<script>window.__pwned = 1</script>" in script_li.text
            assert browser.find_elements(By.CSS_SELECTOR, "#notes-list script, #notes-list img, #notes-list b") == []
            assert browser.execute_script("return window.__pwned === undefined")
            shot(browser, "notes")

            browser.find_element(By.ID, "notes-q").send_keys("gazelle")
            wait(
                browser,
                lambda d: (
                    [t for t in texts(d, "#notes-list > li:not([hidden]) .text")]
                    == [
                        "User's bike is a blue Gazelle",
                        "User's bike is a red Gazelle",
                    ]
                ),
            )
            browser.find_element(By.ID, "notes-q").clear()
            browser.find_element(By.ID, "notes-q").send_keys(" ")

            item(browser, "notes-list", "green tea").find_element(By.CSS_SELECTOR, "button.retire").click()
            wait(browser, lambda d: "retired" in item(d, "notes-list", "green tea").get_attribute("class"))
            assert "green tea" not in context_text(persona)
            item(browser, "notes-list", "green tea").find_element(By.CSS_SELECTOR, "button.restore").click()
            wait(browser, lambda d: "retired" not in item(d, "notes-list", "green tea").get_attribute("class"))
            assert "green tea" in context_text(persona)

            item(browser, "notes-list", "daughter is called Mia").find_element(By.CSS_SELECTOR, "button.delete").click()
            wait(browser, lambda d: not any("Mia" in t for t in texts(d, "#notes-list > li")))
            assert "Mia" not in context_text(persona)
            browser.find_element(By.ID, "toast-undo").click()
            item(browser, "notes-list", "daughter is called Mia")
            assert "Mia" in context_text(persona)
            item(browser, "notes-list", "daughter is called Mia").find_element(By.CSS_SELECTOR, "button.delete").click()
            wait(browser, lambda d: not any("Mia" in t for t in texts(d, "#notes-list > li")))
            browser.find_element(By.ID, "toast-close").click()
            assert "Mia" not in context_text(persona)
            assert [n.text for n in memory.list_notes()] == [
                "User's bike is a blue Gazelle",
                SCRIPT_NOTE,
                "User drinks green tea every morning",  # a restored note goes to the end
            ]
        finally:
            persona.close()


def test_notes_file_changed_by_the_persona_asks_to_reload_and_dream_undo(browser: WebDriver, tmp_path: Path) -> None:
    from ovos_memory_plugins.fakes import ScriptedLLM
    from ovos_memory_plugins.notes import NotesMemory

    root = tmp_path / "notes"
    llm = ScriptedLLM()
    with NotesMemory(notes_config(root, "file"), llm=llm) as memory, EditorServer(memory) as server:
        memory.remember("[2026-10] User's daughter is called Mia")
        memory.remember("[2026-10] User's daughter Mia is seven")
        open_page(browser, server)
        item(browser, "notes-list", "Mia is seven")

        persona = NotesMemory(notes_config(root, "file"))
        try:
            persona.remember("User's sister lives in Porto")  # the persona writes MEMORY.md meanwhile
        finally:
            persona.close()
        browser.find_element(By.CSS_SELECTOR, "#notes-raw summary").click()
        box = browser.find_element(By.ID, "notes-body")
        box.send_keys("- User plays the cello\n")
        browser.find_element(By.ID, "notes-save").click()
        wait(browser, lambda d: d.find_element(By.ID, "banner").is_displayed())
        assert "changed since this page loaded" in browser.find_element(By.ID, "banner-text").text
        shot(browser, "conflict")
        assert "Porto" in (root / "MEMORY.md").read_text(encoding="utf-8")
        assert "cello" not in (root / "MEMORY.md").read_text(encoding="utf-8")
        browser.find_element(By.ID, "banner-reload").click()
        item(browser, "notes-list", "sister lives in Porto")
        assert "cello" not in (browser.find_element(By.ID, "notes-body").get_attribute("value") or "")
        assert "- User plays the cello" in browser.find_element(By.ID, "notes-draft-text").text
        browser.find_element(By.CSS_SELECTOR, "#notes-raw summary").click()

        llm.queue(
            json.dumps(
                {"notes": ["[2026-10] User's daughter is called Mia; Mia is seven", "User's sister lives in Porto"]}
            )
        )
        browser.execute_script("window.scrollTo(0, 0)")
        browser.find_element(By.ID, "dream").click()
        wait(browser, lambda d: "rewritten" in d.find_element(By.ID, "dream-status").text)
        assert "User's daughter Mia is seven" in browser.find_element(By.ID, "dream-before").text
        assert "User's daughter Mia is seven" not in browser.find_element(By.ID, "dream-after").text
        # the result is on screen without scrolling
        top, bottom = browser.execute_script(
            "const r = document.getElementById('dream-status').getBoundingClientRect(); return [r.top, r.bottom];"
        )
        assert top >= 0 and bottom <= browser.execute_script("return window.innerHeight")
        shot(browser, "dream")
        assert [n.text for n in memory.list_notes()] == [
            "User's daughter is called Mia; Mia is seven",
            "User's sister lives in Porto",
        ]
        browser.find_element(By.ID, "dream-undo").click()
        wait(browser, lambda d: not d.find_element(By.ID, "dream-result").is_displayed())
        assert [n.text for n in memory.list_notes()] == [
            "User's daughter is called Mia",
            "User's daughter Mia is seven",
            "User's sister lives in Porto",
        ]


def test_the_page_works_at_360_px(browser: WebDriver, tmp_path: Path) -> None:
    from ovos_memory_plugins.notes import NotesMemory

    size = browser.get_window_size()
    browser.set_window_size(360, 740)
    try:
        with (
            NotesMemory(notes_config(tmp_path / "notes", "file")) as memory,
            EditorServer(memory, title="Ada") as server,
        ):
            memory.remember("[2026-10] User's daughter is called Mia and she goes to the school by the river")
            memory.remember("[2026-10] User drinks green tea every morning")
            open_page(browser, server)
            li = item(browser, "notes-list", "daughter is called Mia")
            width = browser.execute_script("return document.documentElement.clientWidth")
            assert width <= 360
            assert li.find_element(By.CSS_SELECTOR, ".text").size["width"] >= 0.75 * width, "notes squeezed"
            assert browser.execute_script("return document.documentElement.scrollWidth") <= width, "sideways scroll"
            for button in li.find_elements(By.CSS_SELECTOR, "button"):
                assert button.is_displayed() and button.rect["x"] + button.rect["width"] <= width
            shot(browser, "narrow")
    finally:
        browser.set_window_size(size["width"], size["height"])

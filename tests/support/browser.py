"""Browser fixtures: Debian chromium driven by Playwright against the real web server.

Import them into a conftest.py that also provides ``web_url`` (the server to log in to)::

    from tests.support.browser import browser, collected_static, log_in  # noqa: F401

Each person gets a browser context of their own (own cookies), logged in through the login
form. Every console error and uncaught page error fails the test, except errors the test
announces with ``expect_error`` (a 409 page is logged by the browser as a failed resource).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    sync_playwright,
)

from tests.support.factories import DEMO_PASSWORD

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-gpu"]
VIEWPORT = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
ASYNC_UNSAFE = "DJANGO_ALLOW_ASYNC_UNSAFE"
SCREENSHOTS = Path(settings.BASE_DIR) / "docs" / "screenshots"


@dataclass
class Person:
    """One logged-in browser: its page and what its console reported."""

    username: str
    context: BrowserContext
    page: Page
    errors: list[str] = field(default_factory=list)
    expected: list[re.Pattern[str]] = field(default_factory=list)

    def expect_error(self, pattern: str) -> None:
        """Tolerate console errors matching ``pattern`` from now on (e.g. a 409 page)."""
        self.expected.append(re.compile(pattern))

    def record(self, text: str) -> None:
        # Browsers ask for /favicon.ico on their own; the console does not serve one.
        if "/favicon.ico" in text:
            return
        if not any(p.search(text) for p in self.expected):
            self.errors.append(text)

    def screenshot(self, name: str) -> Path:
        """A full-page PNG in docs/screenshots/ (overwritten on each run)."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / name
        self.page.screenshot(path=str(path), full_page=True, animations="disabled")
        return path


def console_text(message: ConsoleMessage) -> str:
    url = (message.location or {}).get("url", "")
    return f"{message.text} ({url})" if url else message.text


@pytest.fixture(scope="session")
def collected_static() -> None:
    """The web server serves collected files only (whitenoise without finders)."""
    call_command("collectstatic", interactive=False, verbosity=0)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (make deps)")
    # Playwright's sync API runs an event loop in this thread while it is started; the ORM
    # calls of the tests themselves (fixtures, checks) are still plain synchronous code.
    previous = os.environ.get(ASYNC_UNSAFE)
    os.environ[ASYNC_UNSAFE] = "true"
    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
    finally:
        playwright.stop()
        if previous is None:
            del os.environ[ASYNC_UNSAFE]
        else:
            os.environ[ASYNC_UNSAFE] = previous


@pytest.fixture
def log_in(browser: Browser, web_url: str) -> Iterator[Callable[..., Person]]:
    """``log_in(user)``: a new browser context, logged in through the login form; keyword
    arguments go to the context (``viewport=PHONE, is_mobile=True, device_scale_factor=2``)."""
    people: list[Person] = []

    def make(user: Any, **context_options: Any) -> Person:
        options = {"viewport": VIEWPORT, **context_options}
        context = browser.new_context(base_url=web_url, **options)
        context.set_default_timeout(15_000)
        page = context.new_page()
        person = Person(username=user.get_username(), context=context, page=page)
        page.on("console", lambda msg: msg.type == "error" and person.record(console_text(msg)))
        page.on("pageerror", lambda exc: person.record(f"uncaught: {exc}"))
        people.append(person)
        page.goto("/login/")
        page.fill("#id_username", person.username)
        page.fill("#id_password", DEMO_PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{web_url}/")
        assert page.locator(".account .who").inner_text() == person.username
        return person

    yield make
    for person in people:
        person.context.close()
    problems = {p.username: p.errors for p in people if p.errors}
    assert not problems, f"errors in the browser console: {problems}"


@contextmanager
def live_server_tab(base_url: str, *, username: str) -> Iterator[Page]:
    """A page logged in as ``username`` on pytest-django's live server (in this process, so
    Django's async check is lifted while Playwright's loop runs in this thread). Any console or
    page error fails the test when the block ends."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (make deps)")
    previous = os.environ.get(ASYNC_UNSAFE)
    os.environ[ASYNC_UNSAFE] = "true"
    errors: list[str] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(base_url=base_url, viewport=VIEWPORT)
            context.set_default_timeout(15_000)
            tab = context.new_page()
            tab.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
            tab.on("pageerror", lambda exc: errors.append(str(exc)))
            tab.goto("/login/")
            tab.fill("#id_username", username)
            tab.fill("#id_password", DEMO_PASSWORD)
            tab.get_by_role("button", name="Log in").click()
            tab.wait_for_url(f"{base_url}/")
            yield tab
            browser.close()
    finally:
        if previous is None:
            os.environ.pop(ASYNC_UNSAFE, None)
        else:
            os.environ[ASYNC_UNSAFE] = previous
    assert errors == [], f"errors in the browser console: {errors}"

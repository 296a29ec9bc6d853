"""Browser tests of the console: Debian chromium (tests/support/browser.py) against a real web
server and qcluster started for each test."""

from __future__ import annotations

import pytest

from tests.support.browser import ASYNC_UNSAFE, browser, collected_static, log_in  # noqa: F401
from tests.support.fixtures import ProcessSet, api_client_for, processes  # noqa: F401


@pytest.fixture
def web_url(processes: ProcessSet, collected_static: None) -> str:  # noqa: F811
    """The base URL of a real web server and a qcluster started for this test."""
    # The servers run no event loop: they keep Django's check (empty means unset).
    env = {ASYNC_UNSAFE: ""}
    web = processes.web(env=env)
    processes.worker(env=env)
    return web.base_url

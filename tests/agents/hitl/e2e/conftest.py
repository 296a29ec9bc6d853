"""The console's browser fixtures, with real processes that register the example agent only
through the CONSOLE_AGENTS setting."""

from __future__ import annotations

import json

import pytest

from tests.support.agents import HELPDESK_SETTING
from tests.support.browser import ASYNC_UNSAFE, browser, collected_static, log_in  # noqa: F401
from tests.support.fixtures import ProcessSet, api_client_for, processes  # noqa: F401


@pytest.fixture
def web_url(processes: ProcessSet, collected_static: None) -> str:  # noqa: F811
    """A web server and a qcluster that know the example agent only through the setting."""
    env = {ASYNC_UNSAFE: "", "CONSOLE_AGENTS": json.dumps(HELPDESK_SETTING)}
    web = processes.web(env=env)
    processes.worker(env=env)
    return web.base_url

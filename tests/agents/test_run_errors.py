"""A run's error: one line (type and message) for API readers and the run page; the traceback,
with its file paths and code, for admins only (issue 12, class 7)."""

from __future__ import annotations

import pytest

from approvals.models import AgentRun
from approvals.run_errors import error_summary
from tests.support.factories import RunFactory
from tests.support.people import client_for, person, rest_client_for

pytestmark = pytest.mark.django_db

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/console/agents/runtime/advance.py", line 88, in run_advance\n'
    "    graph.invoke(command, config)\n"
    "ValueError: the ledger refused key abc"
)
STORED = f"ValueError: the ledger refused key abc\n\n{TRACEBACK}"


@pytest.fixture
def dead_run(alice) -> AgentRun:
    return RunFactory(requested_by=alice, status=AgentRun.Status.DEAD, error=STORED)


def test_the_api_gives_a_run_error_as_one_line_without_the_traceback(dead_run, alice, admin):
    for reader in (alice, admin):
        error = rest_client_for(reader).get(f"/api/runs/{dead_run.pk}/").json()["error"]

        assert error == "ValueError: the ledger refused key abc"


def test_the_run_page_shows_its_reader_the_summary_and_an_admin_the_traceback(dead_run, alice):
    staff = person("sam", perms=["approvals.view_approvalrequest"])
    staff.is_staff = True
    staff.save()

    as_requester = client_for(alice).get(f"/runs/{dead_run.pk}/").content.decode()
    as_staff = client_for(staff).get(f"/runs/{dead_run.pk}/").content.decode()

    assert "ValueError: the ledger refused key abc" in as_requester
    assert "/srv/console" not in as_requester and "graph.invoke" not in as_requester
    assert "/srv/console/agents/runtime/advance.py" in as_staff


@pytest.mark.parametrize(
    ("stored", "summary"),
    [
        (STORED, "ValueError: the ledger refused key abc"),
        (TRACEBACK, "ValueError: the ledger refused key abc"),
        ("RateLimited: 429 from the provider", "RateLimited: 429 from the provider"),
        ("KeyError: 'a'\nsecond line\n\nTraceback (most recent call last):\n  x", "KeyError: 'a'"),
        ("", ""),
    ],
)
def test_the_summary_is_the_first_line_before_the_traceback_or_its_last_line(stored, summary):
    assert error_summary(stored) == summary


def test_a_long_message_is_cut_to_one_readable_line():
    assert len(error_summary("E: " + "x" * 5000)) == 300

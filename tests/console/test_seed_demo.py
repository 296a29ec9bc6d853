"""The demo people seed_demo creates can do what the README's table says, and the table lists
every one of them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import Client

from approvals.models import AgentRun, ApprovalRequest
from console.management.commands.seed_demo import PEOPLE
from tests.support.pages import PageApprovalFactory, PageRunFactory

README = Path(settings.BASE_DIR) / "README.md"


@pytest.fixture
def seeded(db) -> dict[str, User]:
    # As on a database where the compliance group lost its permission (or was never made by
    # the post_migrate hook): seeding alone must give frank his rights.
    Group.objects.filter(name="compliance").delete()
    call_command("seed_demo", verbosity=0)
    return {u.username: u for u in User.objects.filter(username__in=[p.username for p in PEOPLE])}


@pytest.fixture
def waiting(seeded) -> tuple[AgentRun, ApprovalRequest]:
    """Alice's run waiting on a "write" approval."""
    run = PageRunFactory(requested_by=seeded["alice"])
    return run, PageApprovalFactory(run=run)


def _as(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _status(user: User, url: str) -> int:
    return _as(user).get(url).status_code


def test_frank_reads_every_run_approval_the_audit_trail_and_its_exports(seeded, waiting):
    run, approval = waiting
    frank = seeded["frank"]

    assert str(run.pk)[:8] in _as(frank).get("/runs/").content.decode()
    assert _status(frank, f"/runs/{run.pk}/") == 200
    assert _status(frank, f"/approvals/{approval.pk}/") == 200
    for url in (
        "/audit/",
        "/audit/verify/",
        "/audit/exports/",
        "/api/audit/export.jsonl",
        "/api/audit/export.csv",
    ):
        assert _status(frank, url) == 200, url
    # Read-only: he may not decide (the page offers no decision) and sees no metrics.
    html = _as(frank).get(f"/approvals/{approval.pk}/").content.decode()
    assert 'id="decide-approve"' not in html
    assert _status(frank, "/metrics/") == 403


def test_the_other_demo_people_have_exactly_their_rights(seeded, waiting):
    run, approval = waiting
    page = f"/approvals/{approval.pk}/"

    assert _status(seeded["alice"], page) == 200  # her own run
    assert _status(seeded["bob"], page) == 200  # a write approval he may decide
    assert 'id="decide-approve"' in _as(seeded["bob"]).get(page).content.decode()
    assert 'id="decide-approve"' in _as(seeded["carol"]).get(page).content.decode()
    assert _status(seeded["dave"], page) == 404
    assert _status(seeded["erin"], page) == 404
    assert _status(seeded["erin"], "/metrics/") == 200
    for name in ("alice", "bob", "carol", "dave", "erin"):
        assert _status(seeded[name], "/audit/") == 403, name
    assert _status(seeded["admin"], "/admin/") == 200
    assert _status(seeded["admin"], "/ops/") == 200


def test_the_readme_lists_every_demo_person():
    text = README.read_text()
    table = text[text.index("| user |") : text.index("\n\n", text.index("| user |"))]

    listed = re.findall(r"^\| `([a-z]+)` \|", table, flags=re.MULTILINE)

    assert listed == [p.username for p in PEOPLE]


def test_the_nav_offers_the_audit_trail_only_to_those_who_may_read_it(seeded):
    link = 'href="/audit/"'

    assert link in _as(seeded["frank"]).get("/").content.decode()
    assert link in _as(seeded["admin"]).get("/").content.decode()
    assert link not in _as(seeded["bob"]).get("/").content.decode()  # it would answer 403

"""Prometheus /metrics: the values after a scripted run, who may scrape, what a scrape costs,
and the multiprocess directory that adds up the web and worker processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from agents.runtime import advance
from agents.services import run_start
from approvals.services import approval_decide, policy_seed_demo
from core.prometheus import exposition
from tests.support.factories import RunFactory
from tests.support.queue import NOTIFICATION_MODULES, RUNNER_MODULES

ROOT = Path(__file__).resolve().parents[2]
INCIDENT = {"service": "checkout", "signal": "5xx above 5%", "severity": "sev3"}


@pytest.fixture
def queue_modules():
    return (*RUNNER_MODULES, *NOTIFICATION_MODULES)


def scrape(client: Client | None = None, **extra) -> str:
    response = (client or Client()).get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return response.content.decode()


def value(text: str, name: str, **labels: str) -> float:
    """The sample ``name{labels}`` of an exposition (0 when absent)."""
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = re.match(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$", line)
        if not match or match.group(1) != name:
            continue
        found = ",".join(sorted(re.findall(r'\w+="[^"]*"', match.group(2) or "")))
        if found == wanted:
            return float(match.group(3))
    return 0.0


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("queued")
def test_metrics_after_a_scripted_run_count_runs_pending_and_decision_latency(alice, bob):
    policy_seed_demo()
    bob.groups.add(Group.objects.get(name="approvers-write"))
    # Differences from a first scrape: on SQLite a flush between transactional tests deletes
    # the runs row by row, and their triggers leave the -1 deltas behind.
    before = scrape()

    def grew(text: str, name: str, **labels: str) -> float:
        return value(text, name, **labels) - value(before, name, **labels)

    run = run_start(agent="incident_copilot", input=INCIDENT, user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    approval = run.approvals.get()
    waiting = scrape()
    assert grew(waiting, "console_runs", status="waiting") == 1
    assert grew(waiting, "console_approvals_pending", tier=approval.tier) == 1
    assert value(waiting, "console_approvals_oldest_pending_age_seconds", tier=approval.tier) >= 0
    assert f'console_approvals_oldest_pending_age_seconds{{tier="{approval.tier}"}}' in waiting

    approval_decide(
        approval=approval, user=bob, decision="approve", seen_hash=approval.payload_hash
    )
    assert advance.run_advance(run_id=run.id) == "completed"
    after = scrape()
    assert grew(after, "console_runs", status="completed") == 1
    assert grew(after, "console_runs", status="waiting") == 0
    assert grew(after, "console_approvals_pending", tier=approval.tier) == 0
    latency = "console_decision_latency_seconds_count"
    labels = {"tier": approval.tier, "decision": "approve"}
    assert value(after, latency, **labels) == value(before, latency, **labels) + 1
    duration = "console_advance_duration_seconds_count"
    for outcome in ("waiting", "completed"):
        assert (
            value(after, duration, outcome=outcome) == value(before, duration, outcome=outcome) + 1
        )
    assert "\nconsole_runs_dead " in after and grew(after, "console_runs_dead") == 0
    for name in ("console_effects_in_doubt", "console_notifications_failed"):
        assert f"\n{name} 0.0\n" in after
    for kind in ("orphaned_interrupt", "run_past_deadline", "queue_too_old"):
        assert value(after, "console_stuck", kind=kind) == 0
        assert f'console_stuck{{kind="{kind}"}} 0.0' in after


@pytest.mark.django_db
def test_a_scrape_costs_the_same_queries_for_one_run_or_many(alice):
    RunFactory(requested_by=alice)
    with CaptureQueriesContext(connection) as few:
        first = scrape()
    for _ in range(30):
        RunFactory(requested_by=alice)
    with CaptureQueriesContext(connection) as many:
        text = scrape()
    grew = value(text, "console_runs", status="waiting") - value(
        first, "console_runs", status="waiting"
    )
    assert grew == 30
    assert len(many) == len(few) <= 10


@pytest.mark.django_db
def test_a_client_outside_the_allowed_networks_gets_403_and_no_data():
    response = Client(REMOTE_ADDR="10.1.2.3").get("/metrics")
    assert response.status_code == 403
    assert b"console_" not in response.content


@pytest.mark.django_db
def test_the_allowed_networks_setting_opens_it_to_a_network(settings):
    import ipaddress

    settings.METRICS_ALLOWED_NETWORKS = (ipaddress.ip_network("10.0.0.0/8"),)
    assert "console_runs" in scrape(Client(REMOTE_ADDR="10.1.2.3"))
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 403


@pytest.mark.django_db
def test_the_token_opens_it_from_anywhere_and_a_wrong_token_gets_401(settings):
    settings.METRICS_TOKEN = "s3cret-token"
    outside = Client(REMOTE_ADDR="10.1.2.3")
    assert "console_runs" in scrape(outside, HTTP_AUTHORIZATION="Bearer s3cret-token")
    for header in ("Bearer wrong", "Bearer s3cret-token-and-more", "Basic czNjcmV0"):
        response = outside.get("/metrics", HTTP_AUTHORIZATION=header)
        assert response.status_code == 401, header
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert b"console_" not in response.content
    # A wrong token is refused even from loopback; no token from outside asks for one.
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert outside.get("/metrics").status_code == 401


def test_a_bad_allowed_network_stops_start_up_naming_the_variable():
    env = {**os.environ, "METRICS_ALLOWED_NETWORKS": "10.0.0.0/8,not-a-network"}
    env["DJANGO_SETTINGS_MODULE"] = "console.settings"
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "METRICS_ALLOWED_NETWORKS" in result.stderr.splitlines()[-1]


OBSERVE = """
from core.prometheus import advance_observe, decision_observe, notification_failure_count
decision_observe(tier="write", decision="approve", seconds=42)
advance_observe(outcome="waiting", seconds=0.2)
notification_failure_count(channel="webhook", final=False)
"""


def test_the_multiprocess_directory_adds_up_every_process(tmp_path):
    """Two processes (a web worker and a qcluster worker, say) observe; one scrape sums them."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for _ in range(2):
        subprocess.run([sys.executable, "-c", OBSERVE], cwd=ROOT, env=env, check=True, timeout=60)
    assert len(list(tmp_path.glob("*.db"))) >= 2
    text = exposition(path=str(tmp_path)).decode()
    labels = {"tier": "write", "decision": "approve"}
    assert value(text, "console_decision_latency_seconds_count", **labels) == 2
    assert value(text, "console_decision_latency_seconds_sum", **labels) == 84
    assert value(text, "console_advance_duration_seconds_count", outcome="waiting") == 2
    assert (
        value(text, "console_notification_failures_total", channel="webhook", outcome="retry") == 2
    )

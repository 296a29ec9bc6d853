"""Prometheus /metrics from a real gunicorn and qcluster sharing PROMETHEUS_MULTIPROC_DIR, as
`manage.py serve` runs them: a decision observed in a web worker and the advances observed in
the qcluster's workers are added up by one scrape of the web server."""

from __future__ import annotations

import httpx
import pytest

from tests.console.test_prometheus import value
from tests.support.runs import (
    approval_approve,
    is_completed,
    is_waiting_for_a_person,
    pending_approvals,
    run_start,
    run_wait,
)

pytestmark = [pytest.mark.durability, pytest.mark.django_db(transaction=True)]

INCIDENT = {"service": "payments", "signal": "error rate 12%", "severity": "sev3"}


def test_one_scrape_adds_up_the_web_and_worker_processes(
    processes, api_client_for, alice, bob, tmp_path
):
    shared = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    web = processes.web(env=shared)
    processes.worker(env=shared)
    alice_api = api_client_for(alice)
    run = run_start(alice_api, agent="incident_copilot", input=INCIDENT)
    waiting = run_wait(
        alice_api,
        run["id"],
        until=is_waiting_for_a_person,
        what="a pending approval",
        timeout=60,
        processes=processes.all,
    )
    [approval] = pending_approvals(waiting)
    approval_approve(api_client_for(bob), approval)
    run_wait(
        alice_api,
        run["id"],
        until=is_completed,
        what="completion",
        timeout=60,
        processes=processes.all,
    )
    text = httpx.get(f"{web.base_url}/metrics", timeout=10).text
    labels = {"tier": approval["tier"], "decision": "approve"}
    assert value(text, "console_decision_latency_seconds_count", **labels) == 1  # the web
    assert value(text, "console_advance_duration_seconds_count", outcome="waiting") >= 1
    assert value(text, "console_advance_duration_seconds_count", outcome="completed") == 1
    assert any(path.name.startswith("histogram_") for path in tmp_path.iterdir())

"""Traces from the real processes: a web server and a qcluster (whose workers fork from it)
export over OTLP/HTTP to the configured endpoint, here a fake collector. A demo run started,
approved and completed through the API leaves its segments, tool calls and wait there."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.processes import poll_until
from tests.support.runs import (
    approval_approve,
    is_completed,
    is_waiting_for_a_person,
    pending_approvals,
    run_start,
    run_wait,
)
from tests.support.traces import Collector, collector_running, otlp_attributes

pytestmark = [pytest.mark.durability, pytest.mark.django_db(transaction=True)]

INCIDENT = {"service": "payments", "signal": "error rate 12%", "severity": "sev3"}


@pytest.fixture
def collector() -> Iterator[Collector]:
    with collector_running() as receiver:
        yield receiver


def test_a_run_through_the_api_and_a_worker_leaves_its_spans_at_the_collector(
    processes, api_client_for, alice, bob, collector
):
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_SERVICE_NAME": "console-under-test",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }
    processes.web(env=env)
    processes.worker(env=env)
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

    def of_the_run() -> dict[str, list] | None:
        found: dict[str, list] = {}
        for _, span in collector.spans():
            attributes = otlp_attributes(span)
            if attributes.get("run.id") == run["id"]:
                found.setdefault(span.name, []).append((span, attributes))
        done = len(found.get("run.segment", [])) >= 2 and found.get("approval.wait")
        return found if done else None

    found = poll_until(of_the_run, timeout=30, what="the run's spans at the collector")
    services = {resource["service.name"] for resource, _ in collector.spans()}
    assert services == {"console-under-test"}

    segments = sorted(found["run.segment"], key=lambda item: item[0].start_time_unix_nano)
    assert [a["run.outcome"] for _, a in segments[-2:]] == ["waiting", "completed"]
    assert {a["thread.id"] for _, a in segments} == {run["id"]}
    assert segments[-1][1]["resume_count"] == 1
    assert segments[-1][0].links[0].span_id == segments[-2][0].span_id
    [(wait, attributes)] = found["approval.wait"]
    # bob decides by the approvals.decide permission here (no demo policy, so no groups).
    assert attributes["approver.role"] == "approver"
    assert attributes["approval.decision"] == "approve"
    assert attributes["slo.exclude"] is True
    assert {a["tool.outcome"] for _, a in found["tool.call"]} == {"succeeded"}
    # The requests, from the web server's Django instrumentation.
    routes = {span.name for _, span in collector.spans() if span.kind == span.SPAN_KIND_SERVER}
    assert "POST api/runs/" in routes

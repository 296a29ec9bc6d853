"""Who may read /metrics and /readyz's reasons, attacked: a proxy on the same host when
TRUSTED_PROXY_COUNT is 0 (every client then looks like loopback), forged X-Forwarded-For
entries, IPv4 clients of a dual-stack socket (``::ffff:a.b.c.d``)."""

from __future__ import annotations

import ipaddress

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_a_request_relayed_by_a_local_proxy_is_refused_when_no_proxy_is_trusted(settings):
    # TRUSTED_PROXY_COUNT=0 (the default) behind nginx on the same host: REMOTE_ADDR is the
    # proxy's loopback address whoever the client is; the header says it was relayed.
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 0}
    via_proxy = Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.7")

    response = via_proxy.get("/metrics")
    assert response.status_code == 403
    assert b"console_" not in response.content
    body = via_proxy.get("/readyz").json()
    assert all(set(check) == {"ok"} for check in body["checks"].values()), body


def test_a_forged_forwarded_for_does_not_open_metrics_behind_one_trusted_proxy(settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    # The client forges "127.0.0.1"; the proxy appends the address it really saw.
    forged = Client(REMOTE_ADDR="10.9.9.9", HTTP_X_FORWARDED_FOR="127.0.0.1, 203.0.113.7")

    assert forged.get("/metrics").status_code == 403


def test_the_token_still_opens_metrics_through_a_proxy(settings):
    settings.METRICS_TOKEN = "s3cret-token"
    via_proxy = Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.7")

    response = via_proxy.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token")
    assert response.status_code == 200
    assert b"console_runs" in response.content


def test_an_ipv4_client_of_a_dual_stack_socket_is_matched_against_its_ipv4_network(settings):
    settings.METRICS_ALLOWED_NETWORKS = (ipaddress.ip_network("10.0.0.0/8"),)

    assert Client(REMOTE_ADDR="::ffff:10.1.2.3").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="::ffff:192.0.2.1").get("/metrics").status_code == 403


def test_a_scrape_while_the_database_is_down_still_answers_with_the_process_counters(
    monkeypatch,
):
    from django.db import OperationalError, connections

    from core.prometheus import notification_failure_count

    notification_failure_count(channel="webhook", final=False)  # kept in this process

    def unreachable(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(connections["default"], "cursor", unreachable)
    response = Client().get("/metrics")

    assert response.status_code == 200
    text = response.content.decode()
    assert "console_database_up 0.0" in text
    assert "console_notification_failures_total{" in text
    assert "console_runs{" not in text  # no gauge pretends to be 0


def test_a_scrape_says_the_database_is_up_when_it_is():
    text = Client().get("/metrics").content.decode()

    assert "console_database_up 1.0" in text

"""Probe agents: registered so the API and the pages accept them, never built.

tests/conftest.py loads this module as a plugin. Two probes, because their tests pin different
input shapes:

| fixture | agent | version | input |
| --- | --- | --- | --- |
| ``api_probe`` | ``api_probe`` | 7 | service, signal, severity sev1-sev4 (the incident copilot's) |
| ``page_probe`` | ``console_probe`` | 3 | service, severity sev1-sev3 |

``ProbeRunFactory`` and ``ProbeApprovalFactory`` are the shared factories with the API tests'
defaults: a waiting ``api_probe`` run and a pending "write" approval of ``refund_issue`` that
expires in an hour.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import factory
import pytest
from pydantic import BaseModel

from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from tests.support.factories import ApprovalFactory, RunFactory

API_PROBE = "api_probe"
PAGE_PROBE = "console_probe"
API_PROBE_INPUT: dict[str, Any] = {"service": "checkout", "signal": "5xx spike", "severity": "sev2"}


class ApiProbeInput(BaseModel):
    """Same shape as the incident copilot's input."""

    service: str
    signal: str
    severity: Literal["sev1", "sev2", "sev3", "sev4"]


class PageProbeInput(BaseModel):
    service: str
    severity: Literal["sev1", "sev2", "sev3"]


def _never_built(**kwargs: Any) -> Any:
    raise AssertionError("a probe agent is never built: its tests never run a graph")


@contextmanager
def probe_registered(spec: AgentSpec) -> Iterator[AgentSpec]:
    """Register ``spec`` for the duration of the block."""
    registered = agent_register(spec)
    try:
        yield registered
    finally:
        agent_unregister(spec.name)


@pytest.fixture
def api_probe() -> Iterator[AgentSpec]:
    """The API tests' probe: ``api_probe`` version 7."""
    spec = AgentSpec(
        name=API_PROBE,
        version="7",
        factory=_never_built,
        description="Triage probe used by the API tests.",
        input_model=ApiProbeInput,
        example_input=dict(API_PROBE_INPUT),
    )
    with probe_registered(spec) as registered:
        yield registered


@pytest.fixture
def page_probe() -> Iterator[AgentSpec]:
    """The page tests' probe: ``console_probe`` version 3."""
    spec = AgentSpec(
        name=PAGE_PROBE,
        version="3",
        factory=_never_built,
        description="Probe agent of the console tests.",
        input_model=PageProbeInput,
        example_input={"service": "checkout", "severity": "sev2"},
    )
    with probe_registered(spec) as registered:
        yield registered


class ProbeRunFactory(RunFactory):
    """A waiting ``api_probe`` run (graph version "7") with the probe's example input."""

    agent = API_PROBE
    graph_version = "7"
    input = factory.LazyFunction(lambda: dict(API_PROBE_INPUT))


class ProbeApprovalFactory(ApprovalFactory):
    """A pending "write" approval of ``refund_issue`` on a probe run, expiring in an hour."""

    class Params:
        expires_in = dt.timedelta(hours=1)

    run = factory.SubFactory(ProbeRunFactory)
    tool = "refund_issue"
    args = factory.LazyFunction(lambda: {"order_id": "A-100", "amount": 120})

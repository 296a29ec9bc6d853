"""Reading runs and deciding approvals over the real API, with patient polling."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tests.support.processes import ApiClient, ManagedProcess, logs_section, poll_until

TERMINAL = frozenset({"completed", "failed", "cancelled", "dead"})


def run_start(api: ApiClient, *, agent: str, input: dict[str, Any]) -> dict[str, Any]:
    return api.post("/api/runs/", {"agent": agent, "input": input}, expect=201)


def run_get(api: ApiClient, run_id: str) -> dict[str, Any]:
    return api.get(f"/api/runs/{run_id}/")


def run_wait(
    api: ApiClient,
    run_id: str,
    *,
    until: Callable[[dict[str, Any]], bool],
    what: str,
    timeout: float,
    processes: Iterable[ManagedProcess] = (),
) -> dict[str, Any]:
    """Poll the run until ``until(run)``; fail at once if it ends in another terminal state."""
    procs = list(processes)
    seen: dict[str, Any] = {}

    def probe() -> dict[str, Any] | None:
        run = run_get(api, run_id)
        seen["run"] = run
        if until(run):
            return run
        if run["status"] in TERMINAL:
            raise AssertionError(
                f"run {run_id} ended {run['status']} while waiting for {what}: {run}\n"
                f"{logs_section(procs)}"
            )
        return None

    return poll_until(
        probe,
        timeout=timeout,
        what=f"run {run_id}: {what}",
        processes=procs,
        describe=lambda: seen.get("run"),
    )


def pending_approvals(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [approval for approval in run["approvals"] if approval["status"] == "pending"]


def is_waiting_for_a_person(run: dict[str, Any]) -> bool:
    return run["status"] == "waiting" and bool(pending_approvals(run))


def is_completed(run: dict[str, Any]) -> bool:
    return run["status"] == "completed"


def approvals_pending_list(api: ApiClient) -> list[dict[str, Any]]:
    """Every pending approval ``api``'s user can see (all pages)."""
    found: list[dict[str, Any]] = []
    url: str | None = "/api/approvals/?status=pending&page_size=100"
    while url:
        page = api.get(url)
        if isinstance(page, list):
            return page
        found.extend(page["results"])
        url = page.get("next")
    return found


def approval_approve(api: ApiClient, approval: dict[str, Any], *, message: str = "") -> Any:
    """Approve exactly what the reviewer saw (echoing its payload hash)."""
    body = {"decision": "approve", "payload_hash": approval["payload_hash"]}
    if message:
        body["message"] = message
    return api.post(f"/api/approvals/{approval['id']}/decision/", body, expect=200)

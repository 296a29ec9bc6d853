"""The people of the faults chaos test at work against the real web server: alice starts runs
and cancels some (as their requester, over the API), bob and carol approve what waits, tina
forks from the run page, carol settles on the run page what the console handed to a person."""

from __future__ import annotations

import datetime as dt
import html
import time
from typing import Any

import pytest
from django.utils import timezone

from agents.effects.reconcile import UNSETTLED
from agents.models import Effect
from agents.selectors import run_history
from approvals.models import AgentRun
from tests.support.chaos import (
    ACTIONS,
    Planned,
    cancelled_run_quiet,
    downstream_row,
    effects_unsettled,
    run_line,
    runs_not_ended,
)
from tests.support.processes import logs_section
from tests.support.runs import (
    TERMINAL,
    approval_approve,
    approvals_pending_list,
    pending_approvals,
    run_get,
    run_start,
)

AGENT = "incident_copilot"
FORK_REFUSED = "This step comes after approval #{approval}"
# A person looks at an effect handed to them a while later, when no call can still land.
LOOK_AFTER_S = 12.0
# An action a cancelled run applied is undone within this long after it is known to be done.
UNDO_WITHIN_S = 30.0


class FaultChaos:
    """The plan, the people's clients, and what happened so far."""

    def __init__(self, *, plan: list[Planned], processes: Any, apis: dict, pages: dict) -> None:
        self.plan = plan
        self.processes = processes
        self.apis, self.pages = apis, pages
        self.runs: dict[str, Planned] = {}
        self.views: dict[str, dict[str, Any]] = {}
        self.cancelled: dict[str, str] = {}  # run id -> what it was doing when alice cancelled
        self.forked: dict[str, str] = {}  # parent run id -> child run id
        self.reasked: dict[str, int] = {}  # fork child id -> the approval it asked for
        self.settled: dict[str, str] = {}  # effect key -> what carol answered
        self.done_since: dict[str, float] = {}  # applied effect of a cancelled run -> seen at
        self.decided: set[int] = set()
        self.started = 0

    def start_due(self, *, elapsed: float, every_s: float) -> None:
        """Alice starts the next planned runs whose moment came."""
        while self.started < len(self.plan) and elapsed >= self.started * every_s:
            planned = self.plan[self.started]
            planned.run_id = run_start(self.apis["alice"], agent=AGENT, input=planned.input)["id"]
            self.runs[planned.run_id] = planned
            self.started += 1

    def step(self) -> None:
        self.decide_pending()
        self.observe()
        self.settle_escalated()
        self.check_undone()

    def decide_pending(self) -> None:
        """Approve what waits, except the runs alice will cancel while they wait."""
        for approval in approvals_pending_list(self.apis["carol"]):
            planned = self.runs.get(approval["run"])
            if approval["id"] in self.decided or planned is None:
                continue
            if planned.role == "cancel_waiting":
                continue
            if planned.role == "fork_child":
                self.reasked.setdefault(planned.run_id, approval["id"])
            api = self.apis["bob"] if approval["tier"] == "write" else self.apis["carol"]
            approval_approve(api, approval)
            self.decided.add(approval["id"])

    def observe(self) -> None:
        """Read each run; cancel or fork it when its moment came; fail on a wrong ending."""
        for run_id, planned in list(self.runs.items()):
            if self.over(planned):
                continue
            view = self.views[run_id] = run_get(self.apis["frank"], run_id)  # reads every run
            if view["status"] in TERMINAL:
                if view["status"] != planned.ends_as:
                    pytest.fail(
                        f"{planned.role} run {run_id} ended {view['status']}\n{self.report()}"
                    )
                if planned.role == "fork":
                    self.forks(planned)
            elif planned.role == "cancel_waiting" and pending_approvals(view):
                self.cancel(planned, doing=f"waiting for approval {view['approvals'][0]['id']}")
            elif planned.role == "cancel_running":
                action = [e for e in view["effects"] if e["tool"] == planned.action]
                if action:
                    self.cancel(planned, doing=f"{view['status']}, {action[0]['status']} effect")

    def over(self, planned: Planned) -> bool:
        """Ended as planned, and nothing more to do with it (a fork's parent: forked)."""
        status = self.views.get(planned.run_id, {}).get("status")
        return status == planned.ends_as and (
            planned.role != "fork" or planned.run_id in self.forked
        )

    def cancel(self, planned: Planned, *, doing: str) -> None:
        api = self.apis["alice"]  # as the run's requester
        answer = api.post(f"/api/runs/{planned.run_id}/cancel/", {}, expect=(200, 409))
        if answer["status"] != "cancelled":
            pytest.fail(f"the cancel came too late ({doing}): {answer}\n{self.report()}")
        self.cancelled[planned.run_id] = doing

    def forks(self, planned: Planned) -> None:
        """As tina on the run page: a step after the decided gate is refused with its reason;
        one before it starts a new run that must ask again."""
        if planned.run_id in self.forked:
            return
        run = AgentRun.objects.get(pk=planned.run_id)
        history = run_history(run=run)
        after = [step for step in history if not step["forkable"]]
        before = [step for step in history if step["forkable"]]
        assert after and before, history
        page = f"/runs/{run.pk}/"
        refused = after[int(planned.fork_at[0] * len(after))]
        answer = self.pages["tina"].post(
            f"{page}fork/", {"checkpoint_id": refused["checkpoint_id"]}
        )
        assert (answer.status_code, answer.headers.get("location")) == (302, page), answer
        [gate] = run.approvals.filter(tool=planned.action)
        shown = html.unescape(self.pages["tina"].get(page))
        assert FORK_REFUSED.format(approval=gate.pk) in shown, refused
        assert not AgentRun.objects.filter(parent_run=run).exists()

        allowed = before[int(planned.fork_at[1] * len(before))]
        answer = self.pages["tina"].post(
            f"{page}fork/", {"checkpoint_id": allowed["checkpoint_id"]}
        )
        assert answer.status_code == 302, answer
        child_id = answer.headers["location"].strip("/").split("/")[-1]
        assert child_id != str(run.pk), answer.headers
        child = Planned(role="fork_child", input=planned.input, action=planned.action)
        child.run_id, child.parent_id = child_id, planned.run_id
        self.runs[child_id] = child
        self.forked[planned.run_id] = child_id

    def settle_escalated(self) -> None:
        """As carol: answer for each effect handed to her, after looking downstream by key."""
        looked = timezone.now() - dt.timedelta(seconds=LOOK_AFTER_S)
        for effect in Effect.objects.filter(status__in=UNSETTLED, escalated_at__lt=looked):
            outcome = "done" if downstream_row(effect) is not None else "not_done"
            self.pages["carol"].post(
                f"/runs/{effect.run_id}/effects/{effect.pk}/settle/",
                {"outcome": outcome, "note": "looked it up in the downstream by key"},
            )
            effect.refresh_from_db()
            assert effect.status not in UNSETTLED, effect
            self.settled[effect.key] = outcome

    def check_undone(self) -> None:
        """Fail soon, with the evidence, when a cancelled run keeps an applied action."""
        applied = Effect.objects.filter(
            run_id__in=list(self.cancelled),
            compensates__isnull=True,
            tool__in=ACTIONS,
            status=Effect.Status.SUCCEEDED,
        )
        now = time.monotonic()
        for effect in applied:
            since = self.done_since.setdefault(effect.key, now)
            if now - since > UNDO_WITHIN_S:
                pytest.fail(
                    f"cancelled run {effect.run_id} keeps its applied {effect.tool} "
                    f"{effect.key} ({effect.settlement or 'settled by lookup'}), "
                    f"{UNDO_WITHIN_S:g}s after it was known to be done: nothing undoes it\n"
                    f"{self.report()}"
                )

    def finished(self) -> bool:
        if len(self.runs) < len(self.plan) + sum(p.role == "fork" for p in self.plan):
            return False
        if not all(self.over(planned) for planned in self.runs.values()):
            return False
        if effects_unsettled() or runs_not_ended():
            return False
        cancelled = AgentRun.objects.filter(pk__in=list(self.cancelled))
        return all(cancelled_run_quiet(run) for run in cancelled)

    def report(self) -> str:
        lines = [
            f"{run_line(planned)} cancelled={self.cancelled.get(run_id, '-')}"
            for run_id, planned in self.runs.items()
        ]
        lines.append(f"settled by carol: {self.settled}")
        return "\n".join(lines) + "\n" + logs_section(self.processes.all, lines=80)

"""What changed while an approval waited: the agent's version, the tool's args schema, the policy.

At request time ``changes_baseline`` records what the request rests on (on the approval:
``agent_version``, ``schema_digest``, ``policy_digest``); ``approval_changes`` compares that
with now. approvals/ never imports agents/, so the registry's current agent version and tool
schema come from a provider that the agents app registers at start-up
(``changes_provider_set``). A check whose baseline is empty (an approval requested before these
were kept, or a tool the registry does not know) finds nothing: no false alarms.

Deciding an approval with changes needs their digest (``changes_digest``) back as
``changes_seen``: the reviewer saw exactly these (``changes_check``, 428 otherwise).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from approvals import policy
from approvals.models import (
    AgentRun,
    ApprovalRequest,
    PolicyVersion,
    RiskTier,
    ToolPolicy,
    ToolPolicyRule,
)
from approvals.services.errors import ChangesNotAcknowledged
from audit.canonical import canonical_hash
from audit.models import AuditEvent

AGENT_VERSION = "agent_version"
ARGS_SCHEMA = "args_schema"
POLICY = "policy"
# The policy changes read to say who changed it and when (they are rare; newest kept).
_POLICY_EVENTS = 200


@dataclass(frozen=True)
class Current:
    """What the registry says now: the agent's current version, the tool's args schema (None:
    not registered in this process)."""

    agent_version: str | None
    args_schema: dict[str, Any] | None


# provider(agent=..., tool=...) -> Current
Provider = Callable[..., Current]
_provider: Provider | None = None


def changes_provider_set(provider: Provider | None) -> None:
    """Register the function that reads the registry (agents' AppConfig.ready)."""
    global _provider
    _provider = provider


def _current(*, agent: str, tool: str) -> Current:
    if _provider is None:
        return Current(agent_version=None, args_schema=None)
    return _provider(agent=agent, tool=tool)


@dataclass(frozen=True)
class Change:
    """One thing that changed since the request: ``kind`` (agent_version, args_schema, policy),
    a sentence for people, before and after (versions or digests), who and when if known."""

    kind: str
    summary: str
    before: str
    after: str
    by: str = ""
    at: dt.datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        """For the API (its JSON renderer writes the time)."""
        return {
            "kind": self.kind,
            "summary": self.summary,
            "before": self.before,
            "after": self.after,
            "by": self.by or None,
            "at": self.at,
        }


def policy_digest(*, tier: str, tool: str) -> str:
    """A digest of the tier's policy and the tool's policy, as they are now (in an advance: as
    the advance read them, ``policy.policy_read_once``, so the request records the policy it
    was given, for one query more)."""
    row = policy.tier_get(tier)
    tool_policy, rules = policy.tool_policy_get(tool)
    return canonical_hash({"tier": _tier_state(row), "tool": _tool_state(tool_policy, rules)})


def _policy_digest_now(*, tier: str, tool: str) -> str:
    """``policy_digest`` read fresh, outside any advance's reading."""
    row = RiskTier.objects.filter(name=tier).first()
    tool_policy = ToolPolicy.objects.filter(tool=tool).first()
    rules = list(tool_policy.rules.order_by("position", "id")) if tool_policy else []
    return canonical_hash({"tier": _tier_state(row), "tool": _tool_state(tool_policy, rules)})


def _tier_state(row: RiskTier | None) -> dict[str, Any] | None:
    """Every column of the tier and its approver groups (what ``policy_snapshot`` shows, by id:
    one query fewer than names, and the advance has the row already)."""
    if row is None:
        return None
    state = {field.attname: getattr(row, field.attname) for field in RiskTier._meta.concrete_fields}
    state["approver_groups"] = sorted(row.approver_groups.values_list("id", flat=True))
    return state


def _tool_state(tool_policy: ToolPolicy | None, rules: list[ToolPolicyRule]) -> Any:
    if tool_policy is None:
        return None
    return {
        "tier": tool_policy.tier_id,
        "rules": [[r.arg, r.op, r.value, r.tier_id] for r in rules],
    }


def _schema_digest(schema: dict[str, Any] | None) -> str:
    return canonical_hash(schema) if isinstance(schema, dict) else ""


def changes_baseline(*, run: AgentRun, tool: str, tier: str, memo: dict | None = None) -> dict:
    """The fields a new approval records (``memo``: shared by the requests of one advance)."""
    memo = {} if memo is None else memo
    key = (run.agent, tool, tier)
    if key not in memo:
        current = _current(agent=run.agent, tool=tool)
        memo[key] = {
            # The registry's current version at the request, not the run's (a run drained on
            # an older version was behind before it asked); empty for an agent it lacks.
            "agent_version": (current.agent_version or "")[:40],
            "schema_digest": _schema_digest(current.args_schema),
            "policy_digest": policy_digest(tier=tier, tool=tool),
        }
    return dict(memo[key])


def approval_changes(approval: ApprovalRequest) -> list[Change]:
    """What changed since the approval was requested (nothing once it is decided)."""
    if not approval.is_pending:
        return []
    run = approval.run
    current = _current(agent=run.agent, tool=approval.tool)
    changes: list[Change] = []
    if approval.agent_version and current.agent_version != approval.agent_version:
        now = current.agent_version or "no registered version"
        changes.append(
            Change(
                kind=AGENT_VERSION,
                summary=f"The {run.agent} agent changed from version {approval.agent_version} "
                f"to {now}.",
                before=approval.agent_version,
                after=current.agent_version or "",
            )
        )
    if approval.schema_digest:
        after = _schema_digest(current.args_schema)
        if after != approval.schema_digest:
            changes.append(
                Change(
                    kind=ARGS_SCHEMA,
                    summary=f"The arguments {approval.tool} takes changed (its args schema); "
                    "the form shows them as they were requested.",
                    before=approval.schema_digest,
                    after=after,
                )
            )
    policy_change = _policy_change(approval)
    if policy_change is not None:
        changes.append(policy_change)
    return changes


def _policy_change(approval: ApprovalRequest) -> Change | None:
    if not approval.policy_digest:
        return None
    # Every policy change bumps the version (policy_change_record): unchanged, nothing to read.
    version = PolicyVersion.objects.filter(pk=1).values_list("number", flat=True).first() or 0
    if version == approval.policy_version:
        return None
    after = _policy_digest_now(tier=approval.tier, tool=approval.tool)
    if after == approval.policy_digest:
        return None
    names, by, at = _policy_events(approval)
    what = " and ".join(names) or f"tier {approval.tier} or the {approval.tool} tool policy"
    when = f" (last by {by} at {timezone.localtime(at):%Y-%m-%d %H:%M %Z})" if at else ""
    return Change(
        kind=POLICY,
        summary=f"The policy changed since the request: {what}{when}.",
        before=approval.policy_digest,
        after=after,
        by=by,
        at=at,
    )


def _policy_events(approval: ApprovalRequest) -> tuple[list[str], str, dt.datetime | None]:
    """Which of the approval's policies changed since it was requested, the last by whom, when."""
    events = AuditEvent.objects.filter(
        action="policy.changed", at__gte=approval.created_at
    ).order_by("-seq")[:_POLICY_EVENTS]
    names: list[str] = []
    last: AuditEvent | None = None
    for event in events:
        state = (event.data or {}).get("state") or {}
        kind = (event.data or {}).get("kind")
        if kind == "risktier" and state.get("name") == approval.tier:
            name = f"tier {approval.tier}"
        elif kind == "toolpolicy" and state.get("tool") == approval.tool:
            name = f"the {approval.tool} tool policy"
        else:
            continue
        last = last or event
        if name not in names:
            names.insert(0, name)
    if last is None:
        return names, "", None
    return names, last.actor_username or last.actor, last.at


def changes_digest(changes: list[Change]) -> str:
    """What a reviewer confirms: exactly these changes (not who or when)."""
    return canonical_hash([[c.kind, c.before, c.after] for c in changes])


def changes_check(*, approval: ApprovalRequest, changes_seen: str | None) -> list[str]:
    """The kinds of change the reviewer was warned of (empty: none); ChangesNotAcknowledged
    (428) when there are changes and ``changes_seen`` is not their digest."""
    changes = approval_changes(approval)
    if not changes:
        return []
    digest = changes_digest(changes)
    if changes_seen != digest:
        raise ChangesNotAcknowledged(changes=changes, digest=digest, stale=bool(changes_seen))
    return [change.kind for change in changes]

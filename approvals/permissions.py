"""Who may see runs and approvals, cancel a run, and decide an approval (invariant 7: enforced
on the server). The rule is written here once; pages, API and exports read through the
selectors that apply it (docs/security.md has the table).

- A run and its approvals are visible to its requester; to the allowed approvers of the tier of
  one of its approvals (approval_decidable_filter); to compliance (``audit.view_audit``) and to
  whoever an admin grants ``approvals.view_approvalrequest`` (read-only, everything); and to
  superusers. Managers see aggregates only (the metrics), not runs or approvals.
- Of those who see a run, the requester, staff, superusers and the allowed approvers of one of
  its approvals may cancel it.
- Members of the tier's approver groups may decide; once the approval has escalated, members of
  the tier's escalation group may too.
- A tier with no approver groups (or no RiskTier row at all) falls back to the
  ``approvals.decide`` permission, so an unconfigured install keeps working.
- Members of a tier's lead group see its approvals and may assign them (``user_may_assign``),
  as superusers may; assigning gives no right to decide.
- Never the run's requester (four eyes). Voting twice in one quorum round is a conflict (409),
  checked by the decision service under the row lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef, Q

from approvals import policy
from approvals.models import AgentRun, ApprovalRequest, RiskTier
from audit.selectors import user_sees_all

READ_ALL_PERMISSION = "approvals.view_approvalrequest"


def user_may_view_all(user: Any) -> bool:
    """Superusers, compliance and an explicit admin grant read every run and approval; the
    right to decide does not (it shows the runs of the tiers one may decide)."""
    return bool(
        user.is_authenticated
        and (user_sees_all(user) or (user.is_active and user.has_perm(READ_ALL_PERMISSION)))
    )


def user_may_view_run(*, user: Any, run: AgentRun) -> bool:
    return AgentRun.objects.filter(run_visible_filter(user=user), pk=run.pk).exists()


def run_visible_filter(*, user: Any, via: str = "") -> Q:
    """Who sees a run, as a query: over runs, or over rows of a run with ``via="run__"``."""
    if not user.is_authenticated:
        return Q(pk__in=[])
    if user_may_view_all(user):
        return Q()
    return _run_visible(user=user, via=via, tiers=_tiers_of(user))


def _run_visible(*, user: Any, via: str, tiers: Tiers | None) -> Q:
    own = Q(**{f"{via}requested_by_id": user.pk})
    # An external agent's runs: its owner group's members see them as a requester does.
    own |= Q(**{f"{via}owner_group__in": user.groups.all()})
    if tiers is None:
        return own
    # EXISTS, not `pk IN (SELECT run_id ...)`: under an OR, Postgres cannot turn the IN into a
    # join, and once the subquery's rows (every approval, for a reviewer of every tier) outgrow
    # work_mem it searches them linearly per row (minutes at 1M approvals); EXISTS probes the
    # run_id index once per row.
    run = OuterRef(f"{via}pk")
    # A tier lead sees the approvals they may assign (approvals/services/claims.py).
    to_see = _decidable(tiers) | Q(tier__in=tiers.led) if tiers.led else _decidable(tiers)
    runs_to_decide = ApprovalRequest.objects.filter(to_see, run_id=run)
    # Effects live in agents/, which this app never imports: their model is the run's relation's.
    effects = AgentRun._meta.get_field("effects").related_model
    runs_to_settle = effects.objects.filter(_settleable(tiers), run_id=run)
    return own | Q(Exists(runs_to_decide)) | Q(Exists(runs_to_settle))


def user_may_cancel(*, user: Any, run: AgentRun) -> bool:
    """Of those who see the run: the requester, staff and superusers, and the allowed approvers
    of one of its approvals."""
    if not user_may_view_run(user=user, run=run):
        return False
    if run.requested_by_id == user.pk or user.is_staff or user.is_superuser:
        return True
    decidable = approval_decidable_filter(user=user)
    return decidable is not None and run.approvals.filter(decidable).exists()


def approval_decidable_filter(*, user: Any) -> Q | None:
    """The approvals ``user`` may decide by tier (permissions.user_may_approve_tier as a query):
    tiers whose approver groups they are in, tiers whose escalation group they are in once
    escalated, and, with approvals.decide, tiers that configure no approver group."""
    tiers = _tiers_of(user)
    return None if tiers is None else _decidable(tiers)


def effect_settleable_filter(*, user: Any) -> Q | None:
    """The escalated effects (``agents.Effect`` rows, whose ``tier`` is set when a person is
    asked) ``user`` may settle by tier, as a query: the deciding rule without escalation groups."""
    tiers = _tiers_of(user)
    return None if tiers is None else _settleable(tiers)


@dataclass(frozen=True)
class Tiers:
    """Which tiers one person may decide, by the rows of RiskTier."""

    allowed: set[str]  # by approver group
    escalated: set[str]  # by escalation group, once an approval has escalated
    grouped: set[str]  # tiers that configure approver groups
    need_another_group: set[str]  # tiers whose required group this person is not in
    may_decide: bool  # approvals.decide: the tiers without approver groups
    led: set[str]  # by lead group: this person may assign the tier's approvals


def _decidable(tiers: Tiers) -> Q:
    condition = Q(tier__in=tiers.allowed) | Q(tier__in=tiers.escalated, escalated_at__isnull=False)
    if tiers.may_decide:
        condition |= ~Q(tier__in=tiers.grouped)
    return condition


def _settleable(tiers: Tiers) -> Q:
    """One person's answer settles an effect: no escalation group, and a tier whose quorum needs
    a member of a group needs that member (agents.services._settle_check)."""
    condition = Q(tier__in=tiers.allowed)
    if tiers.may_decide:
        condition |= ~Q(tier__in=tiers.grouped)
    return condition & ~Q(tier="") & ~Q(tier__in=tiers.need_another_group)


def _tiers_of(user: Any) -> Tiers | None:
    """The tiers ``user`` may decide, or None for someone who decides nothing."""
    if not user.is_authenticated or not user.is_active:
        return None
    mine = set(user.groups.values_list("id", flat=True))
    tiers = Tiers(set(), set(), set(), set(), user.has_perm("approvals.decide"), set())
    for tier in RiskTier.objects.prefetch_related("approver_groups"):
        group_ids = {g.pk for g in tier.approver_groups.all()}
        if tier.lead_group_id is not None and tier.lead_group_id in mine:
            tiers.led.add(tier.name)
        if tier.required_group_id is not None and tier.required_group_id not in mine:
            tiers.need_another_group.add(tier.name)
        if group_ids:
            tiers.grouped.add(tier.name)
            if group_ids & mine:
                tiers.allowed.add(tier.name)
            elif tier.escalation_group_id in mine:
                tiers.escalated.add(tier.name)
    return tiers


def user_may_decide(*, user: Any, approval: ApprovalRequest) -> tuple[bool, str]:
    """(allowed, reason)."""
    if not user.is_authenticated or not user.is_active:
        return False, "You must be logged in to decide."
    if approval.run.erased_at is not None:
        return False, "This run's personal data was erased; nothing of it can be decided."
    if approval.run.requested_by_id == user.pk:
        return False, "You requested this run; someone else must decide (four eyes)."
    allowed, reason = user_may_approve_tier(
        user=user, tier=approval.tier, escalated=approval.escalated_at is not None
    )
    return allowed, reason


def user_may_approve_tier(*, user: Any, tier: str, escalated: bool = False) -> tuple[bool, str]:
    """Whether ``user`` belongs to the people allowed to decide ``tier`` actions."""
    row = policy.tier_get(tier)
    group_ids = tier_group_ids(row) if row else set()
    if not group_ids:
        if user.has_perm("approvals.decide"):
            return True, ""
        return False, "You do not have the right to decide approvals."
    mine = set(user.groups.values_list("id", flat=True))
    if mine & group_ids:
        return True, ""
    if escalated and row is not None and row.escalation_group_id in mine:
        return True, ""
    return False, f"Only members of {tier_group_names(row)} may decide {tier} actions."


def user_may_assign(*, user: Any, approval: ApprovalRequest) -> tuple[bool, str]:
    """(allowed, reason): superusers, and members of the tier's lead group, may assign."""
    if not user.is_authenticated or not user.is_active:
        return False, "You must be logged in to assign approvals."
    if user.is_superuser:
        return True, ""
    row = policy.tier_get(approval.tier)
    if row is not None and user_in_group(user=user, group_id=row.lead_group_id):
        return True, ""
    return False, f"Only an admin or a lead of the {approval.tier} tier may assign its approvals."


def tier_group_ids(row: RiskTier) -> set[int]:
    return {group.pk for group in row.approver_groups.all()}


def tier_group_names(row: RiskTier) -> str:
    names = sorted(group.name for group in row.approver_groups.all())
    return " or ".join(names) if names else "the approvers"


def user_in_group(*, user: Any, group_id: int | None) -> bool:
    return group_id is not None and user.groups.filter(pk=group_id).exists()


def user_may_review_action(*, user: Any, tier: str, run: AgentRun) -> tuple[bool, str]:
    """(allowed, reason): who may review an action that ran without waiting (docs/autonomy.md).

    One person's call, as settling an effect is: someone who may decide ``tier`` (approver
    groups, or ``approvals.decide`` for a tier without any), in its required group when the
    tier names one, and never the run's requester (four eyes).
    """
    if not user.is_authenticated or not user.is_active:
        return False, "You must be logged in to review actions."
    if run.erased_at is not None:
        return False, "This run's personal data was erased; nothing of it can be reviewed."
    if run.requested_by_id == user.pk:
        return False, "You requested this run; someone else must review it (four eyes)."
    allowed, reason = user_may_approve_tier(user=user, tier=tier)
    row = policy.tier_get(tier)
    required = row.required_group_id if row is not None else None
    if allowed and required is not None and not user_in_group(user=user, group_id=required):
        return False, f"Only members of {row.required_group.name} may review {tier} actions."
    if not allowed:
        return False, reason.replace("may decide", "may review")
    return True, ""


def action_filters(*, user: Any) -> tuple[Q, Q | None]:
    """(visible, reviewable) over actions that ran without waiting, reading the tiers once.

    visible: whoever sees the action's run, and whoever may review it. reviewable: the tiers
    ``user`` may review (user_may_review_action as a query, without the requester's
    exclusion); None for someone who may review nothing.
    """
    if not user.is_authenticated:
        return Q(pk__in=[]), None
    tiers = _tiers_of(user)
    reviewable = None if tiers is None else _settleable(tiers)
    if user_may_view_all(user):
        return Q(), reviewable  # never OR-ed: Q() | x is x, which would hide what they may read
    visible = _run_visible(user=user, via="run__", tiers=tiers)
    return (visible if reviewable is None else visible | reviewable), reviewable

"""The claim card and the queue's claim badge (templates/approvals/_claim.html, _claim_badge.html)."""

from __future__ import annotations

from typing import Any

from django import template

from approvals.claim_selectors import approval_claim_panel
from approvals.models import ApprovalClaim
from approvals.services.claims import claim_text as _claim_text

register = template.Library()


@register.simple_tag(takes_context=True)
def claim_panel(context: template.Context, approval: Any) -> dict[str, Any]:
    """``{% claim_panel approval as panel %}``: what the card shows the reader."""
    return approval_claim_panel(approval=approval, user=context["request"].user)


@register.filter
def claim_text(claim: ApprovalClaim) -> str:
    """ "bob is looking at this since 08:01" / "assigned to carol by erin at 08:02"."""
    return _claim_text(claim)

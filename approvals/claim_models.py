"""Claims: who is looking at a pending approval, or who it was assigned to.

Re-exported from approvals/models.py (the app's models module stays readable in one sitting).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApprovalClaim(models.Model):
    """The one claim row of an approval: a soft lock that never blocks a decision.

    A reviewer's claim lapses at ``until`` (APPROVAL_CLAIM_SECONDS; claiming again renews it).
    An assignment (``assigned_by`` set) has no ``until``: it holds until the assignee releases
    it or an admin or tier lead unassigns it. A lapsed row is a free approval: the next claim
    takes the row over with one conditional UPDATE (approvals/services/claims.py), so there is
    never more than one row per approval and two reviewers claiming at once cannot both win.
    A row of an approval that is no longer pending means nothing and is never shown.
    """

    approval = models.OneToOneField(
        "approvals.ApprovalRequest", on_delete=models.CASCADE, related_name="claim"
    )
    # The claimer, or the assignee. A claim is a hint for people: it goes with the person.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="approval_claims"
    )
    since = models.DateTimeField()
    until = models.DateTimeField(null=True, blank=True)
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="approval_assignments_made",
    )

    class Meta:
        constraints = [
            # A claim lapses; an assignment does not (and is always someone's doing).
            models.CheckConstraint(
                condition=models.Q(assigned_by__isnull=True, until__isnull=False)
                | models.Q(assigned_by__isnull=False, until__isnull=True),
                name="claim_lapses_unless_assigned",
            ),
        ]
        indexes = [
            # "Assigned to me": the assignee's live assignments.
            models.Index(
                fields=["user"],
                name="claim_assigned_to",
                condition=models.Q(assigned_by__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        if self.is_assignment:
            return f"#{self.approval_id} assigned to {self.user} by {self.assigned_by}"
        return f"#{self.approval_id} claimed by {self.user} until {self.until}"

    @property
    def is_assignment(self) -> bool:
        return self.assigned_by_id is not None

    def is_live(self, now=None) -> bool:
        """An assignment, or a claim that has not lapsed yet."""
        return self.until is None or self.until > (now or timezone.now())


def claim_live_q(now=None, prefix: str = "") -> models.Q:
    """Rows that hold: assignments, and claims not lapsed at ``now``."""
    now = now or timezone.now()
    return models.Q(**{f"{prefix}until__isnull": True}) | models.Q(**{f"{prefix}until__gt": now})

"""Rows of graduated autonomy for tests: ``AutonomousActionFactory()`` is a post-hoc
``refund_payment`` of tier "write" that ran without waiting on a refund run, pending review,
with the console's payload (tests/support/pages.py) and its hash. Pass any field to override
it; ``created_at=...`` back-dates the row."""

from __future__ import annotations

from typing import Any

import factory

from approvals.autonomy import sample_draw
from approvals.autonomy_models import AutonomousAction, AutonomyRule
from audit.canonical import canonical_hash
from tests.support.factories import RunFactory, _Backdated
from tests.support.pages import REFUND_ARGS, refund_payload


def _payload(row: Any) -> dict[str, Any]:
    return refund_payload(
        row.args,
        tool=row.tool,
        tier=row.tier,
        on_deny="The refund is reversed: the customer is charged the amount again.",
    )


class AutonomyRuleFactory(factory.django.DjangoModelFactory):
    """A post-hoc rule for the tool ``refund_payment``."""

    class Meta:
        model = AutonomyRule

    tool = "refund_payment"
    tier = None
    mode = AutonomyRule.Mode.POST_HOC
    sample_percent = 100


class AutonomousActionFactory(_Backdated):
    """A post-hoc ``refund_payment`` that ran without waiting, pending review."""

    class Meta:
        model = AutonomousAction

    class Params:
        suffix = factory.Sequence(lambda n: f"call-auto-{n}")

    run = factory.SubFactory(RunFactory, status="running")
    key = factory.LazyAttribute(lambda o: f"{o.run.thread_id}:{o.suffix}")
    tool = "refund_payment"
    tier = "write"
    args = factory.LazyFunction(lambda: dict(REFUND_ARGS))
    payload = factory.LazyAttribute(_payload)
    payload_hash = factory.LazyAttribute(lambda o: canonical_hash(o.payload))
    mode = AutonomyRule.Mode.POST_HOC
    rule = None
    sample_percent = 100
    draw = factory.LazyAttribute(lambda o: sample_draw(o.key))
    review = AutonomousAction.Review.PENDING

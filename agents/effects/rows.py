"""The one way an effect row moves on: a conditional update and its audit event, together.

An effect's result and error are sealed under its run's data key (agents.models.Effect): an
``update()`` takes them only sealed, so every outcome passes through ``effect_fields_seal``.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.models import Effect
from audit.services import event_record
from core.sealed_fields import field_seal
from core.sealing import Sealed, SealedText

# The outcome columns that hold run data (args is sealed too, but never changes).
SEALED_OUTCOME = ("result", "error")


def effect_fields_seal(effect: Effect, fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` for an ``update()`` of ``effect``, its result and error sealed under its run's
    key (an empty error stays empty)."""
    sealed = dict(fields)
    for name in SEALED_OUTCOME:
        value = sealed.get(name)
        if name in sealed and value != "" and not isinstance(value, (Sealed, SealedText)):
            sealed[name] = field_seal(Effect, name, effect.run_id, value)
    return sealed


def effect_mark(
    effect: Effect,
    *,
    where: dict[str, Any],
    update: dict[str, Any],
    action: str,
    actor: str,
    data: dict[str, Any],
    private: dict[str, Any] | None = None,
) -> bool:
    """Apply ``update`` to the effect if it still matches ``where`` (so two workers cannot both
    move it), and record ``action`` in the same transaction (invariant 3). Returns whether it
    moved. ``updated_at`` moves with it: the quiet period of a call in flight counts from it.
    ``private``: the event's personal data (args, results, errors), sealed under the run's key."""
    with transaction.atomic():
        moved = Effect.objects.filter(pk=effect.pk, **where).update(
            **{"updated_at": timezone.now(), **effect_fields_seal(effect, update)}
        )
        if moved:
            event_record(
                action=action,
                actor=actor,
                run_id=effect.run_id,
                approval_id=effect.approval_id,
                tool=effect.tool,
                data={"key": effect.key, "tool": effect.tool, **data},
                private=private,
            )
    return bool(moved)

"""Re-wrapping the runs' data keys under the current master key (the end of a rotation)."""

from __future__ import annotations

from django.db import transaction

from core.keyring import KeyMissingError, SealedValueError, keyring_get
from core.sealing import _aad


def datakeys_rewrap(*, batch: int = 500) -> tuple[int, int]:
    """Re-wrap every live data key not wrapped by the ring's current master key (a rotation:
    afterwards the old master key wraps nothing and can be removed). Returns (re-wrapped,
    left unreadable: wrapped by a key the ring no longer holds)."""
    from core.keyring import sealed_parts
    from core.models import DataKey

    ring = keyring_get()
    done = unreadable = 0
    after = None
    while True:
        rows = DataKey.objects.filter(wrapped__isnull=False).order_by("run_id")
        if after is not None:
            rows = rows.filter(run_id__gt=after)
        page = list(rows.values_list("run_id", "wrapped")[:batch])
        if not page:
            return done, unreadable
        after = page[-1][0]
        with transaction.atomic():
            for run_id, wrapped in page:
                wrapped = bytes(wrapped)
                if sealed_parts(wrapped)[0] == ring.current:
                    continue
                try:
                    dek = ring.open(wrapped, aad=_aad(run_id))
                except (KeyMissingError, SealedValueError):
                    unreadable += 1
                    continue
                DataKey.objects.filter(run_id=run_id, destroyed_at__isnull=True).update(
                    wrapped=ring.seal(dek, aad=_aad(run_id))
                )
                done += 1

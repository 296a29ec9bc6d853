"""Re-wrap the runs' data keys under the current master key (the last step of a rotation)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.services import event_record
from core.keyring import keyring_get
from core.rewrap import datakeys_rewrap


class Command(BaseCommand):
    help = (
        "Re-wrap every run's data key under the first key of ENCRYPTION_KEYS, so older master "
        "keys wrap nothing and can be removed (docs/operations.md: key rotation). Resumable; "
        "audited as datakeys.rewrapped (counts only)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch", type=int, default=500, help="keys per transaction")

    def handle(self, *args: Any, batch: int, **opts: Any) -> None:
        if batch < 1:
            raise CommandError("--batch must be a positive number")
        current = keyring_get().current
        done, unreadable = datakeys_rewrap(batch=batch)
        if done:
            event_record(
                action="datakeys.rewrapped",
                actor="system:datakeys_rewrap",
                data={"keys": done, "master_key": current, "unreadable": unreadable},
            )
        self.stdout.write(f"{done} data key(s) re-wrapped under master key {current!r}.")
        if unreadable:
            raise CommandError(
                f"{unreadable} data key(s) are wrapped by a master key missing from "
                "ENCRYPTION_KEYS: put it back (second in the list) and run this again."
            )

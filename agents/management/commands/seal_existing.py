"""Seal the personal data an older version wrote in plaintext (runs, approvals, votes, effects)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.legacy_seal import SEALED_MODELS, legacy_batch
from audit.services import event_record
from core.sealing import datakey_scope


class Command(BaseCommand):
    help = (
        "Seal every value of a sealed column still stored in plaintext (written before this "
        "version) under its run's data key, in batches of one transaction each; resumable "
        "(run it again after a stop). Audited as data.sealed (counts only)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch", type=int, default=500, help="rows per transaction")
        parser.add_argument(
            "--dry-run", action="store_true", help="count the plaintext values, change nothing"
        )

    def handle(self, *args: Any, batch: int, dry_run: bool, **opts: Any) -> None:
        if batch < 1:
            raise CommandError("--batch must be a positive number")
        totals: dict[str, int] = {}
        with datakey_scope():
            for label, _ in SEALED_MODELS:
                after, read, found = None, 0, 0
                while True:
                    rows, values, after = legacy_batch(
                        label, after=after, size=batch, write=not dry_run
                    )
                    read += rows
                    found += values
                    if after is None:
                        break
                    self.stdout.write(f"{label}: {read} rows read, {found} values in plaintext")
                totals[label] = found
                verb = "in plaintext" if dry_run else "sealed"
                self.stdout.write(f"{label}: done, {found} values {verb}.")
        if not dry_run and any(totals.values()):
            event_record(
                action="data.sealed", actor="system:seal_existing", data={"values": totals}
            )
        self.stdout.write(
            self.style.SUCCESS(
                f"{'Found' if dry_run else 'Sealed'}: {sum(totals.values())} values."
            )
        )

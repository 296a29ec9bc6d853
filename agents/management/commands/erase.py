"""Erase the personal data of runs: by id, or every run whose input names a data subject."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.erasure import (
    PERMISSION,
    ErasureInvalid,
    ErasureRefused,
    erasures_resume,
    runs_erase,
    runs_refusals,
    runs_resolve,
)
from agents.subjects import KINDS, subject_runs


class Command(BaseCommand):
    help = (
        "Erase the personal data of runs (and of their forks): their data keys are destroyed, "
        "their checkpoints, subjects' digests and sandbox rows deleted. Audited as "
        "erasure.performed (who, why, which runs; never the subject)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--run", action="append", default=[], metavar="ID", help="a run id (repeatable)"
        )
        parser.add_argument(
            "--subject", metavar="VALUE", help="erase every run whose input names this value"
        )
        parser.add_argument(
            "--kind",
            choices=KINDS,
            help="what --subject is (default email: any e-mail address in an input is found)",
        )
        parser.add_argument(
            "--reason",
            default="",
            help="why (recorded in the audit trail: do not write the subject into it)",
        )
        parser.add_argument(
            "--by", metavar="USERNAME", help="the person answerable for it (the audit's actor)"
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="list the runs it would erase, erase nothing"
        )
        parser.add_argument(
            "--resume",
            action="store_true",
            help="complete erasures a crash left between their two steps (the sweep does too)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["resume"]:
            if opts["run"] or opts["subject"]:
                raise CommandError("--resume takes no --run or --subject")
            done = erasures_resume()
            self.stdout.write(f"{done} interrupted erasure(s) completed.")
            return
        run_ids, kind = self._targets(opts)
        try:
            runs = runs_resolve(run_ids)
        except ErasureInvalid as exc:
            raise CommandError(f"--run: {exc.message}") from None
        if not runs:
            self.stdout.write("No run's input names this subject: nothing to erase.")
            return
        if opts["dry_run"]:
            self._list(runs)
            return
        user = self._user(opts["by"])
        if not (user.is_active and user.has_perm(PERMISSION)):
            raise CommandError(f"--by: {user.get_username()} may not erase ({PERMISSION})")
        if not opts["reason"].strip():
            raise CommandError(
                "--reason is required: say why these runs are erased (not who they name)"
            )
        try:
            outcome = runs_erase(runs=runs, user=user, reason=opts["reason"], kind=kind)
        except ErasureRefused as exc:
            lines = "\n".join(f"  {run_id}: {why}" for run_id, why in exc.refusals.items())
            raise CommandError(
                f"Nothing was erased; these runs cannot be erased now:\n{lines}"
            ) from None
        for run_id in outcome.erased:
            self.stdout.write(f"erased {run_id}")
        for run_id in outcome.skipped:
            self.stdout.write(f"already erased {run_id}")
        numbers = ", ".join(f"#{erasure.pk}" for erasure in outcome.erasures) or "none"
        self.stdout.write(
            self.style.SUCCESS(f"{len(outcome.erased)} run(s) erased (erasure {numbers}).")
        )

    def _targets(self, opts: dict[str, Any]) -> tuple[list[str], str]:
        if opts["run"] and opts["subject"]:
            raise CommandError("give either --run or --subject, not both")
        if opts["kind"] and not opts["subject"]:
            raise CommandError("--kind goes with --subject")
        if opts["run"]:
            return opts["run"], "run"
        if opts["subject"] is None:
            raise CommandError("say what to erase: --run ID (repeatable) or --subject VALUE")
        if not opts["subject"].strip():
            raise CommandError("--subject is empty")
        found = subject_runs(value=opts["subject"], kind=opts["kind"] or "email")
        return [str(run_id) for run_id in found], "subject"

    def _user(self, username: str | None) -> Any:
        if not username:
            raise CommandError("--by USERNAME is required: the person answerable for this erasure")
        try:
            return get_user_model().objects.get_by_natural_key(username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"--by: no user {username!r}") from None

    def _list(self, runs: list[Any]) -> None:
        refusals = runs_refusals(runs)
        for run in runs:
            state = "already erased" if run.erased_at else refusals.get(str(run.pk), "")
            note = f"  ({state})" if state else ""
            self.stdout.write(f"{run.pk}  {run.agent}  {run.status}{note}")
        self.stdout.write(f"{len(runs)} run(s); --dry-run: nothing erased.")

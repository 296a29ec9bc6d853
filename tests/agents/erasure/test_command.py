"""``manage.py erase``: clear errors naming the argument, --dry-run, refusals."""

from __future__ import annotations

import uuid

import pytest
from django.core.management import CommandError, call_command

from agents.models import Effect, Erasure
from approvals.models import AgentRun

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queued")]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "say what to erase: --run ID"),
        (["--run", "x", "--subject", "a@b.co"], "either --run or --subject"),
        (["--run", "x", "--kind", "email"], "--kind goes with --subject"),
        (["--subject", "  "], "--subject is empty"),
        (["--run", "not-a-uuid", "--by", "frank", "--reason", "r"], "--run: 'not-a-uuid' is not"),
        (["--run", str(uuid.UUID(int=7)), "--reason", "r", "--by", "frank"], "--run: No such run"),
        (["--resume", "--run", "x"], "--resume takes no --run"),
    ],
)
def test_command_errors_name_the_argument(frank, argv, message):
    with pytest.raises(CommandError, match=message.replace("(", r"\(")):
        call_command("erase", *argv)


def test_a_reason_and_a_person_are_required(driven, frank):
    run = str(driven.run.pk)
    with pytest.raises(CommandError, match="--by USERNAME is required"):
        call_command("erase", "--run", run, "--reason", "why")
    with pytest.raises(CommandError, match="--by: no user 'nobody'"):
        call_command("erase", "--run", run, "--reason", "why", "--by", "nobody")
    with pytest.raises(CommandError, match="--reason is required"):
        call_command("erase", "--run", run, "--by", "frank")
    assert AgentRun.objects.get(pk=run).erased_at is None


def test_dry_run_lists_the_runs_and_erases_nothing(driven, capsys):
    call_command("erase", "--subject", driven.email, "--dry-run")
    out = capsys.readouterr().out
    assert str(driven.run.pk) in out and "nothing erased" in out
    assert driven.email not in out
    assert AgentRun.objects.get(pk=driven.run.pk).erased_at is None
    assert not Erasure.objects.exists()


def test_an_unknown_subject_erases_nothing(frank, capsys):
    call_command("erase", "--subject", "nobody@example.com", "--reason", "r", "--by", "frank")
    assert "No run's input names this subject" in capsys.readouterr().out


def test_a_refusal_names_the_run_and_erases_nothing(driven, frank):
    effect = Effect.objects.filter(run=driven.run).first()
    Effect.objects.filter(pk=effect.pk).update(status=Effect.Status.CLAIMED)
    with pytest.raises(CommandError, match=f"{driven.run.pk}: effect .* is claimed"):
        call_command("erase", "--run", str(driven.run.pk), "--reason", "r", "--by", "frank")
    assert not Erasure.objects.exists()


def test_erase_by_run_prints_what_it_erased(driven, frank, capsys):
    call_command("erase", "--run", str(driven.run.pk), "--reason", "request 9", "--by", "frank")
    out = capsys.readouterr().out
    assert f"erased {driven.run.pk}" in out and "1 run(s) erased" in out
    assert AgentRun.objects.get(pk=driven.run.pk).erased_at is not None

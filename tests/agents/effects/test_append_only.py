"""The effects ledger is as append-only as the audit trail: no delete, no change of identity."""

from __future__ import annotations

import pytest
from django.contrib.admin.sites import site
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test import RequestFactory

from agents.models import Effect
from tests.support.factories import EffectFactory

REFUSED = (DatabaseError, IntegrityError)


@pytest.fixture
def effect(db, alice) -> Effect:
    return EffectFactory(run__requested_by=alice, status=Effect.Status.SUCCEEDED)


def _sql(statement: str, params: list) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement, params)


def test_the_model_refuses_to_delete_an_effect(effect):
    with pytest.raises(PermissionError):
        effect.delete()
    with pytest.raises(PermissionError):
        Effect.objects.filter(pk=effect.pk).delete()
    assert Effect.objects.filter(pk=effect.pk).exists()


def test_the_database_refuses_to_delete_an_effect(effect):
    with pytest.raises(REFUSED):
        _sql("DELETE FROM agents_effect WHERE id = %s", [effect.pk])
    assert Effect.objects.filter(pk=effect.pk).exists()


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("key", "another-key"),
        ("tool", "rollback_deploy"),
        ("args", '{"amount": 1000}'),
        ("args_fingerprint", "0" * 64),
    ],
)
def test_the_database_refuses_to_change_what_a_claim_is(effect, column, value):
    with pytest.raises(REFUSED):
        _sql(f"UPDATE agents_effect SET {column} = %s WHERE id = %s", [value, effect.pk])
    effect.refresh_from_db()
    assert getattr(effect, column) != (value if column != "args" else {"amount": 1000})


def test_the_outcome_of_a_claim_may_still_move_on(effect):
    Effect.objects.filter(pk=effect.pk).update(status=Effect.Status.COMPENSATED, attempts=3)
    effect.refresh_from_db()
    assert (effect.status, effect.attempts) == (Effect.Status.COMPENSATED, 3)


def test_the_admin_shows_effects_read_only(effect, admin):
    request = RequestFactory().get("/admin/agents/effect/")
    request.user = admin
    model_admin = site._registry[Effect]
    assert not model_admin.has_delete_permission(request, effect)
    assert not model_admin.has_change_permission(request, effect)
    assert not model_admin.has_add_permission(request)


@pytest.mark.django_db(transaction=True)
def test_the_sealing_migration_leaves_the_ledger_append_only(alice):
    """agents 0010 seals args, result and error in the model state only: a database AlterField
    would make SQLite rebuild agents_effect, and the rebuilt table would have no triggers."""
    executor = MigrationExecutor(connection)
    executor.migrate([("agents", "0009_h14_retention")])
    try:
        MigrationExecutor(connection).migrate([("agents", "0010_h14_seal_effects")])
    finally:
        MigrationExecutor(connection).migrate(executor.loader.graph.leaf_nodes())
    effect = EffectFactory(run__requested_by=alice, status=Effect.Status.SUCCEEDED)
    for column, value in [("args", '{"amount": 1000}'), ("key", "another-key")]:
        with pytest.raises(REFUSED):
            _sql(f"UPDATE agents_effect SET {column} = %s WHERE id = %s", [value, effect.pk])
    with pytest.raises(REFUSED):
        _sql("DELETE FROM agents_effect WHERE id = %s", [effect.pk])
    assert Effect.objects.get(pk=effect.pk).args == {"amount": 1}

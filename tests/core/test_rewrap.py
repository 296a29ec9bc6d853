"""``manage.py datakeys_rewrap``: after a rotation the old master key wraps nothing."""

from __future__ import annotations

import base64
import os
import uuid
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from audit.models import AuditEvent
from core.keyring import sealed_parts
from core.models import DataKey
from core.sealing import datakeys_destroy, seal, unseal

pytestmark = pytest.mark.django_db


def _key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def test_rewrap_moves_every_live_key_to_the_current_master_key(settings) -> None:
    k1, k2 = f"k1:{_key()}", f"k2:{_key()}"
    settings.ENCRYPTION_KEYS = k1
    runs = [uuid.uuid4() for _ in range(3)]
    values = [seal(run, {"n": i}, label="x") for i, run in enumerate(runs)]
    datakeys_destroy(runs[:1])

    settings.ENCRYPTION_KEYS = f"{k2},{k1}"  # the rotation: a new key first
    out = StringIO()
    call_command("datakeys_rewrap", "--batch", "1", stdout=out)
    assert "2 data key(s) re-wrapped under master key 'k2'" in out.getvalue()
    for row in DataKey.objects.filter(wrapped__isnull=False):
        assert sealed_parts(bytes(row.wrapped))[0] == "k2"
    assert AuditEvent.objects.get(action="datakeys.rewrapped").data["keys"] == 2

    settings.ENCRYPTION_KEYS = k2  # k1 removed: every value still opens
    assert [unseal(v, label="x") for v in values[1:]] == [{"n": 1}, {"n": 2}]
    assert DataKey.objects.get(run_id=runs[0]).wrapped is None  # destroyed stays destroyed


def test_rewrap_names_keys_whose_master_key_is_already_gone(settings) -> None:
    settings.ENCRYPTION_KEYS = f"k1:{_key()}"
    seal(uuid.uuid4(), {"n": 1}, label="x")
    settings.ENCRYPTION_KEYS = f"k2:{_key()}"
    with pytest.raises(CommandError, match="missing from ENCRYPTION_KEYS"):
        call_command("datakeys_rewrap", stdout=StringIO())

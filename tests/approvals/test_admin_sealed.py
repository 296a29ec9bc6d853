"""The admin shows runs, approvals, votes and effects read-only: a sealed field is shown
opened (or "erased"), never offered as an editable box."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import RequestFactory

from agents.models import Effect
from approvals.models import AgentRun, ApprovalRequest, ApprovalVote
from core.sealed_fields import SealedJSONField, SealedTextField

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("model", [AgentRun, ApprovalRequest, ApprovalVote, Effect])
def test_no_sealed_field_is_editable_in_the_admin(model, admin_user):
    request = RequestFactory().get("/")
    request.user = admin_user
    model_admin = admin.site._registry[model]
    sealed = {
        f.name for f in model._meta.fields if isinstance(f, (SealedJSONField, SealedTextField))
    }
    shown = set(model_admin.get_fields(request))
    assert sealed and not sealed & shown
    assert {f"{name}_opened" for name in sealed} <= shown
    assert not set(model_admin.get_form(request).base_fields) & sealed

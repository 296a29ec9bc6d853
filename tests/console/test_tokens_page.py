"""The API tokens page: my tokens, a new one shown once, revoke one or all (POST, CSRF), and
the admin's list of everybody's."""

from __future__ import annotations

import re

from django.test import Client
from django.urls import reverse

from audit.models import AuditEvent
from console.models import ApiToken
from console.tokens import token_create
from tests.support.people import client_for

PAGE = "/account/tokens/"


def test_the_nav_links_to_the_tokens_page(alice):
    assert f'href="{PAGE}"' in client_for(alice).get("/").content.decode()


def test_a_new_token_is_shown_once_and_then_only_by_its_key(alice):
    browser = client_for(alice)

    created = browser.post(PAGE, {"name": "laptop CLI"})

    assert created.status_code == 200
    assert created["Cache-Control"] == "no-store"
    secret = re.search(r'data-testid="new-token">([^<]+)<', created.content.decode()).group(1)
    token = ApiToken.objects.get(user=alice)
    assert token.name == "laptop CLI" and secret.startswith(token.token_key)
    again = browser.get(PAGE).content.decode()
    assert secret not in again
    assert token.token_key in again and "laptop CLI" in again


def test_the_page_lists_only_my_tokens(alice, bob):
    token_create(user=alice, name="alice laptop")
    token_create(user=bob, name="bob phone")

    page = client_for(alice).get(PAGE).content.decode()

    assert "alice laptop" in page
    assert "bob phone" not in page


def test_revoke_deletes_one_token(alice):
    keep, _ = token_create(user=alice, name="keep")
    drop, _ = token_create(user=alice, name="drop")

    response = client_for(alice).post(reverse("account-token-revoke", args=[drop.token_key]))

    assert response.status_code == 302
    assert list(ApiToken.objects.values_list("name", flat=True)) == ["keep"]


def test_revoking_someone_elses_token_deletes_nothing(alice, bob):
    bobs, _ = token_create(user=bob)

    client_for(alice).post(reverse("account-token-revoke", args=[bobs.token_key]))

    assert ApiToken.objects.filter(pk=bobs.pk).exists()


def test_revoke_all_deletes_every_token_of_mine(alice, bob):
    for name in ("a", "b"):
        token_create(user=alice, name=name)
    token_create(user=bob)

    response = client_for(alice).post(reverse("account-tokens-revoke-all"))

    assert response.status_code == 302
    assert not ApiToken.objects.filter(user=alice).exists()
    assert ApiToken.objects.filter(user=bob).exists()


def test_revoking_needs_the_csrf_token(alice):
    token, _ = token_create(user=alice)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)

    response = browser.post(reverse("account-tokens-revoke-all"))

    assert response.status_code == 403
    assert ApiToken.objects.filter(pk=token.pk).exists()


def test_the_tokens_page_needs_a_login(db):
    assert Client().get(PAGE).status_code == 302


def test_the_admin_lists_tokens_with_owner_name_and_expiry_and_may_delete(admin, alice):
    token, _ = token_create(user=alice, name="laptop CLI")
    browser = client_for(admin)

    listing = browser.get("/admin/console/apitoken/").content.decode()
    deleted = browser.post(f"/admin/console/apitoken/{token.pk}/delete/", {"post": "yes"})

    assert "laptop CLI" in listing and "alice" in listing and token.token_key in listing
    assert "Expiry" in listing and "Last used at" in listing
    assert deleted.status_code == 302
    assert not ApiToken.objects.exists()


def test_an_administrator_deleting_a_token_in_the_admin_writes_a_revocation_event(admin, alice):
    # Revoking is an audit event (docs/security.md; invariant 3): the admin's delete, one
    # token or the bulk action, must write it too, naming who revoked whose token.
    token, _ = token_create(user=alice, name="laptop CLI")
    browser = client_for(admin)

    browser.post(f"/admin/console/apitoken/{token.pk}/delete/", {"post": "yes"})

    event = AuditEvent.objects.filter(action="token.revoked").get()
    assert event.actor_username == "admin"
    assert token.token_key in str(event.data)


def test_the_admins_bulk_delete_of_tokens_writes_a_revocation_event(admin, alice, bob):
    tokens = [token_create(user=user, name="x")[0] for user in (alice, bob)]
    browser = client_for(admin)

    browser.post(
        "/admin/console/apitoken/",
        {"action": "delete_selected", "_selected_action": [t.pk for t in tokens], "post": "yes"},
    )

    assert not ApiToken.objects.exists()
    revoked = AuditEvent.objects.filter(action="token.revoked")
    assert {key for e in revoked for key in e.data["token_keys"]} == {t.token_key for t in tokens}

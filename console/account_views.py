"""The signed-in person's pages: log in (with its lock-out) and their API tokens."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from console.lockout import client_ip, login_failure_record, login_failures_clear, login_locked_for
from console.tokens import NAME_MAX, token_create, token_list, token_revoke, token_revoke_all


class LoginView(auth_views.LoginView):
    """Django's login page, answering 429 (with Retry-After) while the username or the
    address is locked out by too many failed attempts."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        wait = login_locked_for(username=self._username(), ip=client_ip(request))
        if wait:
            return self._locked(wait)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: forms.Form) -> HttpResponse:
        wait = login_failure_record(username=self._username(), ip=client_ip(self.request))
        if wait:
            return self._locked(wait)
        return super().form_invalid(form)

    def form_valid(self, form: forms.Form) -> HttpResponse:
        login_failures_clear(username=self._username())
        return super().form_valid(form)

    def _username(self) -> str:
        value = self.request.POST.get("username", "")
        return value if isinstance(value, str) else ""

    def _locked(self, wait: int) -> HttpResponse:
        minutes = max(1, round(wait / 60))
        context = self.get_context_data(
            form=self.get_form_class()(self.request),
            locked=f"Too many failed attempts. Try again in about {minutes} minute"
            + ("s." if minutes != 1 else "."),
        )
        response = self.render_to_response(context, status=429)
        response["Retry-After"] = str(wait)
        return response


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=NAME_MAX, required=False, help_text="The device or client, e.g. 'laptop CLI'."
    )


@login_required
@require_http_methods(["GET", "POST"])
def account_tokens(request: HttpRequest) -> HttpResponse:
    """GET: my tokens. POST: a new one, whose secret this answer shows once."""
    form = TokenCreateForm(request.POST or None)
    created = None
    status = 200
    if request.method == "POST":
        if form.is_valid():
            token, secret = token_create(
                user=request.user, name=form.cleaned_data["name"], request=request
            )
            created = {"token": token, "secret": secret}
            form = TokenCreateForm()
        else:
            status = 400
    context = {"tokens": token_list(fetched_by=request.user), "form": form, "created": created}
    response = render(request, "console/account_tokens.html", context, status=status)
    response["Cache-Control"] = "no-store"  # the page may hold a secret
    return response


@login_required
@require_POST
def account_token_revoke(request: HttpRequest, token_key: str) -> HttpResponse:
    if token_revoke(user=request.user, token_key=token_key, request=request):
        messages.success(request, f"Token {token_key}… revoked.")
    else:
        messages.error(request, "No such token (already revoked or expired).")
    return redirect("account-tokens")


@login_required
@require_POST
def account_tokens_revoke_all(request: HttpRequest) -> HttpResponse:
    revoked = token_revoke_all(user=request.user, request=request)
    messages.success(request, f"{revoked} token{'s' if revoked != 1 else ''} revoked.")
    return redirect("account-tokens")

"""API tokens in the admin: who holds which, until when; an administrator may revoke (delete).
Runs, with the erasure action for compliance."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse

from agents.erasure import PERMISSION as ERASE_PERMISSION
from agents.erasure import ErasureInvalid, ErasureRefused, runs_erase, runs_refusals, runs_resolve
from approvals.admin import AgentRunAdmin
from approvals.models import AgentRun
from approvals.permissions import user_may_view_all
from console.models import ApiToken
from console.tokens import token_revoke_as_admin


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("token_key", "user", "name", "created", "expiry", "last_used_at")
    list_filter = ("created", "expiry")
    search_fields = ("token_key", "name", "user__username")
    list_select_related = ("user",)
    # Only the digest is stored: nothing here can show (or set) a secret. People make tokens
    # on their own page (/account/tokens/) or with /api/auth/token/.
    fields = ("token_key", "user", "name", "created", "expiry", "last_used_at")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        return False

    # Revoking is an audit event wherever it happens (docs/security.md).
    def delete_model(self, request: HttpRequest, obj: ApiToken) -> None:
        token_revoke_as_admin(
            tokens=ApiToken.objects.filter(pk=obj.pk), admin=request.user, request=request
        )

    def delete_queryset(self, request: HttpRequest, queryset) -> None:
        token_revoke_as_admin(tokens=queryset, admin=request.user, request=request)


# --- erasure: runs re-registered with "Erase personal data" (approvals must not import agents) --


class ErasableAgentRunAdmin(AgentRunAdmin):
    """Runs, plus the erasure action for people with ``agents.erase_run`` (compliance): a
    confirmation page asks why, then shows what was erased or why nothing was."""

    actions = ["erase_personal_data"]

    def has_erase_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(ERASE_PERMISSION)

    # Compliance reads every run in the console; here it may list them to erase them. The
    # right to erase alone never reads a run: it must come with reading every run.
    def _erases_and_reads_all(self, request: HttpRequest) -> bool:
        return self.has_erase_permission(request) and user_may_view_all(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_view_permission(request, obj) or self._erases_and_reads_all(request)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return super().has_module_permission(request) or self._erases_and_reads_all(request)

    @admin.action(description="Erase personal data", permissions=["erase"])
    def erase_personal_data(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse:
        ids = ",".join(str(pk) for pk in queryset.values_list("pk", flat=True))
        return redirect(f"{reverse('admin:approvals_agentrun_erase')}?ids={ids}")

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        erasing = request.POST.get("action") == "erase_personal_data"
        if request.method == "POST" and erasing and not self.has_erase_permission(request):
            raise PermissionDenied("You may not erase personal data.")
        return super().changelist_view(request, extra_context)

    def get_urls(self) -> list[Any]:
        erase = path(
            "erase/",
            self.admin_site.admin_view(self.erase_view),
            name="approvals_agentrun_erase",
        )
        return [erase, *super().get_urls()]

    def erase_view(self, request: HttpRequest) -> HttpResponse:
        """GET: the runs (with their forks) and a reason to give; POST: erase them."""
        if not self.has_erase_permission(request):
            raise PermissionDenied("You may not erase personal data.")
        raw = request.POST.getlist("run") if request.method == "POST" else None
        ids = raw if raw is not None else [i for i in request.GET.get("ids", "").split(",") if i]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Erase personal data",
            "reason": request.POST.get("reason", ""),
        }
        try:
            runs = runs_resolve(ids)
        except ErasureInvalid as exc:
            context["problem"] = exc.message
            return render(request, "admin/approvals/agentrun/erase.html", context, status=400)
        context.update(runs=runs, refusals=runs_refusals(runs))
        if request.method != "POST":
            return render(request, "admin/approvals/agentrun/erase.html", context)
        try:
            context["outcome"] = runs_erase(
                runs=runs, user=request.user, reason=context["reason"], kind="run"
            )
        except ErasureRefused as exc:
            context.update(refusals=exc.refusals, refused=True)
            return render(request, "admin/approvals/agentrun/erase.html", context, status=409)
        except ErasureInvalid as exc:
            context["problem"] = exc.message
            return render(request, "admin/approvals/agentrun/erase.html", context, status=400)
        return render(request, "admin/approvals/agentrun/erase.html", context)


admin.site.unregister(AgentRun)
admin.site.register(AgentRun, ErasableAgentRunAdmin)

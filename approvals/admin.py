from django.contrib import admin

from approvals.models import AgentRun, ApprovalRequest


class ApprovalInline(admin.TabularInline):
    model = ApprovalRequest
    extra = 0
    can_delete = False
    fields = ("tool", "tier", "status", "decided_by_label", "decided_at", "expires_at")
    readonly_fields = fields
    show_change_link = True


@admin.register(AgentRun)
class AgentRunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "agent",
        "graph_version",
        "status",
        "requested_by",
        "resume_count",
        "failure_count",
        "created_at",
    )
    list_filter = ("status", "agent")
    search_fields = ("id", "thread_id", "agent", "requested_by__username")
    readonly_fields = [f.name for f in AgentRun._meta.fields]
    inlines = [ApprovalInline]


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(admin.ModelAdmin):
    list_display = ("id", "tool", "tier", "status", "run", "decided_by_label", "expires_at")
    list_filter = ("status", "tier", "tool")
    search_fields = ("tool", "run__id", "decided_by_label")
    readonly_fields = [f.name for f in ApprovalRequest._meta.fields]

    def has_add_permission(self, request):
        return False

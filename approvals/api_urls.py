from __future__ import annotations

from django.urls import path

from approvals.api import ApprovalDecideApi, ApprovalDetailApi, ApprovalListApi
from approvals.api_claims import ApprovalAssignApi, ApprovalClaimApi
from approvals.canary_api import CanaryReportApi

app_name = "approvals_api"

urlpatterns = [
    path("approvals/", ApprovalListApi.as_view(), name="list"),
    path("approvals/<str:approval_id>/", ApprovalDetailApi.as_view(), name="detail"),
    path("approvals/<str:approval_id>/decision/", ApprovalDecideApi.as_view(), name="decide"),
    path("approvals/<str:approval_id>/claim/", ApprovalClaimApi.as_view(), name="claim"),
    path("approvals/<str:approval_id>/assign/", ApprovalAssignApi.as_view(), name="assign"),
    path("canaries/report/", CanaryReportApi.as_view(), name="canaries-report"),
]

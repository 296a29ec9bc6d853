from django.urls import path

from audit.api import AuditEventListApi, AuditExportCsvApi, AuditExportJsonlApi, AuditVerifyApi

app_name = "audit_api"

urlpatterns = [
    path("audit/", AuditEventListApi.as_view(), name="list"),
    path("audit/verify/", AuditVerifyApi.as_view(), name="verify"),
    path("audit/export.csv", AuditExportCsvApi.as_view(), name="export_csv"),
    path("audit/export.jsonl", AuditExportJsonlApi.as_view(), name="export_jsonl"),
]

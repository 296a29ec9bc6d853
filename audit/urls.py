from django.urls import path

from audit import views

app_name = "audit"

urlpatterns = [
    path("", views.audit_log, name="log"),
    path("events/<int:seq>/", views.event_detail, name="event"),
    path("exports/", views.export_manifest, name="exports"),
    path("verify/", views.chain_verify, name="verify"),
]

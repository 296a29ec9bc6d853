from django.contrib.auth import views as auth_views
from django.urls import path

from console import views

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("metrics/", views.metrics, name="metrics"),
    path("metrics/export.csv", views.metrics_export_csv, name="metrics-export"),
]

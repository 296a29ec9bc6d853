from django.contrib.auth import views as auth_views
from django.urls import path

from console import account_views, autonomy_views, ops_views, views

urlpatterns = [
    path("login/", account_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("account/tokens/", account_views.account_tokens, name="account-tokens"),
    path(
        "account/tokens/revoke-all/",
        account_views.account_tokens_revoke_all,
        name="account-tokens-revoke-all",
    ),
    path(
        "account/tokens/<str:token_key>/revoke/",
        account_views.account_token_revoke,
        name="account-token-revoke",
    ),
    path("metrics/", views.metrics, name="metrics"),
    path("metrics/export.csv", views.metrics_export_csv, name="metrics-export"),
    path("ops/", ops_views.ops, name="ops"),
    path("autonomy/", autonomy_views.autonomy_advice, name="autonomy"),
    path("autonomy/apply/", autonomy_views.autonomy_advice_apply_view, name="autonomy-apply"),
]

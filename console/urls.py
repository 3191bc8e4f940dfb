from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from tools_app.api.urls import healthz
from tools_app.views.metrics import metrics
from tools_app.views.system import favicon

admin.site.site_header = "Tool Console administration"
admin.site.site_title = "Tool Console admin"

# Not django.contrib.auth.urls: its password-reset views mail a link, and the console sends
# no mail, so they would only be an unused door. Admins reset passwords with
# `manage.py changepassword`.
auth_patterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password_change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path(
        "password_change/done/",
        auth_views.PasswordChangeDoneView.as_view(),
        name="password_change_done",
    ),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    # Liveness: no auth, no database (also at /api/healthz).
    path("healthz", healthz, name="healthz_root"),
    # Browsers ask for /favicon.ico whatever the page says: send them to the static icon.
    path("favicon.ico", favicon, name="favicon"),
    # Prometheus (tools_app/views/metrics.py): a metrics:read token, or CONSOLE_METRICS_PUBLIC.
    path("metrics", metrics, name="metrics"),
    path("accounts/", include(auth_patterns)),
    path("api/", include("tools_app.api.urls")),
    path("", include("tools_app.urls")),
]

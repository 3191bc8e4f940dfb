from django.contrib import admin
from django.urls import include, path

from tools_app.api.urls import healthz

admin.site.site_header = "Tool Console administration"
admin.site.site_title = "Tool Console admin"

urlpatterns = [
    path("admin/", admin.site.urls),
    # Liveness: no auth, no database (also at /api/healthz).
    path("healthz", healthz, name="healthz_root"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("tools_app.api.urls")),
    path("", include("tools_app.urls")),
]

from django.contrib import admin
from django.urls import include, path

admin.site.site_header = "Tool Console administration"
admin.site.site_title = "Tool Console admin"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("tools_app.api.urls")),
    path("", include("tools_app.urls")),
]

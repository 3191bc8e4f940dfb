from django.urls import include, path

from tests.oauth_server import views

urlpatterns = [
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("login/", views.login_view),
    path("api/echo/", views.echo),
    path("api/me/", views.me),
    path("api/always-401/", views.always_401),
    path("userinfo/", views.userinfo),
    path("counts/", views.counts),
    path("expire/", views.expire),
]

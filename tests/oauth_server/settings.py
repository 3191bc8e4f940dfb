"""A tiny Django project that is the OAuth tests' authorization server: django-oauth-toolkit
with PKCE required, exact redirect URIs, refresh-token rotation and revocation. Started
by tests/support/oauth.py as its own process; its database is a SQLite file in tmp."""

import os

SECRET_KEY = "oauth-test-server-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "tests.oauth_server.views.CountTokenRequests",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.oauth_server.urls"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["OAUTH_SERVER_DB"],
        "OPTIONS": {"timeout": 20},
    }
}
USE_TZ = True
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}]
LOGIN_URL = "/login/"
OAUTH2_PROVIDER = {
    "PKCE_REQUIRED": True,
    "ROTATE_REFRESH_TOKEN": True,
    "ACCESS_TOKEN_EXPIRE_SECONDS": 600,
    # http too for a browser test's console on 127.0.0.1 (its redirect URI still exact).
    "ALLOWED_REDIRECT_URI_SCHEMES": ["https", "http"]
    if os.environ["OAUTH_REDIRECT_URI"].startswith("http://")
    else ["https"],
    "SCOPES": {"read": "Read", "write": "Write", "openid": "OpenID"},
    "DEFAULT_SCOPES": ["read"],
}

"""The request type of views that read `request.htmx` (django-htmx's middleware sets it)."""

from __future__ import annotations

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


# django-htmx's example project types it so (the pattern django-stubs recommends for
# attributes that middleware adds).
class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails

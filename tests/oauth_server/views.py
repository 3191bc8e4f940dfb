"""The test server's own views: log a user in, an API that echoes the token's user (what a
tool's request proves), userinfo, and how many token requests of each grant arrived."""

import json
import threading
from collections import Counter
from urllib.parse import parse_qs

from django.contrib.auth import authenticate, login
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.decorators import protected_resource

_lock = threading.Lock()
COUNTS: Counter[str] = Counter()


class CountTokenRequests:
    """Counts POSTs to the token endpoint by grant_type (the race test reads it)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and request.path == "/o/token/":
            grant = parse_qs(request.body.decode()).get("grant_type", [""])[0]
            with _lock:
                COUNTS[grant] += 1
        return self.get_response(request)


@csrf_exempt
def login_view(request: HttpRequest) -> HttpResponse:
    user = authenticate(
        request, username=request.POST.get("username"), password=request.POST.get("password")
    )
    if user is None:
        return HttpResponse("bad login", status=403)
    login(request, user)
    return HttpResponse("ok")


@protected_resource()
def echo(request: HttpRequest) -> HttpResponse:
    owner = request.resource_owner  # None for a client credentials token
    return JsonResponse({"user": owner.username if owner else None})


@protected_resource()
def userinfo(request: HttpRequest) -> HttpResponse:
    user = request.resource_owner
    return JsonResponse({"sub": str(user.pk), "email": user.email})


def counts(request: HttpRequest) -> HttpResponse:
    with _lock:
        return HttpResponse(json.dumps(dict(COUNTS)), content_type="application/json")

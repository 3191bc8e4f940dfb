"""The test server's own views: log a user in, an API that echoes the token's user (what a
tool's request proves), userinfo, and how many token requests of each grant arrived."""

import hashlib
import json
import threading
from collections import Counter
from datetime import timedelta
from urllib.parse import parse_qs

from django.contrib.auth import authenticate, login
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.utils import timezone
from django.utils.html import escape
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.decorators import protected_resource
from oauth2_provider.models import AccessToken

_lock = threading.Lock()
COUNTS: Counter[str] = Counter()


class CountTokenRequests:
    """Counts POSTs to the token endpoint by grant_type (the race test reads it), and
    API calls by path."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and request.path == "/o/token/":
            grant = parse_qs(request.body.decode()).get("grant_type", [""])[0]
            with _lock:
                COUNTS[grant] += 1
        elif request.path.startswith("/api/"):  # every API call, refused ones included
            with _lock:
                COUNTS[request.path] += 1
        return self.get_response(request)


LOGIN_FORM = """<!doctype html><title>Provider login</title><form method="post">
<input type="hidden" name="next" value="{next}">
<label>Username <input name="username"></label>
<label>Password <input name="password" type="password"></label>
<button type="submit">Log in</button></form>"""


@csrf_exempt
def login_view(request: HttpRequest) -> HttpResponse:
    """GET: the form a browser sees; POST: log in, then on to `next` (the authorize URL)."""
    if request.method == "GET":
        return HttpResponse(LOGIN_FORM.format(next=escape(request.GET.get("next", ""))))
    user = authenticate(
        request, username=request.POST.get("username"), password=request.POST.get("password")
    )
    if user is None:
        return HttpResponse("bad login", status=403)
    login(request, user)
    target = request.POST.get("next", "")
    if target.startswith("/o/"):
        return HttpResponseRedirect(target)
    return HttpResponse("ok")


@protected_resource()
def echo(request: HttpRequest) -> HttpResponse:
    owner = request.resource_owner  # None for a client credentials token
    return JsonResponse({"user": owner.username if owner else None})


# RFC 6750's answer to a bad token (401 with a Bearer challenge), what an HTTP tool's
# one refresh-and-retry reacts to; `echo` above answers a bare 403.
@protected_resource(advertise_metadata=True, resource_metadata_url="http://127.0.0.1/meta")
def me(request: HttpRequest) -> HttpResponse:
    owner = request.resource_owner
    return JsonResponse({"user": owner.username if owner else None})


def always_401(request: HttpRequest) -> HttpResponse:
    """An API that refuses every token (a revoked grant the token endpoint still honours)."""
    response = HttpResponse(status=401)
    response["WWW-Authenticate"] = 'Bearer error="invalid_token"'
    return response


@protected_resource()
def userinfo(request: HttpRequest) -> HttpResponse:
    user = request.resource_owner
    return JsonResponse({"sub": str(user.pk), "email": user.email})


@csrf_exempt
def expire(request: HttpRequest) -> HttpResponse:
    """End an access token early on the server's side (its refresh token stays good), as a
    provider may: the console still thinks it fresh, so only the API's 401 tells."""
    checksum = hashlib.sha256(request.POST.get("token", "").encode()).hexdigest()
    ended = AccessToken.objects.filter(token_checksum=checksum).update(
        expires=timezone.now() - timedelta(seconds=1)
    )
    return HttpResponse(str(ended), status=200 if ended else 404)


def counts(request: HttpRequest) -> HttpResponse:
    with _lock:
        return HttpResponse(json.dumps(dict(COUNTS)), content_type="application/json")

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from tools_app.models import Tool


@login_required
def index(request: HttpRequest) -> HttpResponse:
    return redirect("tools")


@login_required
def tool_list(request: HttpRequest) -> HttpResponse:
    tools = Tool.objects.select_related("published_version")
    return render(request, "tools/list.html", {"tools": tools})


@login_required
def tool_detail(request: HttpRequest, name: str) -> HttpResponse:
    tool = get_object_or_404(Tool, name=name)
    return render(request, "tools/detail.html", {"tool": tool})

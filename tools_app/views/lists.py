"""Filtered, paginated lists whose results table htmx swaps in place (tools, runs)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers

from tools_app.views.htmx import HtmxHttpRequest

PER_PAGE = 25


def render_list(
    request: HtmxHttpRequest,
    template: str,
    *,
    form,
    rows: QuerySet | None,
    results_target: str,
    extra: dict | None = None,
    prepare: Callable[[Sequence], list] | None = None,
) -> HttpResponse:
    """Render a page of `rows` (None: the filter form is invalid, a 400 showing its errors).

    The search form and the page links swap only the results partial; a history restore
    (a cache miss after Back) or a plain request gets the whole page. `prepare` may replace
    the page's rows (to look up what they refer to, once per page)."""
    page = page_range = None
    if rows is not None:
        # get_page() turns a bad page number into page 1 and a too-high one into the last.
        page = Paginator(rows, PER_PAGE).get_page(request.GET.get("page"))
        page_range = page.paginator.get_elided_page_range(page.number, on_each_side=2)
        if prepare is not None:
            page.object_list = prepare(page.object_list)
    htmx = request.htmx
    partial = htmx.target == results_target and not htmx.history_restore_request
    context = {
        "form": form,
        "page": page,
        "page_range": page_range,
        "results_target": results_target,
        **(extra or {}),
    }
    response = render(
        request,
        f"{template}#results" if partial else template,
        context,
        status=400 if page is None else 200,
    )
    patch_vary_headers(response, ("HX-Request", "HX-Target"))
    return response

"""Progress counts (`progress`, `total` in an update, as MCP's notifications/progress):
the rules where updates are stored, each harness forwarding them through the real
sandbox, the stored run, the run page's bar and the agent API's run JSON."""

from __future__ import annotations

import math
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.support import in_ci
from tests.support.progress import add_count_progress
from tools_app.api.mcp import Counter
from tools_app.audit import Actor
from tools_app.models import Run, RunUpdate, Tool
from tools_app.models.runs import RunStatus, RunVia
from tools_app.models.tokens import AgentToken, Scope
from tools_app.runner import SUCCEEDED, Limits, RunRequest, run
from tools_app.runs import execute as run_execute
from tools_app.runs import progress
from tools_app.runs import start as run_start
from tools_app.runs.progress import BadProgress, Progress

FAST = Limits(timeout=20, grace_seconds=1)
ENTRY = {"python": "index.py", "typescript": "index.ts", "bash": "index.sh"}

# --------------------------------------------------------------------------------------
# The rules


@pytest.mark.parametrize(
    ("update", "expected", "percent"),
    [
        ({"content": [], "progress": 1, "total": 4}, Progress(1, 4), 25),
        ({"progress": 2, "total": 3}, Progress(2, 3), 66),  # rounded down: 100 means done
        ({"progress": 10, "total": 10}, Progress(10, 10), 100),
        ({"progress": 0, "total": 0.5}, Progress(0, 0.5), 0),
        ({"progress": 2.5, "total": 10}, Progress(2.5, 10), 25),
        ({"progress": 7}, Progress(7, None), None),  # MCP: the total may be unknown
        ({"progress": 7, "total": None}, Progress(7, None), None),
    ],
)
def test_it_reads_valid_counts(update, expected, percent) -> None:
    counted = progress.read(update)
    assert counted == expected
    assert counted.percent == percent


@pytest.mark.parametrize(
    "update", [{"content": []}, {"progress": None}, None, [1, 2], "progress", {"message": "x"}]
)
def test_it_reads_no_counts_where_there_are_none(update) -> None:
    assert progress.read(update) is None


@pytest.mark.parametrize(
    ("update", "problem"),
    [
        ({"progress": math.nan, "total": 3}, "progress must be a finite number, got NaN"),
        ({"progress": math.inf}, "progress must be a finite number, got Infinity"),
        ({"progress": 1, "total": -math.inf}, "total must be a finite number, got -Infinity"),
        # What the harnesses send for a value that is no finite number: its kind.
        ({"progress": "NaN", "total": 3}, "progress must be a finite number, got NaN"),
        ({"progress": "bigint"}, "progress must be a finite number, got a bigint"),
        ({"progress": "boolean"}, "progress must be a finite number, got a boolean"),
        ({"progress": "3", "total": 5}, "progress must be a finite number, got a string"),
        ({"progress": True, "total": 5}, "progress must be a finite number, got a boolean"),
        ({"progress": [1], "total": 5}, "progress must be a finite number, got an array"),
        ({"progress": 1, "total": {"n": 5}}, "total must be a finite number, got an object"),
        ({"progress": 10**400}, "progress must be a finite number, got a number too large"),
        ({"progress": -1, "total": 5}, "progress must be 0 or more"),
        ({"progress": 1, "total": 0}, "total must be more than 0"),
        ({"progress": 1, "total": -3}, "total must be more than 0"),
        ({"total": 5}, "total without progress"),
        ({"progress": None, "total": 5}, "total without progress"),
        ({"progress": 6, "total": 5}, "progress must not be more than total"),
    ],
)
def test_it_refuses_nonsense_and_says_why(update, problem) -> None:
    with pytest.raises(BadProgress) as caught:
        progress.read(update)
    assert str(caught.value) == problem


def test_a_refusal_never_repeats_what_the_tool_sent() -> None:
    # Notices are shown to every viewer of the run; the value could be anything.
    for value in ("sk-live-4242", {"secret": "sk-live-4242"}, ["sk-live-4242"]):
        with pytest.raises(BadProgress) as caught:
            progress.read({"progress": value, "total": 5})
        assert "4242" not in str(caught.value)


def test_it_shows_counts_as_people_read_them() -> None:
    assert [progress.shown(n) for n in (3.0, 2.5, 1 / 3, 1e6)] == ["3", "2.5", "0.33", "1000000"]


def test_mcp_notifications_use_the_tools_counts_and_never_go_back() -> None:
    counter = Counter()
    # Text-only updates before any count count the updates; then the tool's own counts;
    # a text-only update after them repeats the last count.
    seen = [counter.of(1, None, None), counter.of(2, 1.0, 4.0), counter.of(3, None, None)]
    assert seen == [(1.0, None), (1.0, 4.0), (1.0, 4.0)]
    assert counter.of(4, 4.0, 4.0) == (4.0, 4.0)


# --------------------------------------------------------------------------------------
# Each harness, in the real sandbox


def run_in_sandbox(tmp_path: Path, language: str, source: str) -> tuple[Any, list[dict]]:
    folder = tmp_path / "tools" / language
    folder.mkdir(parents=True)
    (folder / "TOOL.md").write_text(f"---\nname: t\ndescription: test\nlanguage: {language}\n---\n")
    (folder / ENTRY[language]).write_text(textwrap.dedent(source))
    updates: list[dict] = []
    request = RunRequest(
        folder, language, ENTRY[language], {}, "call-1", {}, {}, limits=FAST,
        work_root=tmp_path / "runs",
    )  # fmt: skip
    return run(request, on_update=updates.append), updates


def test_the_python_harness_forwards_counts_and_names_bad_ones(tmp_path: Path) -> None:
    outcome, updates = run_in_sandbox(
        tmp_path,
        "python",
        """
        def execute(tool_call_id, params, signal, on_update):
            text = [{"type": "text", "text": "one"}]
            on_update({"content": text, "progress": 1, "total": 4})
            on_update({"progress": 2.5, "total": 4})  # no content: progress alone
            on_update({"content": text, "progress": float("nan"), "total": 10**400})
            on_update({"content": text, "progress": True, "total": "4"})
            on_update({"content": text, "progress": object(), "total": None})
            on_update({"content": text})
            return {"content": [{"type": "text", "text": "done"}]}
        """,
    )
    assert outcome.status == SUCCEEDED, outcome.result
    assert [{k: v for k, v in u.items() if k != "content"} for u in updates] == [
        {"progress": 1, "total": 4},
        {"progress": 2.5, "total": 4},
        {"progress": "NaN", "total": "Infinity"},
        {"progress": "boolean", "total": "string"},
        {"progress": "object", "total": "null"},
        {},
    ]
    assert updates[1]["content"] == []


def test_the_node_harness_forwards_counts_and_names_bad_ones(tmp_path: Path) -> None:
    outcome, updates = run_in_sandbox(
        tmp_path,
        "typescript",
        """
        export async function execute(id: string, params: any, signal: AbortSignal,
                                      onUpdate: (u: any) => void) {
          const text = [{ type: "text", text: "one" }];
          onUpdate({ content: text, progress: 1, total: 4 });
          onUpdate({ progress: 2, total: 4 });
          onUpdate({ content: text, progress: NaN, total: Infinity });
          onUpdate({ content: text, progress: 10n, total: "4" });
          onUpdate({ content: text, progress: [1], total: null });
          onUpdate({ content: text });
          return { content: [{ type: "text", text: "done" }] };
        }
        """,
    )
    assert outcome.status == SUCCEEDED, outcome.result
    assert [{k: v for k, v in u.items() if k != "content"} for u in updates] == [
        {"progress": 1, "total": 4},
        {"progress": 2, "total": 4},
        {"progress": "NaN", "total": "Infinity"},
        {"progress": "bigint", "total": "string"},
        {"progress": "array", "total": "null"},
        {},
    ]
    assert updates[1]["content"] == []


def test_a_bash_tool_sends_counts_as_json_lines_on_fd_3(tmp_path: Path) -> None:
    outcome, updates = run_in_sandbox(
        tmp_path,
        "bash",
        """
        #!/bin/bash
        echo '{"progress": 1, "total": 2, "message": "half"}' >&3
        echo '{"progress": 2, "total": 2}' >&3
        echo '{"not": "progress"}' >&3
        echo 'plain text' >&3
        echo done
        """,
    )
    assert outcome.status == SUCCEEDED, outcome.result
    assert updates == [
        {"content": [{"type": "text", "text": "half"}], "progress": 1, "total": 2},
        {"content": [], "progress": 2, "total": 2},
        {"content": [{"type": "text", "text": '{"not": "progress"}'}]},
        {"content": [{"type": "text", "text": "plain text"}]},
    ]


# --------------------------------------------------------------------------------------
# Stored runs (run_execute.execute_run: what a worker does, with the real runner)


def start(tool_name: str, params: dict, via: str = RunVia.COMMAND, token=None) -> Run:
    tool = Tool.objects.get(name=tool_name)
    return run_start.start_run(
        tool.published_version, params, actor=Actor(token=token) if token else Actor.system(),
        via=via, enqueue=False,
    )  # fmt: skip


@pytest.mark.django_db
def test_it_runs_the_count_progress_tool_to_its_total() -> None:
    add_count_progress()
    run_row = start("count_progress", {"steps": 4, "delay_ms": 0})

    finished = run_execute.execute_run(run_row.pk)

    assert finished.status == RunStatus.SUCCEEDED, finished.result
    assert finished.result["content"][0]["text"] == "counted to 4"
    # In the sandbox, where bubblewrap is (CI has it: a missing one fails there).
    assert finished.isolation == ("bwrap" if in_ci() or shutil.which("bwrap") else "process")
    assert (finished.progress, finished.progress_total) == (4, 4)
    stored = list(RunUpdate.objects.filter(run=finished).values_list("progress", "total"))
    assert stored == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert not [n for n in finished.notices if "progress" in n]


@pytest.mark.django_db
def test_a_tool_sending_nonsense_keeps_its_run_its_text_and_its_good_counts(make_tool) -> None:
    make_tool(
        "hostile",
        language="python",
        source=textwrap.dedent(
            """
            def execute(tool_call_id, params, signal, on_update):
                say = lambda t: [{"type": "text", "text": t}]
                on_update({"content": say("a"), "progress": 1, "total": 3})
                for _ in range(50):
                    on_update({"content": say("b"), "progress": float("nan"), "total": 3})
                on_update({"content": say("c"), "progress": "sk-live-4242", "total": 3})
                on_update({"content": say("d"), "progress": 9, "total": 3})
                on_update({"content": say("e"), "progress": 2, "total": 0})
                on_update({"content": say("f")})
                return {"content": say("survived")}
            """
        ),
    )
    finished = run_execute.execute_run(start("hostile", {}).pk)

    assert finished.status == RunStatus.SUCCEEDED, finished.result
    assert finished.result["content"][0]["text"] == "survived"
    # The last good count stands; every update's text is kept.
    assert (finished.progress, finished.progress_total) == (1, 3)
    assert finished.updates.count() == 55
    assert finished.updates.filter(progress__isnull=False).count() == 1
    flagged = [n for n in finished.notices if n.startswith("progress ignored")]
    assert flagged == [
        "progress ignored in some updates: progress must be a finite number, got NaN"
        " (the updates' text is kept)",
        "progress ignored in some updates: progress must be a finite number, got a string"
        " (the updates' text is kept)",
        "progress ignored in some updates: progress must not be more than total"
        " (the updates' text is kept)",
        "progress ignored in some updates: total must be more than 0 (the updates' text is kept)",
    ]
    assert "4242" not in str(finished.notices)


# --------------------------------------------------------------------------------------
# The run page and the API (rows as a run leaves them)


def counted_run(developer, make_tool, progress_value=None, total=None) -> Run:
    make_tool("slow", language="python")
    run_row = run_start.start_run(
        Tool.objects.get(name="slow").published_version, {}, actor=Actor(user=developer),
        via=RunVia.BROWSER, enqueue=False,
    )  # fmt: skip
    Run.objects.filter(pk=run_row.pk).update(
        status=RunStatus.RUNNING, progress=progress_value, progress_total=total
    )
    return Run.objects.get(pk=run_row.pk)


def bar_of(html: str) -> str | None:
    start_at = html.find('<progress id="run-progress"')
    return None if start_at < 0 else html[start_at : html.index("</progress>", start_at)]


@pytest.mark.django_db
def test_the_run_page_shows_a_bar_with_the_percentage(developer, developer_client, make_tool):
    run_row = counted_run(developer, make_tool, 3, 8)

    html = developer_client.get(reverse("run", args=[run_row.pk])).content.decode()

    assert bar_of(html) == '<progress id="run-progress" max="8.0" value="3.0">37%'
    assert '<label for="run-progress">Progress</label>' in html
    assert '<span id="run-progress-text">37% <span class="muted">(3 of 8)</span>' in html
    # Inside the live part, near the status: every poll brings it again.
    live = html[html.index('id="run-live"') : html.index('id="inputs"')]
    assert live.index('id="run-status"') < live.index('id="run-progress"')


@pytest.mark.django_db
def test_the_poll_brings_the_bar_up_to_date(developer, developer_client, make_tool):
    run_row = counted_run(developer, make_tool, 1, 4)
    url = reverse("run_updates", args=[run_row.pk]) + "?after=0"
    assert "25%" in bar_of(developer_client.get(url, headers={"HX-Request": "true"}).text)

    Run.objects.filter(pk=run_row.pk).update(progress=4, status=RunStatus.SUCCEEDED)
    poll = developer_client.get(url, headers={"HX-Request": "true"}).content.decode()

    assert bar_of(poll) == '<progress id="run-progress" max="4.0" value="4.0">100%'


@pytest.mark.django_db
@pytest.mark.parametrize(("value", "total"), [(None, None), (5, None)])
def test_there_is_no_bar_without_a_total(developer, developer_client, make_tool, value, total):
    run_row = counted_run(developer, make_tool, value, total)
    html = developer_client.get(reverse("run", args=[run_row.pk])).content.decode()
    assert bar_of(html) is None and "run-progress" not in html


@pytest.mark.django_db
def test_only_those_who_may_read_the_output_see_the_bar(
    developer, viewer_client, make_tool
) -> None:
    run_row = counted_run(developer, make_tool, 3, 8)
    html = viewer_client.get(reverse("run", args=[run_row.pk])).content.decode()
    assert bar_of(html) is None


@pytest.mark.django_db
def test_the_api_gives_the_latest_count_and_each_updates() -> None:
    add_count_progress()
    token, raw = AgentToken.issue("agent", [Scope.TOOLS_INVOKE])
    client = Client(headers={"Authorization": f"Bearer {raw}"})
    run_row = start("count_progress", {"steps": 3, "delay_ms": 0}, via=RunVia.API, token=token)
    url = f"/api/v1/runs/{run_row.pk}"
    before = client.get(url).json()
    assert (before["progress"], before["total"]) == (None, None)

    run_execute.execute_run(run_row.pk)
    body = client.get(url).json()

    assert body["status"] == "succeeded"
    assert (body["progress"], body["total"]) == (3, 3)
    assert [(u["progress"], u["total"]) for u in body["updates"]] == [(1, 3), (2, 3), (3, 3)]
    # The run's latest count whatever `after` is: a poller that has every update sees it.
    after = client.get(f"{url}?after=3").json()
    assert after["updates"] == [] and (after["progress"], after["total"]) == (3, 3)

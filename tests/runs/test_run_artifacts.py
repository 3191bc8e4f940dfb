"""Run artifacts live where every web server can read them, whichever machine ran the
tool: in the database by default, or in a Django storage backend (CONSOLE_ARTIFACT_STORAGE)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from tests.support.worker import wait_for_run
from tools_app.audit import Actor
from tools_app.models import Run, RunArtifact
from tools_app.models.runs import FINISHED, ArtifactStore, RunStatus, RunVia
from tools_app.runner import teardown
from tools_app.runs import artifacts as run_artifacts
from tools_app.runs import execute as run_execute
from tools_app.runs import start as run_start

WRITER_PY = """
import os

def execute(tool_call_id, params, signal, on_update):
    out = os.environ["TOOL_OUTPUT_DIR"]
    os.makedirs(os.path.join(out, "sub"))
    with open(os.path.join(out, "sub", "report.txt"), "w") as f:
        f.write(params["text"])
    with open(os.path.join(out, "data.bin"), "wb") as f:
        f.write(bytes(range(256)) * 4)
    return {"content": [{"type": "text", "text": "wrote it"}]}
"""
TEXT = {"text": {"type": "string", "description": "What to write."}}


def start(tool, params: dict, starter, **kw) -> Run:
    # Started by the user who downloads: only a run's starter (or an admin) may.
    return run_start.start_run(
        tool.published_version, params, actor=Actor(user=starter), via=RunVia.BROWSER, **kw
    )


def download(client: Client, run: Run, name: str) -> bytes:
    artifact = run.artifacts.get(name=name)
    response = client.get(reverse("run_artifact", args=[run.pk, artifact.pk]))
    assert response.status_code == 200
    return b"".join(response.streaming_content)


@pytest.mark.django_db
def test_it_keeps_artifacts_in_the_database(make_tool, settings, developer, developer_client):
    tool = make_tool("writer", language="python", source=WRITER_PY, inputs=TEXT)

    run = run_execute.execute_run(start(tool, {"text": "report body"}, developer, enqueue=False).pk)

    assert run.status == RunStatus.SUCCEEDED
    # The runner's state (artifacts folder, work dirs) is gone: the web needs none of it.
    teardown.drain()  # the work dirs' own removal, in the background
    shutil.rmtree(Path(settings.ARTIFACTS_PATH).parent)
    assert download(developer_client, run, "sub/report.txt") == b"report body"
    assert download(developer_client, run, "data.bin") == bytes(range(256)) * 4
    rows = list(RunArtifact.objects.filter(run=run))
    assert [(a.name, a.size, a.store, a.path) for a in rows] == [
        ("data.bin", 1024, ArtifactStore.DATABASE, ""),
        ("sub/report.txt", 11, ArtifactStore.DATABASE, ""),
    ]
    # Listing artifacts (run pages, the API, admin) never loads their bytes.
    assert all(row.get_deferred_fields() == {"content"} for row in rows)


@pytest.mark.django_db
def test_it_keeps_artifacts_in_a_configured_storage(
    make_tool, settings, developer, developer_client, tmp_path: Path
):
    settings.ARTIFACT_STORAGE = "django.core.files.storage.FileSystemStorage"
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {
            "BACKEND": settings.ARTIFACT_STORAGE,
            "OPTIONS": {"location": str(tmp_path / "bucket")},
        },
    }
    tool = make_tool("writer", language="python", source=WRITER_PY, inputs=TEXT)

    run = run_execute.execute_run(start(tool, {"text": "in a bucket"}, developer, enqueue=False).pk)

    report = run.artifacts.get(name="sub/report.txt")
    assert report.store == ArtifactStore.STORAGE and report.content is None
    assert (tmp_path / "bucket" / report.path).read_bytes() == b"in a bucket"
    assert download(developer_client, run, "sub/report.txt") == b"in a bucket"
    # Gone from the storage: a 404, never a 500.
    (tmp_path / "bucket" / report.path).unlink()
    url = reverse("run_artifact", args=[run.pk, report.pk])
    assert developer_client.get(url).status_code == 404


@pytest.mark.django_db
def test_it_still_serves_artifacts_kept_as_files_before_0006(
    make_tool, settings, developer, developer_client
):
    tool = make_tool("writer", language="python", source=WRITER_PY, inputs=TEXT)
    run = run_execute.execute_run(start(tool, {"text": "x"}, developer, enqueue=False).pk)
    folder = Path(settings.ARTIFACTS_PATH) / str(run.pk)
    folder.mkdir(parents=True)
    (folder / "0001").write_bytes(b"old")
    old = RunArtifact.objects.create(
        run=run, name="old.txt", size=3, store=ArtifactStore.FILE, path=f"{run.pk}/0001"
    )
    escape = RunArtifact.objects.create(
        run=run, name="x", size=1, store=ArtifactStore.FILE, path="../../etc/passwd"
    )

    assert download(developer_client, run, "old.txt") == b"old"
    assert run_artifacts.open_artifact(escape) is None
    assert developer_client.get(reverse("run_artifact", args=[run.pk, old.pk])).status_code == 200


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_it_serves_what_a_worker_with_its_own_state_dir_produced(
    worker, make_tool, settings, developer, developer_client, tmp_path: Path
):
    """The web server (this process) and the worker have different state dirs, as on two
    machines: the artifact still downloads, through the pages and the agent API."""
    settings.ARTIFACTS_PATH = tmp_path / "web-state" / "artifacts"
    assert worker.state_dir != Path(settings.STATE_DIR)
    tool = make_tool("writer", language="python", source=WRITER_PY, inputs=TEXT)

    run = wait_for_run(start(tool, {"text": "from afar"}, developer).pk, FINISHED, worker=worker)

    assert run.status == RunStatus.SUCCEEDED, run.result
    assert download(developer_client, run, "sub/report.txt") == b"from afar"
    assert not list((worker.state_dir / "artifacts").glob(f"{run.pk}*"))

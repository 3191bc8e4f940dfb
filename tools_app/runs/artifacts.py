"""A run's artifacts: stored where every web server can read them (the database, or
storages["artifacts"]) when the run ends, and opened again wherever they are."""

from __future__ import annotations

import io
from pathlib import Path
from typing import IO

from django.conf import settings
from django.core.files import File
from django.core.files.storage import storages

from tools_app import runner
from tools_app.models import Run, RunArtifact
from tools_app.models.runs import ArtifactStore


def keep_artifacts(run: Run, artifacts: list[runner.Artifact]) -> None:
    """Store the runner's artifact files where every web server can read them, whichever
    machine ran the tool: in the database, or in storages["artifacts"] when
    CONSOLE_ARTIFACT_STORAGE names one. One at a time, so a worker holds at most one
    file (10 MiB) in memory. Storage names are numbered, never the name the tool chose."""
    use_storage = settings.ARTIFACT_STORAGE != "database"
    for index, artifact in enumerate(artifacts, start=1):
        row = RunArtifact(run=run, name=artifact.name[-255:], size=artifact.size)
        if use_storage:
            with open(artifact.path, "rb") as data:
                row.path = storages["artifacts"].save(f"runs/{run.pk}/{index:04d}", File(data))
            row.store = ArtifactStore.STORAGE
        else:
            row.content = artifact.path.read_bytes()
        row.save(force_insert=True)


def open_artifact(artifact: RunArtifact) -> IO[bytes] | None:
    """An artifact's bytes wherever they are stored, or None if they are gone."""
    if artifact.store == ArtifactStore.DATABASE:
        content = RunArtifact.objects.content_of(artifact.pk)
        return io.BytesIO(content) if content is not None else None
    if artifact.store == ArtifactStore.STORAGE:
        if settings.ARTIFACT_STORAGE == "database" or not artifact.path:
            return None
        try:
            return storages["artifacts"].open(artifact.path, "rb")
        except (OSError, ValueError):  # missing, or a name the storage refuses
            return None
    path = artifact_file(artifact)
    return open(path, "rb") if path is not None else None  # noqa: SIM115 (the caller closes)


def artifact_file(artifact: RunArtifact) -> Path | None:
    """The file of an artifact kept before 0006 (store `file`), or None if it is missing
    or would lie outside ARTIFACTS_PATH."""
    root = Path(settings.ARTIFACTS_PATH).resolve()
    path = (root / artifact.path).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        return None
    return path

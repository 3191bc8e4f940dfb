"""Starting a run: start_run() validates params, stores a queued Run (sensitive inputs
masked in `params`, their values sealed in `sealed_params`) and queues the Celery task once
the transaction commits. Views, the agent API, MCP and `run_tool` all start runs here; the
worker then executes them (runs/execute.py)."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from celery import current_app
from django.db import transaction
from django.utils import timezone

from tools_app.audit import Actor, record
from tools_app.catalog import presets
from tools_app.egress import config as egress_config
from tools_app.manifest import input_files, schema
from tools_app.manifest.toolmd import Manifest
from tools_app.models import Run, ToolVersion
from tools_app.models.runs import RunStatus, RunVia
from tools_app.ops import logcontext
from tools_app.runs.setup import error_result, manifest_of, seal

logger = logging.getLogger("tools_app.runs")

MASK = "••••••"
# The name tools_app/tasks.py registers execute_run under (and the worker knows it by).
EXECUTE_RUN_TASK = "tools_app.tasks.execute_run"
# The Celery message header that carries the request id to the worker (console/celery.py).
REQUEST_ID_HEADER = "console_request_id"


class InvalidParams(Exception):
    """The params do not match the tool's inputs; `errors` lists every problem."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors))


def start_run(
    version: ToolVersion,
    params: object,
    *,
    actor: Actor,
    via: str,
    timeout: float | None = None,
    enqueue: bool = True,
    replay_sample: str = "",
) -> Run:
    """Validate `params` against the version's inputs and store a queued run.

    Raises InvalidParams listing every problem. With `enqueue`, the Celery task is sent
    when the surrounding transaction commits (a worker never looks for a row that is not
    there yet); `run_tool` passes enqueue=False and calls execute_run() itself.
    `replay_sample`: a kind: http case replayed offline from that sample (runs/replay.py)."""
    manifest = manifest_of(version)
    # A model (MCP) never fills a user-only input; a person or a program may.
    model = via == RunVia.MCP
    try:
        preset = presets.for_run(version, manifest, user=actor.user, via=via)
    except presets.PresetError as exc:
        raise InvalidParams([str(exc)]) from None
    if model:
        # The model's own arguments: only what the model formats list. The presets it is
        # then given are the console's, not the model's (checked with them below).
        _own, errors = schema.validate_params(manifest, params, model=True)
        if errors:
            raise InvalidParams(errors)
    given = params if isinstance(params, dict) else {}
    from_preset = {n for n in preset.values if given.get(n) is None}
    if isinstance(params, dict):
        params = {**{n: preset.values[n] for n in from_preset}, **params}
    filled, errors = schema.validate_params(manifest, params)
    if errors:
        raise InvalidParams(_say_withheld(errors, preset.withheld))
    # Presets are read again when the run executes: never copied into the run record.
    filled = {k: v for k, v in filled.items() if k not in from_preset}
    shown, secret = split_sensitive(manifest, filled)
    request_id = logcontext.request_id.get()
    with transaction.atomic():
        run = Run.objects.create(
            tool=version.tool,
            version=version,
            via=via,
            user=actor.user,
            token=actor.token,
            params=shown,
            sealed_params=seal(secret),
            timeout=timeout,
            replay_sample=replay_sample,
            egress_allows=egress_config.admin_entries() if reaches_out(manifest) else [],
            request_id=request_id,
        )
        record(
            actor,
            "run.start",
            run,
            summary=f"ran {version.tool.name} v{version.number} ({via})",
            data={"tool": version.tool.name, "version": version.number, "via": via},
        )
        if enqueue:
            transaction.on_commit(partial(_enqueue_as, run.pk, request_id))
    logger.info(
        "run %s queued: %s v%s via %s",
        run.pk,
        version.tool.name,
        version.number,
        via,
        extra={"run_id": str(run.pk)},
    )
    return run


def _enqueue_as(run_id, request_id: str) -> None:
    """enqueue_run with the starting request's id, wherever the commit happens."""
    with logcontext.bound(request=request_id, run=str(run_id)):
        enqueue_run(run_id)


def _say_withheld(errors: list[str], withheld: tuple[presets.Withheld, ...]) -> list[str]:
    """A required input left empty because its sensitive preset is withheld says so."""
    why = {f"{w.name}: is required": w.reason for w in withheld}
    return [
        f"{e} (the tool's sensitive preset for it is withheld from this run: {why[e]})"
        if e in why
        else e
        for e in errors
    ]


def split_sensitive(manifest: Manifest, params: dict[str, Any]) -> tuple[dict, dict]:
    """(params with sensitive values masked, the sensitive values)."""
    shown, secret = {}, {}
    for name, value in params.items():
        spec = manifest.inputs.get(name)
        if spec is not None and spec.sensitive:
            shown[name] = MASK
            secret[name] = value
        elif spec is not None and spec.type in input_files.FILE_TYPES:
            # The bytes ride sealed until the run starts; the record keeps name and size.
            shown[name] = input_files.summary(value)
            secret[name] = value
        else:
            shown[name] = value
    return shown, secret


def reaches_out(manifest: Manifest) -> bool:
    """Whether a run of it makes connections the egress policy judges."""
    return manifest.kind == "http" or manifest.network


def enqueue_run(run_id) -> None:
    """Send the Celery task. A broker that refuses the message fails the run visibly
    instead of leaving it queued forever. Sent by name, as `.delay` would send it: the
    task (tools_app/tasks.py) calls into this module, which so never imports it. The
    current request id rides along in a header, for the worker's log lines."""
    try:
        current_app.send_task(
            EXECUTE_RUN_TASK,
            args=[str(run_id)],
            ignore_result=True,
            headers={REQUEST_ID_HEADER: logcontext.request_id.get()},
        )
    except Exception as exc:
        logger.exception("could not queue run %s", run_id)
        message = (
            "The run could not be queued: the task broker refused it "
            f"({type(exc).__name__}). Check CELERY_BROKER_URL and that it is reachable."
        )
        Run.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
            status=RunStatus.FAILED,
            error=message,
            result=error_result(message),
            sealed_params="",
            finished_at=timezone.now(),
        )

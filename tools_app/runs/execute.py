"""Tool runs: start, execute, cancel and reap them. No HTTP here.

Views, the agent API, `run_tool` and (later) MCP all go through these functions:

- start_run() validates params, stores a queued Run (sensitive inputs masked in `params`,
  their values encrypted in `sealed_params`) and queues the Celery task once the
  transaction commits;
- execute_run() claims a queued run with one conditional UPDATE (so a message delivered
  twice never runs a tool twice), runs it through tools_app.runner while a supervisor loop
  in the calling thread stores progress, beats the heartbeat and watches for cancel, then
  stores the outcome. The Celery task and `run_tool` both call it;
- cancel_run() cancels a queued run at once, or asks the worker to stop a running one;
- reap_lost_runs() marks running runs whose heartbeat stopped as `lost`, and re-sends
  queued runs no worker claimed within RUN_QUEUED_TIMEOUT_SECONDS, then marks them lost.

Every database write happens in the thread that called execute_run(): the runner runs in
a helper thread and talks to it through a queue. One thread, one connection, and tests
wrapped in a transaction see what the run wrote.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import queue
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import IO, Any

from celery import current_app
from django.conf import settings
from django.core.cache import caches
from django.core.files import File
from django.core.files.storage import storages
from django.db import DatabaseError, transaction
from django.utils import timezone

from tools_app import runner
from tools_app.audit import Actor, record
from tools_app.catalog import bundle, presets
from tools_app.checks import ConsoleWarning, warning_source
from tools_app.egress import config
from tools_app.http_tools import execute as http_execute
from tools_app.integrations import vault
from tools_app.integrations.environment import environment_for, readable_paths_for
from tools_app.integrations.errors import IntegrationError
from tools_app.integrations.paths import bindable
from tools_app.integrations.policy import secret_access
from tools_app.manifest import input_files, schema, toolmd
from tools_app.manifest.toolmd import Manifest
from tools_app.models import Run, RunArtifact, RunUpdate, Tool, ToolVersion
from tools_app.models.runs import ArtifactStore, RunStatus, RunVia
from tools_app.models.tools import Language, decode_files
from tools_app.runner import privilege, standby, teardown, tsstrip
from tools_app.runs import progress
from tools_app.runs.setup import RunSetupError, limits_for, work_dir

logger = logging.getLogger("tools_app.runs")

MASK = "••••••"
# How often the supervisor looks for a cancel request: well inside the 6 s budget that
# cancel has (the runner then gives the tool its grace period).
CANCEL_POLL_SECONDS = 0.25
# Label under which a sensitive input's value is redacted from everything stored.
SENSITIVE_LABEL = "{{{{input.{name}}}}}"
# At most this many tools' versions are stripped when a worker starts (warm_strip_cache).
WARM_VERSIONS = 500
WARM_CHUNK = 50

# The name tools_app/tasks.py registers execute_run under (and the worker knows it by).
EXECUTE_RUN_TASK = "tools_app.tasks.execute_run"

STATUS_OF_OUTCOME = {
    "succeeded": RunStatus.SUCCEEDED,
    "failed": RunStatus.FAILED,
    "cancelled": RunStatus.CANCELLED,
    "timed_out": RunStatus.TIMED_OUT,
}


class InvalidParams(Exception):
    """The params do not match the tool's inputs; `errors` lists every problem."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors))


def error_result(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


def manifest_of(version: ToolVersion) -> Manifest:
    """The version's manifest with its inputs in TOOL.md order (the form's order, and the
    order of "allowed: ..." in messages). The stored JSON loses that order on PostgreSQL
    (jsonb sorts keys), so the manifest comes from the TOOL.md text.

    Versions never change: each process keeps the parsed manifest (the "local" cache),
    keyed by id and content hash. An unsaved stand-in (the editor's next draft) has
    neither, so it is parsed each time."""
    local = caches["local"]
    key = f"manifest:{version.pk}:{version.sha256}" if version.pk else None
    manifest = local.get(key) if key else None
    if manifest is None:
        parsed = toolmd.parse_toolmd(version.toolmd)
        # A version stored under older, looser rules: trust the stored manifest.
        manifest = parsed.manifest or Manifest.from_dict(version.manifest)
        if key:
            local.set(key, manifest, None)
    return manifest


# --------------------------------------------------------------------------------------
# Start


def start_run(
    version: ToolVersion,
    params: object,
    *,
    actor: Actor,
    via: str,
    timeout: float | None = None,
    enqueue: bool = True,
) -> Run:
    """Validate `params` against the version's inputs and store a queued run.

    Raises InvalidParams listing every problem. With `enqueue`, the Celery task is sent
    when the surrounding transaction commits (a worker never looks for a row that is not
    there yet); `run_tool` passes enqueue=False and calls execute_run() itself."""
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
            egress_allows=config.admin_entries() if reaches_out(manifest) else [],
        )
        record(
            actor,
            "run.start",
            run,
            summary=f"ran {version.tool.name} v{version.number} ({via})",
            data={"tool": version.tool.name, "version": version.number, "via": via},
        )
        if enqueue:
            transaction.on_commit(partial(enqueue_run, run.pk))
    return run


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


def seal(values: dict[str, Any]) -> str:
    if not values:
        return ""
    token, _key_id = vault.encrypt(json.dumps(values))
    return token


def unseal(token: str) -> dict[str, Any]:
    if not token:
        return {}
    try:
        return json.loads(vault.decrypt(token, what="the run's sensitive inputs"))
    except vault.VaultError as exc:
        raise RunSetupError(str(exc)) from None


def enqueue_run(run_id) -> None:
    """Send the Celery task. A broker that refuses the message fails the run visibly
    instead of leaving it queued forever. Sent by name, as `.delay` would send it: the
    task (tools_app/tasks.py) calls into this module, which so never imports it."""
    try:
        current_app.send_task(EXECUTE_RUN_TASK, args=[str(run_id)], ignore_result=True)
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


# --------------------------------------------------------------------------------------
# Execute


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def claim(run_id) -> bool:
    """queued -> running, for exactly one caller however often the task is delivered."""
    now = timezone.now()
    updated = Run.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING,
        started_at=now,
        heartbeat_at=now,
        worker=worker_name()[:200],
        # The sealed values were read just before; they must not outlive the start.
        sealed_params="",
    )
    return updated == 1


def execute_run(
    run_id,
    *,
    on_progress: Callable[[list[dict[str, Any]]], None] | None = None,
    reload: bool = True,
) -> Run | None:
    """Run a queued run to its end in this process. Returns the finished run, or None
    when it was not queued (already taken, cancelled, or unknown). With reload=False (the
    Celery task, which ignores it) the finished row is not read back: one query less per
    run, and None is returned."""
    run = Run.objects.select_related("tool", "version").filter(pk=run_id).first()
    if run is None:
        logger.warning("run %s does not exist; nothing to do", run_id)
        return None
    sealed = run.sealed_params
    if not claim(run.pk):
        logger.info("run %s is not queued any more; skipped", run_id)
        return None
    try:
        _execute(run, sealed, on_progress)
    except RunSetupError as exc:
        _finish_without_tool(run, str(exc))
    except Exception as exc:
        logger.exception("run %s failed inside the console", run.pk)
        _finish_without_tool(
            run,
            f"The console failed while running the tool ({type(exc).__name__}); "
            "its log has the details.",
        )
    finally:
        # After the runner's own teardown of the run (same queue, in order), off the
        # worker's way to its next run.
        teardown.submit(partial(shutil.rmtree, work_dir(run), ignore_errors=True))
    if not reload:
        return None
    run.refresh_from_db()
    return run


def warm_strip_cache() -> int:
    """Strip the types of what TypeScript runs use unless they name a version (the
    published versions of enabled tools) into the worker's cache (runner/tsstrip.py), so
    a pool process's first run of each finds them stripped; how many files got
    JavaScript. Nothing when runs do not use the cache (no bubblewrap: no standby
    sandbox) or it is unusable."""
    if "typescript" not in standby.STANDBY_LANGUAGES or runner.isolation_level()[0] != "bwrap":
        return 0
    cache = tsstrip.cache_dir(Path(settings.RUNS_WORK_PATH))
    if cache is None:
        return 0
    return tsstrip.warm(_warm_versions(), cache)


def _warm_versions() -> Iterator[dict[str, bytes]]:
    """The files of the versions warm_strip_cache strips, most recently changed tools
    first, WARM_CHUNK versions per query: a tool may hold MAX_TOOL_BYTES."""
    from tools_app.ops.heartbeat import holding_forks

    tools = Tool.objects.published().filter(language=Language.TYPESCRIPT)
    ids = tools.order_by("-updated_at").values_list("published_version_id", flat=True)
    with holding_forks():  # called in the worker's main process, which forks the pool
        found = list(ids[:WARM_VERSIONS])
    for start in range(0, len(found), WARM_CHUNK):
        chunk = ToolVersion.objects.filter(pk__in=found[start : start + WARM_CHUNK])
        with holding_forks():
            versions = list(chunk.values_list("files", flat=True))
        yield from (decode_files(files) for files in versions)


def _execute(
    run: Run, sealed: str, on_progress: Callable[[list[dict[str, Any]]], None] | None
) -> None:
    manifest = manifest_of(run.version)
    entry = run.version.entry
    if entry is None and manifest.kind != "http":
        raise RunSetupError(f"version {run.version.number} has no entry file to run")
    secret_params = unseal(sealed)
    params = {**run.params, **secret_params}
    # Who may use a secret is decided when the run starts, so an admin's switch applies
    # to runs already queued. Withheld integrations give no variables and no paths.
    access = secret_access(run.version, manifest.integrations, user=run.user, via=run.via)
    notices = access.notices()
    env, secrets = integration_environment(access.granted)
    for name, value in secret_params.items():
        spec = manifest.inputs.get(name)
        if isinstance(value, str) and (spec is None or spec.sensitive):
            secrets[SENSITIVE_LABEL.format(name=name)] = value
        elif isinstance(value, list) and spec is not None and spec.sensitive:
            # A sensitive list (string[]): each item may travel alone (?key=a&key=b).
            for index, item in enumerate(value):
                if isinstance(item, str):
                    secrets[SENSITIVE_LABEL.format(name=f"{name}.{index}")] = item
    # Decided again here, like the integrations: an admin's switch (or a publish) applies
    # to runs already queued, and a run path that skipped start_run still gets no secret.
    try:
        preset = presets.for_run(run.version, manifest, user=run.user, via=run.via)
    except presets.PresetError as exc:
        raise RunSetupError(str(exc)) from None
    secrets |= preset.secrets
    from_preset = sorted(n for n in preset.values if params.get(n) is None)
    params |= {name: preset.values[name] for name in from_preset}
    for withheld in preset.withheld:
        spec = manifest.inputs[withheld.name]
        if params.get(withheld.name) is None and not (spec.optional or spec.has_default):
            raise RunSetupError(
                f"{withheld.name}: is required, and the tool's sensitive preset for it was "
                f"withheld from this run: {withheld.reason}."
            )
    notices = [*notices, *preset.notices()]
    if from_preset:
        notices = [*notices, f"Filled from the tool's presets: {', '.join(from_preset)}."]
    if manifest.kind == "http":  # no tool code: the console makes the request

        def policy(slugs: tuple[str, ...] | list[str]):
            return tool_policy(slugs, run.egress_allows)

        perform = http_execute.performer(run, manifest, params, access, secrets, policy)
        supervisor = Supervisor(run, None, on_progress, perform=perform)
        outcome = supervisor.run()
        _finish(run, outcome, [*notices, *supervisor.notices])
        return

    root = work_dir(run)
    tool_dir = materialize(run.version, root / "tool")
    params, files, file_params = input_files.files_for_code(manifest, params)
    request = runner.RunRequest(
        tool_dir=tool_dir,
        language=manifest.language,
        entry=entry,
        params=params,
        input_files=files,
        file_params=file_params,
        tool_call_id=str(run.pk),
        env=env,
        secrets=secrets,
        network=manifest.network,
        limits=limits_for(manifest, run.timeout),
        work_root=root,
        ro_binds=readable_paths(access.granted, notices),
        # Only granted integrations open their URLs: a withheld one gives no way out either.
        egress=tool_policy(access.granted, run.egress_allows) if manifest.network else None,
    )
    supervisor = Supervisor(run, request, on_progress)
    outcome = supervisor.run()
    _finish(run, outcome, [*notices, *supervisor.notices])


def reaches_out(manifest: Manifest) -> bool:
    """Whether a run of it makes connections the egress policy judges."""
    return manifest.kind == "http" or manifest.network


def tool_policy(slugs: tuple[str, ...] | list[str], admin_entries: list[str] | None = None):
    """The egress policy of a run: the settings' allow list, the System page's exceptions
    (`admin_entries`, the run's copy; None reads them) and the URLs of the integrations
    the run was granted (tools_app/egress/config.py)."""
    from tools_app.egress import policy as egress_policy

    try:
        return config.tool_policy(slugs, admin_entries)
    except egress_policy.PolicyError as exc:
        raise RunSetupError(f"The egress policy is invalid: {exc}") from None


def readable_paths(
    slugs: tuple[str, ...] | list[str], notices: list[str] | None = None
) -> tuple[Path, ...]:
    """Host paths the sandbox may read: shared input folders from settings and the
    declared integrations' path fields (bound read-only by the runner). Protected paths
    (the state dir, the project, DATA_PATH, keys, the database) are left out with a notice,
    whenever and however they were configured."""
    notices = [] if notices is None else notices
    paths = bindable(
        [Path(p) for p in settings.TOOL_INPUT_DIRS], notices, source="CONSOLE_TOOL_INPUT_DIRS"
    )
    if slugs:
        paths += readable_paths_for(slugs, notices)
    return tuple(paths)


def integration_environment(slugs: tuple[str, ...] | list[str]) -> tuple[dict, dict]:
    """(env vars, redaction labels -> values) of the given integrations only."""
    if not slugs:
        return {}, {}
    try:
        return environment_for(list(slugs))
    except (IntegrationError, vault.VaultError) as exc:
        raise RunSetupError(str(exc)) from None


def materialize(version: ToolVersion, dest: Path) -> Path:
    """Write the version's files into a fresh folder the sandbox mounts read-only."""
    files = version.file_bytes()
    bundle.check_files(files)
    dest.mkdir(parents=True, mode=0o755)
    for rel, data in files.items():
        target = dest / bundle.safe_relpath(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(bundle.file_mode(rel))
    return dest


@dataclass
class _Done:
    outcome: runner.RunOutcome | None = None
    error: BaseException | None = None


class Supervisor:
    """Runs the runner in a helper thread; this thread stores its progress updates,
    beats the heartbeat and turns a cancel request (or a reaped run) into the cancel
    event. Only this thread touches the database."""

    def __init__(
        self,
        run: Run,
        request: runner.RunRequest | None,
        on_progress: Callable[[list[dict[str, Any]]], None] | None = None,
        perform: Callable[..., runner.RunOutcome] | None = None,
    ) -> None:
        self.run_row = run
        self.request = request
        # `perform(on_update=, cancel=)` instead of the runner: an http tool
        # (http_tools/execute.py).
        self.perform = perform or partial(runner.run, request)
        self.on_progress = on_progress
        self.events: queue.SimpleQueue = queue.SimpleQueue()
        self.cancel = threading.Event()
        self.seq = 0
        self.progress_problems: list[str] = []

    def _target(self) -> None:
        try:
            outcome = self.perform(on_update=self.events.put, cancel=self.cancel)
        except BaseException as exc:  # reported to the supervising thread
            self.events.put(_Done(error=exc))
        else:
            self.events.put(_Done(outcome=outcome))

    def run(self) -> runner.RunOutcome:
        thread = threading.Thread(target=self._target, name=f"run-{self.run_row.pk}", daemon=True)
        thread.start()
        beat_every = float(settings.RUN_HEARTBEAT_SECONDS)
        next_beat = time.monotonic() + beat_every
        next_poll = time.monotonic() + CANCEL_POLL_SECONDS
        done: _Done | None = None
        while done is None:
            try:
                done = self._wait(min(next_beat, next_poll))
            except KeyboardInterrupt:
                # `run_tool` interrupted with Ctrl-C: stop the tool like a cancel.
                self.cancel.set()
                continue
            now = time.monotonic()
            if done is None and now >= next_poll:
                self._poll_cancel()
                next_poll = now + CANCEL_POLL_SECONDS
            if done is None and now >= next_beat:
                self._beat()
                next_beat = now + beat_every
        thread.join()
        if done.error is not None:
            raise done.error
        assert done.outcome is not None
        return done.outcome

    def _wait(self, deadline: float) -> _Done | None:
        """Store the updates that arrive before `deadline`; the outcome, once it comes."""
        try:
            first = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None
        items = [first]
        # Take what is already waiting too, so a burst is stored with one INSERT.
        while True:
            try:
                items.append(self.events.get_nowait())
            except queue.Empty:
                break
        done = next((item for item in items if isinstance(item, _Done)), None)
        self._store_updates([item for item in items if not isinstance(item, _Done)])
        return done

    def _store_updates(self, updates: list[dict[str, Any]]) -> None:
        if not updates:
            return
        rows = []
        latest: progress.Progress | None = None
        for update in updates:
            self.seq += 1
            content = update.get("content", []) if isinstance(update, dict) else []
            row = RunUpdate(run_id=self.run_row.pk, seq=self.seq, content=content)
            try:
                counted = progress.read(update)
            except progress.BadProgress as exc:
                self._flag(str(exc))
                counted = None
            if counted is not None:
                row.progress, row.total = counted.progress, counted.total
                latest = counted
            rows.append(row)
        try:
            RunUpdate.objects.bulk_create(rows)
            if latest is not None:
                # The latest count on the run itself: its page and the API read no updates
                # for it. One UPDATE per batch that has a count, not per update.
                Run.objects.filter(pk=self.run_row.pk).update(
                    progress=latest.progress, progress_total=latest.total
                )
        except DatabaseError:
            # Progress is best effort; a locked or busy database must not stop the run.
            logger.exception(
                "could not store %d progress updates of run %s", len(rows), self.run_row.pk
            )
        if self.on_progress is not None:
            for row in rows:
                self.on_progress(row.content)

    def _flag(self, problem: str) -> None:
        """One notice per kind of bad progress: a tool sending nonsense in a loop must not
        bury the run's other notices."""
        if problem not in self.progress_problems:
            self.progress_problems.append(problem)

    @property
    def notices(self) -> list[str]:
        return [
            f"progress ignored in some updates: {problem} (the updates' text is kept)"
            for problem in self.progress_problems
        ]

    def _poll_cancel(self) -> None:
        try:
            row = Run.objects.filter(pk=self.run_row.pk).values_list("cancel_requested").first()
        except DatabaseError:
            logger.exception("could not read the cancel flag of run %s", self.run_row.pk)
            return
        # A deleted run is not worth finishing either. One reaped as lost while alive
        # goes on: its real ending replaces `lost` (see _finish).
        if row is None or row[0]:
            self.cancel.set()

    def _beat(self) -> None:
        try:
            Run.objects.filter(pk=self.run_row.pk, status=RunStatus.RUNNING).update(
                heartbeat_at=timezone.now()
            )
        except DatabaseError:
            logger.exception("could not beat the heartbeat of run %s", self.run_row.pk)


def _finish(run: Run, outcome: runner.RunOutcome, notices: list[str] | None = None) -> None:
    """Store the outcome; `notices` (the console's own, e.g. a withheld integration) come
    before the runner's."""
    status = STATUS_OF_OUTCOME.get(outcome.status, RunStatus.FAILED)
    # A transaction only to store artifacts with the status: alone, the UPDATE is atomic
    # (and BEGIN/COMMIT would be two more statements on every run).
    with transaction.atomic() if outcome.artifacts else contextlib.nullcontext():
        # A run reaped as lost while it was in fact alive gets its real ending.
        updated = Run.objects.filter(
            pk=run.pk, status__in=(RunStatus.RUNNING, RunStatus.LOST)
        ).update(
            status=status,
            result=outcome.result,
            stderr_tail=outcome.stderr_tail,
            notices=[*(notices or []), *outcome.notices],
            isolation=outcome.isolation,
            isolation_reason=isolation_reason(outcome.isolation)[:500],
            spare=outcome.spare,
            network_policy=outcome.network_policy,
            cpu_limit=outcome.cpu_limit,
            response=outcome.response,
            exit_code=outcome.exit_code,
            duration=outcome.duration,
            error="",
            finished_at=timezone.now(),
        )
        if updated:
            _keep_artifacts(run, outcome.artifacts)
        else:
            logger.warning("run %s ended elsewhere meanwhile; its outcome is dropped", run.pk)


def isolation_reason(isolation: str) -> str:
    """Why this host runs tools without bubblewrap ("" when it uses it)."""
    if isolation == "bwrap":
        return ""
    level, reason = runner.isolation_level()
    return reason if level != "bwrap" else ""


@warning_source
def isolation_warnings() -> list[ConsoleWarning]:
    """The banner (and `manage.py check`) line when tools run without bubblewrap here."""
    level, reason = runner.isolation_level()
    if level == "bwrap" or privilege.refusal(level, reason):
        return []  # a root worker refuses instead: checks.runner_warnings says so
    return [
        ConsoleWarning(
            f"Tools run in the fallback sandbox (a plain subprocess with rlimits and a cleared "
            f"environment), not bubblewrap: {reason}. Install the Debian package bubblewrap "
            "and allow unprivileged user namespaces for full isolation.",
            "Tools run without bubblewrap",
        )
    ]


def _keep_artifacts(run: Run, artifacts: list[runner.Artifact]) -> None:
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


def _finish_without_tool(run: Run, message: str) -> None:
    """The tool never ran (or the console broke around it): a failed run with the reason."""
    Run.objects.filter(pk=run.pk, status__in=(RunStatus.RUNNING, RunStatus.LOST)).update(
        status=RunStatus.FAILED,
        error=message,
        result=error_result(message),
        finished_at=timezone.now(),
    )


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


# --------------------------------------------------------------------------------------
# Cancel and reap


def cancel_run(run: Run, actor: Actor) -> bool:
    """Cancel a queued run at once; ask the worker to stop a running one (it polls the
    flag every CANCEL_POLL_SECONDS, then the tool gets its grace period). Returns whether
    anything changed; `run` is refreshed."""
    now = timezone.now()
    message = f"Cancelled by {actor.label} before it started."
    changed = bool(
        Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
            status=RunStatus.CANCELLED,
            cancel_requested=True,
            sealed_params="",
            result=error_result(message),
            finished_at=now,
        )
    )
    if not changed:
        changed = bool(
            Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING, cancel_requested=False).update(
                cancel_requested=True
            )
        )
    if changed:
        record(actor, "run.cancel", run, summary=f"cancelled a run of {run.tool.name}")
    run.refresh_from_db()
    return changed


def _lost_cutoff():
    return timezone.now() - timedelta(seconds=settings.RUN_LOST_AFTER_SECONDS)


def reap_lost_runs(run_ids: list | None = None) -> int:
    """What the periodic reaper does: running runs whose worker died turn `lost`, queued
    runs no worker claimed are sent again, then turn `lost` (reap_unclaimed_runs).
    Returns how many runs turned lost."""
    return reap_dead_runs(run_ids) + reap_unclaimed_runs(run_ids)


def reap_dead_runs(run_ids: list | None = None) -> int:
    """Mark running runs whose heartbeat is older than RUN_LOST_AFTER_SECONDS as lost:
    their worker died. Returns how many."""
    cutoff = _lost_cutoff()
    candidates = Run.objects.stale(cutoff)
    if run_ids is not None:
        candidates = candidates.filter(pk__in=run_ids)
    reaped = 0
    for run in candidates.select_related("tool").only("pk", "tool__name", "worker"):
        message = (
            "The worker running this tool stopped answering (no heartbeat for "
            f"{settings.RUN_LOST_AFTER_SECONDS} s); the run is lost. Its side effects, if "
            "any, are unknown: check before running it again."
        )
        # Conditional again: a heartbeat may have arrived since the SELECT.
        if (
            Run.objects.stale(cutoff)
            .filter(pk=run.pk)
            .update(
                status=RunStatus.LOST,
                error=message,
                result=error_result(message),
                finished_at=timezone.now(),
            )
        ):
            reaped += 1
            record(
                Actor.system(),
                "run.lost",
                run,
                summary=f"a run of {run.tool.name} lost its worker ({run.worker or 'unknown'})",
            )
    return reaped


def _queued_cutoff():
    return timezone.now() - timedelta(seconds=settings.RUN_QUEUED_TIMEOUT_SECONDS)


def _duration(seconds: float) -> str:
    if seconds >= 120 and seconds % 60 == 0:
        return f"{int(seconds // 60)} minutes"
    return f"{seconds:g} s"


def reap_unclaimed_runs(run_ids: list | None = None) -> int:
    """A queued run no worker claimed within RUN_QUEUED_TIMEOUT_SECONDS is sent again once
    (its message may have been lost; a run is claimed once however often it is delivered);
    still unclaimed a timeout later, it is marked lost with what to check. Returns how many
    turned lost."""
    cutoff = _queued_cutoff()
    candidates = Run.objects.unclaimed(cutoff)
    if run_ids is not None:
        candidates = candidates.filter(pk__in=run_ids)
    timeout = _duration(settings.RUN_QUEUED_TIMEOUT_SECONDS)
    lost = 0
    for run in candidates.select_related("tool").only("pk", "resent_at", "tool__name"):
        if run.resent_at is None:
            # Conditional: one reaper re-sends it, and only if still unclaimed.
            if Run.objects.filter(
                pk=run.pk, status=RunStatus.QUEUED, resent_at__isnull=True
            ).update(resent_at=timezone.now()):
                logger.warning("run %s not picked up within %s; sending it again", run.pk, timeout)
                record(
                    Actor.system(),
                    "run.resend",
                    run,
                    summary=f"a run of {run.tool.name} waited {timeout} for a worker; sent again",
                )
                enqueue_run(run.pk)
            continue
        message = (
            f"No worker picked this run up within {timeout}, nor within {timeout} after it "
            "was sent again; is a worker running? An admin can check on the System page "
            "(/system/). The tool did not run: start it again once a worker is up."
        )
        if Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED, resent_at__lt=cutoff).update(
            status=RunStatus.LOST,
            error=message,
            result=error_result(message),
            sealed_params="",
            finished_at=timezone.now(),
        ):
            lost += 1
            record(
                Actor.system(),
                "run.lost",
                run,
                summary=f"a run of {run.tool.name} was never picked up by a worker",
            )
    return lost


def prune_worker_heartbeats() -> int:
    """Forget workers not seen for a day (a killed worker cannot remove its own row)."""
    from tools_app.models import WorkerHeartbeat

    cutoff = timezone.now() - timedelta(days=1)
    return WorkerHeartbeat.objects.filter(seen_at__lt=cutoff).delete()[0]


def reap_if_stale(run: Run) -> Run:
    """Pages and the API call this on a run they show: even with no worker left to run the
    periodic reaper, a dead run turns `lost` when someone looks at it."""
    if run.status == RunStatus.RUNNING:
        beat = run.heartbeat_at or run.started_at
        if beat is not None and beat < _lost_cutoff() and reap_dead_runs([run.pk]):
            run.refresh_from_db()
    elif run.status == RunStatus.QUEUED:
        # Likewise a queued run past its timeout is re-sent, then lost, when looked at.
        waited_since = run.resent_at or run.created_at
        if waited_since < _queued_cutoff():
            reap_unclaimed_runs([run.pk])
            run.refresh_from_db()
    return run


__all__ = [
    "MASK",
    "InvalidParams",
    "RunVia",
    "cancel_run",
    "execute_run",
    "reap_lost_runs",
    "start_run",
]

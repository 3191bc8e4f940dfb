"""Executing a run in the worker. No HTTP here.

execute_run() claims a queued run with one conditional UPDATE (so a message delivered
twice never runs a tool twice), checks a published version's signature (check_signature),
runs it through tools_app.runner while a supervisor loop in the calling thread stores
progress, beats the heartbeat and watches for cancel, then stores the outcome. The Celery
task and `run_tool` both call it; a kind: http tool's request is made by
tools_app/http_tools/execute.py under the same supervisor.

Every database write happens in the thread that called execute_run(): the runner runs in
a helper thread and talks to it through a queue. One thread, one connection, and tests
wrapped in a transaction see what the run wrote."""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from tools_app import runner
from tools_app.analytics import rollup
from tools_app.catalog import bundle, presets
from tools_app.config_warnings import ConsoleWarning, warning_source
from tools_app.egress import config as egress_config
from tools_app.http_tools import execute as http_execute
from tools_app.integrations import ledger, vault
from tools_app.integrations.environment import deliveries_for, readable_paths_for
from tools_app.integrations.errors import IntegrationError
from tools_app.integrations.paths import bindable
from tools_app.integrations.policy import secret_access
from tools_app.manifest import input_files
from tools_app.models import Run, RunUpdate, Tool, ToolVersion
from tools_app.models.runs import RunStatus
from tools_app.models.tools import Language, decode_files
from tools_app.runner import privilege, standby, teardown, tsstrip
from tools_app.runs import progress, replay
from tools_app.runs.artifacts import keep_artifacts
from tools_app.runs.setup import (
    RunSetupError,
    error_result,
    limits_for,
    manifest_of,
    unseal,
    work_dir,
)
from tools_app.signing import versions as signed_versions

logger = logging.getLogger("tools_app.runs")

# How often the supervisor looks for a cancel request: well inside the 6 s budget that
# cancel has (the runner then gives the tool its grace period).
CANCEL_POLL_SECONDS = 0.25
# Label under which a sensitive input's value is redacted from everything stored.
SENSITIVE_LABEL = "{{{{input.{name}}}}}"
# At most this many tools' versions are stripped when a worker starts (warm_strip_cache).
WARM_VERSIONS = 500
WARM_CHUNK = 50
STATUS_OF_OUTCOME = {
    "succeeded": RunStatus.SUCCEEDED,
    "failed": RunStatus.FAILED,
    "cancelled": RunStatus.CANCELLED,
    "timed_out": RunStatus.TIMED_OUT,
}


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
    # With its case (a LEFT JOIN, no statement more): whether to refresh a check after it;
    # its starter, whom the integration policy and the secret-usage ledger name.
    run = (
        Run.objects.select_related("tool", "version", "case_run", "user", "token")
        .filter(pk=run_id)
        .first()
    )
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
    # A case's run: evaluate it now, so its check completes (and a publish gate
    # publishes) with no page open.
    case_run = getattr(run, "case_run", None)
    if case_run is not None:
        replay.refresh_check(case_run.case_check_id)
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
    check_signature(run)
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
    # A case replayed offline (http tools only) reads no integration: nothing is sent, and
    # an OAuth token's refresh would be a request.
    offline = bool(run.replay_sample)
    if offline and manifest.kind != "http":
        raise RunSetupError("offline replay from a sample is for kind: http tools only")
    env, secrets = ({}, {}) if offline else integration_environment(access.granted, run)
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

        if offline:
            perform = http_execute.sample_performer(run, manifest, secrets)
        else:
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
        outputs=manifest.outputs,
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


def check_signature(run: Run) -> None:
    """A version that was published runs only as it was signed (issue 26): a database
    edit of its files or its description fails the run before any of it runs. The very
    objects checked are the ones run (materialize, the http request), so nothing can change
    in between. Drafts were never signed: developers run them on purpose."""
    version = run.version
    if version.published_at is None:
        return
    version.tool = run.tool
    problems = signed_versions.verify(version)
    if problems:
        raise RunSetupError(
            f"Version {version.number} of {run.tool.name} does not match its signature, so "
            f"it was not run: {'; '.join(problems)}. Someone changed the stored version; an "
            "admin must publish a reviewed version again."
        )


def tool_policy(slugs: tuple[str, ...] | list[str], admin_entries: list[str] | None = None):
    """The egress policy of a run: the settings' allow list, the System page's exceptions
    (`admin_entries`, the run's copy; None reads them) and the URLs of the integrations
    the run was granted (tools_app/egress/config.py)."""
    from tools_app.egress import policy as egress_policy

    try:
        return egress_config.tool_policy(slugs, admin_entries)
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


def integration_environment(
    slugs: tuple[str, ...] | list[str], run: Run | None = None
) -> tuple[dict, dict]:
    """(env vars, redaction labels -> values) of the given integrations only. For a run,
    the secret-usage ledger records what it received first (Vault's rule: no ledger row,
    no secret): if that fails, the run does not start."""
    if not slugs:
        return {}, {}
    try:
        env, labels, delivered = deliveries_for(list(slugs))
    except (IntegrationError, vault.VaultError) as exc:
        raise RunSetupError(str(exc)) from None
    if run is not None:
        try:
            run.ledger_grant = ledger.append(run, delivered)
        except ledger.LedgerWriteError as exc:
            logger.error(
                "run %s: the secret-usage ledger could not be written (%s)",
                run.pk,
                exc,
                exc_info=exc.__cause__,
            )
            raise RunSetupError(
                "The secret-usage ledger could not be written, so the run was not started "
                f"(the tool received no secret; {exc}). An admin must check the database."
            ) from None
    return env, labels


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
        ending = {
            "status": status,
            "result": outcome.result,
            "stderr_tail": outcome.stderr_tail,
            "notices": [*(notices or []), *outcome.notices],
            "isolation": outcome.isolation,
            "isolation_reason": isolation_reason(outcome.isolation)[:500],
            "spare": outcome.spare,
            "network_policy": outcome.network_policy,
            "cpu_limit": outcome.cpu_limit,
            "response": outcome.response,
            "exit_code": outcome.exit_code,
            "duration": outcome.duration,
            "error": "",
            "finished_at": timezone.now(),
        }
        updated = Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(**ending)
        # A run reaped as lost while it was in fact alive gets its real ending, and its
        # hour's analytics are read from the runs again (one more statement, only then).
        if not updated and Run.objects.filter(pk=run.pk, status=RunStatus.LOST).update(**ending):
            updated = 1
            rollup.invalidate(run)
        if updated:
            keep_artifacts(run, outcome.artifacts)
            ledger_outcome(run, status)
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


def _finish_without_tool(run: Run, message: str) -> None:
    """The tool never ran (or the console broke around it): a failed run with the reason."""
    ending = {
        "status": RunStatus.FAILED,
        "error": message,
        "result": error_result(message),
        "finished_at": timezone.now(),
    }
    if Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(**ending):
        ledger_outcome(run, RunStatus.FAILED)
    elif Run.objects.filter(pk=run.pk, status=RunStatus.LOST).update(**ending):
        rollup.invalidate(run)  # as in _finish
        ledger_outcome(run, RunStatus.FAILED)


def ledger_outcome(run: Run, status: str) -> None:
    """The run's ending on its secret-usage ledger rows, if it has any. The tool has run
    by now: a failure here is logged (verify_ledger then shows the row still running)."""
    grant = getattr(run, "ledger_grant", None)
    try:
        ledger.record_outcome(grant, str(status))
    except DatabaseError:
        logger.exception("could not record the outcome of run %s in the ledger", run.pk)

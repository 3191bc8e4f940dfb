"""The embedded broker: kombu's filesystem transport, made safe to share between processes.

kombu's own transport creates a message file and then writes it, and a consumer polling the
folder can move and read the file in between: it gets an empty file, `json.loads` raises,
and the Celery worker stops with "Unrecoverable error" (celery/kombu#1551). This subclass

- writes each message to a temporary name in the same folder (one that never matches a
  consumer's `*.<queue>.msg` pattern) and os.replace()s it into place, so a message file is
  visible only when complete;
- claims a message with one atomic rename into a `.claimed` folder beside the queue (one
  consumer wins, the others move on; kombu's shutil.move into /tmp may copy across file
  systems, which is neither atomic nor exclusive);
- moves a file that is empty, not JSON or not a message aside into a quarantine folder
  with a logged warning, and goes on with the next one instead of crashing the worker.

settings.py selects it (CELERY_BROKER_TRANSPORT) whenever CELERY_BROKER_URL is
`filesystem://`, the default. Transport options, besides kombu's: `quarantine_folder`
(default `<data_folder_in>/.quarantine`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import uuid
from pathlib import Path
from queue import Empty
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads
from kombu.utils.objects import cached_property

logger = logging.getLogger("tools_app.broker")

# Temporary names start with a dot and end in .part: kombu matches
# `name.partition(".")[2] == "<queue>.msg"`, which such a name never satisfies.
TMP_PREFIX = ".incoming-"
TMP_SUFFIX = ".part"
CLAIMED = ".claimed"
QUARANTINE = ".quarantine"


class BadMessage(ValueError):
    """A message file that cannot be delivered; the text says why."""


class Channel(filesystem.Channel):
    # Exchange tables (which queues an exchange routes to) have the same flaw: kombu
    # truncates and rewrites them in place, and a publisher reading one meanwhile finds no
    # queue and routes the message nowhere. They are replaced atomically here too, and
    # writers take turns on a lock file.

    def get_table(self, exchange):
        file = self._exchange_file(exchange)
        try:
            data = file.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ChannelError(f"Cannot open {file}") from exc
        try:
            return [filesystem.exchange_queue_t(*q) for q in loads(bytes_to_str(data))]
        except (ValueError, TypeError) as exc:
            raise ChannelError(f"Exchange table {file} is corrupt; restart the worker") from exc

    def queue_bind(self, queue, exchange=None, routing_key="", arguments=None, **kwargs):
        exchange = exchange or "amq.direct"
        if self.state.has_binding(queue, exchange, routing_key):
            # Declared by another connection of this process (state is per process), which
            # may not have written the table yet: a message published now would be routed
            # nowhere. Make sure the binding is on disk (idempotent, under the lock).
            meta = self.typeof(exchange).prepare_bind(queue, exchange, routing_key, arguments)
            self._queue_bind(exchange, *meta)
            return
        super().queue_bind(queue, exchange, routing_key, arguments, **kwargs)

    def _queue_bind(self, exchange, routing_key, pattern, queue):
        file = self._exchange_file(exchange)
        value = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._table_lock():
            try:
                queues = self.get_table(exchange)
            except ChannelError:
                logger.warning("broker: rebuilding corrupt exchange table %s", file)
                queues = []
            if value not in queues:
                self._write_table(file, [value, *queues])

    def _delete(self, queue, exchange, routing_key, pattern, *args, **kwargs):
        filesystem.virtual.Channel._delete(
            self, queue, exchange, routing_key, pattern, *args, **kwargs
        )
        file = self._exchange_file(exchange)
        value = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._table_lock():
            queues = self.get_table(exchange)
            if value in queues:
                queues.remove(value)
                self._write_table(file, queues)

    @contextlib.contextmanager
    def _table_lock(self):
        self.control_folder.mkdir(parents=True, exist_ok=True)
        with open(self.control_folder / ".lock", "a") as f:
            filesystem.lock(f, filesystem.LOCK_EX)
            try:
                yield
            finally:
                filesystem.unlock(f)

    def _write_table(self, file: Path, queues: list) -> None:
        fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=TMP_SUFFIX, dir=file.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(str_to_bytes(dumps(queues)))
            os.replace(tmp, file)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise ChannelError(f"Cannot write {file}") from exc

    def _put(self, queue, payload, **kwargs):
        """Write the message beside its final name, then rename it into place."""
        folder = self.data_folder_out
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        data = str_to_bytes(dumps(payload))
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=TMP_SUFFIX, dir=folder)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, os.path.join(folder, name))
        except OSError as exc:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            raise ChannelError(f"Cannot add file {name!r} to directory {folder!r}") from exc

    def _get(self, queue):
        """The oldest complete message of `queue`; bad files are quarantined on the way."""
        queue_find = f"{queue}.msg"
        for filename in sorted(os.listdir(self.data_folder_in)):
            if filename.partition(".")[2] != queue_find:
                continue
            claimed = self.claimed_folder / filename
            try:
                os.rename(os.path.join(self.data_folder_in, filename), claimed)
            except FileNotFoundError:
                continue  # another consumer took it
            except OSError:
                logger.warning("broker: cannot claim message file %s", filename, exc_info=True)
                continue
            try:
                payload = self._read(claimed)
            except BadMessage as exc:
                self._quarantine(claimed, str(exc))
                continue
            self._done(claimed)
            return payload
        raise Empty()

    def _read(self, path: Path) -> dict:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise BadMessage(f"unreadable ({exc.strerror or exc})") from None
        if not raw.strip():
            raise BadMessage("empty file")
        try:
            payload = loads(bytes_to_str(raw))
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
            raise BadMessage(f"not valid JSON ({exc})") from None
        try:
            # What the consumer will do with it: a payload it cannot turn into a message
            # would raise in the worker's loop just the same.
            self.Message(payload, channel=self)
        except Exception as exc:
            raise BadMessage(f"not a kombu message ({type(exc).__name__}: {exc})") from None
        return payload

    def _quarantine(self, claimed: Path, reason: str) -> None:
        target = self.quarantine_folder / claimed.name
        try:
            os.replace(claimed, target)
        except OSError:
            logger.warning(
                "broker: message file %s is bad (%s) and could not be quarantined; removed",
                claimed.name,
                reason,
                exc_info=True,
            )
            claimed.unlink(missing_ok=True)
            return
        logger.warning(
            "broker: quarantined message file %s (%s) as %s; the worker goes on. A run it "
            "carried stays queued until the reaper re-sends it.",
            claimed.name,
            reason,
            target,
        )

    def _done(self, claimed: Path) -> None:
        try:
            if self.store_processed:
                os.replace(claimed, Path(self.processed_folder) / claimed.name)
            else:
                claimed.unlink()
        except OSError:
            logger.warning("broker: cannot remove delivered message %s", claimed, exc_info=True)

    @cached_property
    def claimed_folder(self) -> Path:
        # Inside the queue folder: the same file system, so the claim is one atomic rename.
        folder = Path(self.data_folder_in) / CLAIMED
        folder.mkdir(mode=0o700, exist_ok=True)
        return folder

    @cached_property
    def quarantine_folder(self) -> Path:
        folder = Path(
            self.transport_options.get("quarantine_folder")
            or Path(self.data_folder_in) / QUARANTINE
        )
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        return folder


class Transport(filesystem.Transport):
    Channel = Channel
    # Its own state, not kombu's filesystem transport's (exchange bindings live in files).
    global_state = filesystem.virtual.BrokerState()


def quarantined(folder: str | os.PathLike) -> list[Path]:
    """The message files set aside in `folder`, oldest first (for the System page)."""
    try:
        return sorted(Path(folder).glob("*.msg"))  # names start with the send time
    except OSError:
        return []

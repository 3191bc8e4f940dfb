"""The host's process table, read from /proc: who belongs to a run, and how much memory."""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Proc:
    pid: int
    state: str  # "Z": a zombie, already dead
    ppid: int
    pgid: int
    sid: int
    comm: str
    rss: int  # bytes


def read_proc(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            raw = stat_file.read()
    except OSError:
        return None  # gone meanwhile
    # The command name is in parentheses and may itself hold spaces or parentheses.
    open_at, close_at = raw.find(b"("), raw.rfind(b")")
    fields = raw[close_at + 2 :].split()
    try:
        return Proc(
            pid=pid,
            state=fields[0].decode(errors="replace"),
            ppid=int(fields[1]),
            pgid=int(fields[2]),
            sid=int(fields[3]),
            comm=raw[open_at + 1 : close_at].decode(errors="replace"),
            rss=int(fields[21]) * PAGE_SIZE,
        )
    except (IndexError, ValueError):
        return None


def process_table() -> dict[int, Proc]:
    table: dict[int, Proc] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (proc := read_proc(int(name))) is not None:
            table[proc.pid] = proc
    return table


def run_members(root: int, table: dict[int, Proc], *, same_session: bool) -> set[int]:
    """`root` and its descendants; with `same_session`, also whatever shares its session or
    process group (orphans of a plain subprocess are re-parented away from `root`)."""
    children: dict[int, list[int]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    members: set[int] = set()
    stack = [root] if root in table else []
    while stack:
        pid = stack.pop()
        if pid not in members:
            members.add(pid)
            stack.extend(children.get(pid, ()))
    if same_session:
        members |= {p.pid for p in table.values() if root in (p.sid, p.pgid)}
    return members


def depth(pid: int, table: dict[int, Proc]) -> int:
    """How many ancestors of `pid` the table knows."""
    seen: set[int] = set()
    while pid in table and pid not in seen:
        seen.add(pid)
        pid = table[pid].ppid
    return len(seen)


def send(pids: set[int] | list[int], signum: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def send_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)

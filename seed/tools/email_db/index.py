"""email_db: read-only SQL over the email SQLite database named by env EMAIL_DB_PATH."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

DEFAULT_MAX_ROWS = 100
MAX_MAX_ROWS = 10000
CELL_CHARS = 200  # table cells; the json format keeps full values
MAX_OUTPUT_CHARS = 500_000  # below the console's 1 MiB result limit, with room for notes
PROGRESS_EVERY_OPS = 10_000  # SQLite VM steps between abort checks

SCHEMA_HINT = (
    "List the tables with: SELECT name, sql FROM sqlite_schema WHERE type IN ('table', 'view')"
)

# Pragmas that only read: usable as table-valued functions, e.g. pragma_table_info('messages').
READ_ONLY_PRAGMAS = frozenset(
    {
        "table_info",
        "table_xinfo",
        "table_list",
        "index_list",
        "index_info",
        "index_xinfo",
        "foreign_key_list",
        "collation_list",
        "function_list",
        "module_list",
        "pragma_list",
        "database_list",
        "compile_options",
    }
)
DENIED_FUNCTIONS = frozenset({"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"})
ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE})

LEADING_COMMENTS = re.compile(r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?(?:\*/|\Z))*", re.DOTALL)


class ToolError(Exception):
    """A problem the caller can fix; its message becomes the error result."""


def _result(text: str, is_error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def _progress(on_update: Callable[[dict[str, Any]], Any] | None, text: str) -> None:
    if on_update is None:
        return
    # A broken progress channel must not fail the query.
    with contextlib.suppress(Exception):
        on_update({"content": [{"type": "text", "text": text}]})


def _aborted(signal: Any) -> bool:
    return bool(getattr(signal, "aborted", False))


def _int_param(value: Any, name: str, default: int, low: int, high: int) -> int:
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise ToolError(f"{name} must be an integer, got {value!r}")
    try:
        number = int(value) if not isinstance(value, float) or value.is_integer() else None
    except (TypeError, ValueError):
        number = None
    if number is None:
        raise ToolError(f"{name} must be an integer, got {value!r}")
    if not low <= number <= high:
        raise ToolError(f"{name} must be between {low} and {high}, got {number}")
    return number


def _check_sql(sql: Any) -> str:
    if not isinstance(sql, str) or not sql.strip():
        raise ToolError(f"sql is required (one SELECT statement). {SCHEMA_HINT}")
    body = LEADING_COMMENTS.sub("", sql, count=1)
    keyword = re.match(r"[A-Za-z]+", body)
    if keyword is None or keyword.group(0).upper() not in {"SELECT", "WITH"}:
        found = keyword.group(0).upper() if keyword else body[:20]
        raise ToolError(
            f"only a single SELECT (or WITH ... SELECT) statement is allowed, not {found}: "
            "email_db is read-only"
        )
    return sql


def _authorizer(action: int, arg1: str | None, arg2: str | None, db: str | None, src: Any) -> int:
    """Allow reading only: a second line of defence behind mode=ro and the SELECT check."""
    if action in ALLOWED_ACTIONS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        name = (arg2 or "").lower()
        return sqlite3.SQLITE_DENY if name in DENIED_FUNCTIONS else sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in READ_ONLY_PRAGMAS:
        return sqlite3.SQLITE_OK
    # Writes, ATTACH/DETACH, writing pragmas, transactions, schema changes, ANALYZE...
    return sqlite3.SQLITE_DENY


def _database_path() -> str:
    path = os.environ.get("EMAIL_DB_PATH", "").strip()
    if not path:
        raise ToolError(
            "email_db is not configured: EMAIL_DB_PATH is not set. Ask an admin to configure "
            'the "email_db" integration (the path of the email SQLite database) and to add it '
            "to this tool."
        )
    if not os.path.exists(path):
        raise ToolError(
            f"the email database {path} does not exist (or is not visible to the tool's "
            'sandbox); check the path in the "email_db" integration'
        )
    if not os.path.isfile(path):
        raise ToolError(f"EMAIL_DB_PATH {path} is not a file; it must name a SQLite database")
    return path


def _connect(path: str, signal: Any) -> sqlite3.Connection:
    uri = f"file:{urllib.parse.quote(path)}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
        conn.execute("PRAGMA query_only = ON")
        # Reading the schema here surfaces "file is not a database" before the user's query.
        conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()
    except sqlite3.DatabaseError as exc:
        raise ToolError(f"cannot open the email database {path}: {exc}") from exc
    _prepare_pragma_tables(conn)
    conn.set_authorizer(_authorizer)
    # A non-zero return interrupts the running statement ("interrupted").
    conn.set_progress_handler(lambda: 1 if _aborted(signal) else 0, PROGRESS_EVERY_OPS)
    return conn


def _prepare_pragma_tables(conn: sqlite3.Connection) -> None:
    """Instantiate the read-only pragma_* tables before the authorizer is installed.

    SQLite registers an eponymous virtual table on first use with what the authorizer sees
    as UPDATEs of sqlite_master; doing it here lets the authorizer keep denying all updates.
    """
    for name in sorted(READ_ONLY_PRAGMAS):
        # Names come from the fixed allow-list; a pragma missing from this build is skipped.
        with contextlib.suppress(sqlite3.Error):
            conn.execute(f"SELECT 1 FROM pragma_{name} LIMIT 0").fetchall()  # noqa: S608


def _explain_sql_error(exc: sqlite3.Error) -> str:
    message = str(exc)
    if "not authorized" in message or "prohibited" in message:
        return (
            f"SQL refused ({message}): email_db is read-only; only SELECT queries without "
            "ATTACH, writing pragmas or extensions are allowed"
        )
    if "one statement at a time" in message:
        return "only one SQL statement per call is allowed; remove the extra statements"
    if "no such table" in message or "no such column" in message:
        return f"SQL error: {message}. {SCHEMA_HINT}"
    if "readonly" in message or "read-only" in message:
        return f"SQL refused ({message}): email_db is read-only"
    return f"SQL error: {message}"


def _cell_value(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<blob: {len(value)} bytes>"
    return value


def _cell_text(value: Any) -> str:
    value = _cell_value(value)
    if value is None:
        return "NULL"
    text = str(value).replace("\r\n", "\n").replace("\n", "\\n").replace("\t", " ")
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def _format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_cell_text(v) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(values: Sequence[str]) -> str:
        return " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    lines = [line(columns), "-+-".join("-" * w for w in widths)]
    lines += [line(row) for row in cells]
    return "\n".join(lines)


def _format_json(columns: Sequence[str], rows: Sequence[Sequence[Any]], truncated: bool) -> str:
    objects = [{col: _cell_value(v) for col, v in zip(columns, row, strict=True)} for row in rows]
    document = {"columns": list(columns), "rows": objects, "row_count": len(rows)}
    document["truncated"] = truncated
    return json.dumps(document, ensure_ascii=False, indent=1, default=str)


def _render(columns: list[str], rows: list[tuple[Any, ...]], more: bool, fmt: str) -> str:
    """Format rows, dropping trailing rows while the text exceeds the output budget."""
    shown = rows
    while True:
        cut = more or len(shown) < len(rows)
        if fmt == "json":
            text = _format_json(columns, shown, cut)
        elif columns:
            text = _format_table(columns, shown)
        else:
            text = "(the statement returned no columns)"
        if len(text) <= MAX_OUTPUT_CHARS or len(shown) <= 1:
            break
        shown = shown[: max(1, len(shown) * MAX_OUTPUT_CHARS // len(text) - 1)]
    if fmt == "json":
        return text
    count = f"({len(shown)} row{'s' if len(shown) != 1 else ''}"
    if len(shown) < len(rows):
        count += f"; output cut to fit the result size limit, {len(rows)} rows were fetched"
    if more:
        count += "; more rows exist: raise max_rows or narrow the query with WHERE/LIMIT/OFFSET"
    return f"{text}\n{count})"


def _run_query(
    conn: sqlite3.Connection, sql: str, max_rows: int
) -> tuple[list[str], list[tuple[Any, ...]], bool]:
    cursor = conn.execute(sql)
    columns = [d[0] for d in cursor.description or ()]
    fetched = cursor.fetchmany(max_rows + 1) if columns else []
    return columns, fetched[:max_rows], len(fetched) > max_rows


def execute(
    tool_call_id: str,
    params: dict[str, Any],
    signal: Any,
    on_update: Callable[[dict[str, Any]], Any] | None,
) -> dict[str, Any]:
    params = params or {}
    try:
        sql = _check_sql(params.get("sql"))
        max_rows = _int_param(params.get("max_rows"), "max_rows", DEFAULT_MAX_ROWS, 1, MAX_MAX_ROWS)
        fmt = str(params.get("format") or "table").strip().lower()
        if fmt not in {"table", "json"}:
            raise ToolError(f"format must be table or json, got {fmt!r}")
        path = _database_path()
        _progress(on_update, "opening the email database")
        conn = _connect(path, signal)
    except ToolError as exc:
        return _result(f"Error: {exc}", is_error=True)

    try:
        if _aborted(signal):
            return _result("cancelled", is_error=True)
        _progress(on_update, "running query")
        try:
            columns, rows, more = _run_query(conn, sql, max_rows)
        except sqlite3.Warning as exc:  # raised for multiple statements on some Pythons
            return _result(f"Error: {_explain_sql_error(exc)}", is_error=True)
        except sqlite3.Error as exc:
            if _aborted(signal):
                return _result("cancelled", is_error=True)
            return _result(f"Error: {_explain_sql_error(exc)}", is_error=True)
        _progress(on_update, f"fetched {len(rows)} row{'s' if len(rows) != 1 else ''}")
        return _result(_render(columns, rows, more, fmt))
    finally:
        conn.close()

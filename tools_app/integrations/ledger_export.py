"""The secret-usage ledger as CSV or JSON Lines, streamed row by row (Django admin's
export links, tools_app/admin.py). Every column, hashes included, so an export can be
checked against the chain; never a value (the ledger holds none)."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator

from django.db.models import QuerySet
from django.utils import timezone

from tools_app.integrations.ledger import GRANT_FIELDS
from tools_app.models import SecretUse

CHUNK = 500
COLUMNS = (*GRANT_FIELDS, "outcome", "prev_hash", "row_hash", "outcome_mac")


def _record(row: SecretUse) -> dict:
    record = {name: getattr(row, name) for name in COLUMNS}
    record["created_at"] = timezone.localtime(row.created_at).isoformat()
    record["run_id"] = str(row.run_id)
    return record


def _cell(value) -> str:
    if isinstance(value, list):
        value = " ".join(str(v) for v in value)
    text = "" if value is None else str(value)
    # CSV injection: =, +, -, @ (and tab/CR) start a formula in spreadsheets.
    return f"'{text}" if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def csv_lines(rows: QuerySet[SecretUse]) -> Iterator[str]:
    class Echo:
        def write(self, value: str) -> str:
            return value

    writer = csv.writer(Echo())
    yield writer.writerow(COLUMNS)
    for row in rows.iterator(chunk_size=CHUNK):
        record = _record(row)
        yield writer.writerow([_cell(record[name]) for name in COLUMNS])


def jsonl_lines(rows: QuerySet[SecretUse]) -> Iterator[str]:
    for row in rows.iterator(chunk_size=CHUNK):
        yield json.dumps(_record(row), ensure_ascii=False) + "\n"


FORMATS: dict[str, tuple[str, Callable[[QuerySet[SecretUse]], Iterator[str]]]] = {
    "csv": ("text/csv; charset=utf-8", csv_lines),
    "jsonl": ("application/x-ndjson; charset=utf-8", jsonl_lines),
}

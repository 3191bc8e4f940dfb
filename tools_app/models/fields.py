from __future__ import annotations

import json
from typing import Any

from django.db import models

from tools_app.lib import nesting


class OrderedJSONField(models.TextField):
    """JSON stored as text. PostgreSQL's jsonb reorders object keys, and the order of a
    manifest's inputs matters: it is the order of form fields and schema properties."""

    def from_db_value(self, value: str | None, expression, connection) -> Any:
        return None if value is None else json.loads(value)

    def to_python(self, value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value

    def get_prep_value(self, value: Any) -> str | None:
        return None if value is None else json.dumps(value, ensure_ascii=False)

    def value_to_string(self, obj: models.Model) -> str:
        return json.dumps(self.value_from_object(obj), ensure_ascii=False)


class StoredJSONField(models.JSONField):
    """A JSONField that loads what it stored whatever the stack depth: values stored
    before the nesting cap (tools_app/lib/nesting.py) can be ~900 levels deep, which
    json.loads refuses with RecursionError when the caller is already deep in frames."""

    def from_db_value(self, value, expression, connection) -> Any:
        try:
            return super().from_db_value(value, expression, connection)
        except RecursionError:
            if not isinstance(value, str):
                raise
            return nesting.loads_on_fresh_stack(value, cls=self.decoder)

"""The secret-usage ledger for a run started through MCP (/mcp on a live console, a real
worker): the worker writes the row before the tool starts, and the ending fills it in."""

from __future__ import annotations

import pytest

from tests.api.test_mcp import mcp_call, token
from tests.support import integrations as support
from tests.support.worker import CeleryWorker
from tools_app.integrations import ledger
from tools_app.models import Run, SecretUse
from tools_app.models.runs import RunStatus, RunVia

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

SECRET = "ledger-mcp-token-fedcba9876543210"
LENGTH_PY = """
import os

def execute(tool_call_id, params, signal, on_update):
    return {"content": [{"type": "text", "text": str(len(os.environ.get("SEARXNG_TOKEN", "")))}]}
"""


@pytest.fixture
def live(console_url: str, worker: CeleryWorker) -> str:
    return console_url


def test_it_records_an_mcp_run(live, make_tool):
    support.create("searxng", values={"url": "https://search.example"}, secrets={"token": SECRET})
    make_tool("search", language="python", source=LENGTH_PY, integrations=["searxng"])
    agent, raw = token()

    async def go(client):
        return await client.call_tool("search", {})

    result = mcp_call(live, raw, go)
    assert result.is_error is False and result.content[0].text == str(len(SECRET))
    run = Run.objects.get()
    [row] = SecretUse.objects.all()
    assert (row.run_id, row.via, row.token_id) == (run.pk, RunVia.MCP, agent.pk)
    assert row.token_name == "mcp-agent" and row.outcome == RunStatus.SUCCEEDED
    # The worker made the ledger's key; this process reads it from the database.
    assert [r.run_id for r in ledger.find_by_value(SECRET)] == [run.pk]
    assert ledger.verify() == (1, [])

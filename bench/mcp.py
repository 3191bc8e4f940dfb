"""Benchmark: a trivial tool called through MCP (/mcp, the official SDK's client) against
the same run through the REST API (invoke + long poll), and tools/list with many tools.

    .venv/bin/python bench/mcp.py [--runs 30] [--tools 1000] [--mode auto|legacy]

Sets up a throwaway console like bench/invoke.py (SQLite, gunicorn with 2 uvicorn workers
serving console.asgi, a real Celery worker with two processes, Redis when it answers).
Then, interleaved so machine load hits both alike, `--runs` times each:

- mcp: `tools/call` of the trivial tool in one open MCP session, timed from the call to
  the CallToolResult;
- rest: POST /api/v1/tools/trivial/invoke, then GET /api/v1/runs/<id>?wait=25 until the
  run has ended (bench/invoke.py's Api), timed from the POST to the result.

The medians and their ratio are printed (target: mcp <= 1.2 x rest). Then `--tools` tools
are published and `tools/list` is timed (median of 10) with the size of its JSON answer.
The last line printed is a JSON object."""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import time
from pathlib import Path

import anyio
from benchserver import REPO
from invoke import SETTLE_SECONDS, TRIVIAL_TS, Api, Console, pick_broker, publish

# This file is bench/mcp.py, and its folder is first on the path: without it there,
# `import mcp` (in measure()) finds the SDK rather than this script.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

TARGET_RATIO = 1.2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="calls of each kind")
    parser.add_argument("--tools", type=int, default=1000, help="tools for tools/list")
    parser.add_argument("--mode", default="auto", help="the SDK client's protocol mode")
    parser.add_argument("--broker", choices=("auto", "redis", "filesystem"), default="auto")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    with Console("bench-mcp-", pick_broker(args.broker), keep=args.keep) as console:
        token = prepare()
        result = anyio.run(measure, console.start(), token, args)
    print(
        f"\nmcp median {result['mcp_median_ms']} ms, rest median {result['rest_median_ms']} ms, "
        f"ratio {result['ratio']} (target <= {TARGET_RATIO}); tools/list of {result['tools']} "
        f"tools: {result['list_median_ms']} ms, {result['list_bytes']} bytes"
    )
    print(json.dumps(result))
    return 0


def prepare() -> str:
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command

    from tools_app.models import AgentToken

    call_command("migrate", verbosity=0)
    call_command("signing_keys", "create", "--if-missing", stdout=io.StringIO())  # publishing signs
    publish("trivial", TRIVIAL_TS)
    _, raw = AgentToken.issue("bench", ["registry:read", "tools:invoke"])
    return raw


async def measure(port: int, token: str, args: argparse.Namespace) -> dict:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    url = f"http://127.0.0.1:{port}/mcp"
    rest = Api(port, token)
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(url, http_client=http), mode=args.mode) as c:

        async def call(n: int) -> float:
            started = time.perf_counter()
            result = await c.call_tool("trivial", {"n": n})
            elapsed = time.perf_counter() - started
            if result.is_error or result.content[0].text != f"ok {n}":
                raise SystemExit(f"the MCP call failed: {result}")
            return elapsed

        def rest_call(n: int) -> float:
            started = time.perf_counter()
            body = rest.wait(rest.invoke("trivial", {"n": n}))
            elapsed = time.perf_counter() - started
            if body["status"] != "succeeded" or body["result"]["content"][0]["text"] != f"ok {n}":
                raise SystemExit(f"the REST run failed: {body['status']} {body['result']}")
            return elapsed

        for n in range(3):  # warm caches, connections and both worker processes
            await call(n)
            rest_call(n)
        through_mcp, through_rest = [], []
        for n in range(args.runs):
            await anyio.sleep(SETTLE_SECONDS)
            through_mcp.append(await call(n))
            await anyio.sleep(SETTLE_SECONDS)
            through_rest.append(rest_call(n))
            ms = (through_mcp[-1] * 1000, through_rest[-1] * 1000)
            print(f"call {n + 1:2d}: mcp {ms[0]:7.1f} ms   rest {ms[1]:7.1f} ms", flush=True)

        print(f"publishing {args.tools - 1} more tools", flush=True)
        await anyio.to_thread.run_sync(publish_many, args.tools - 1)
        # The server processes notice another process's publishing within REVISION_TTL
        # (tools_app/api/conditional.py): list only once they must have.
        from tools_app.api.conditional import REVISION_TTL

        await anyio.sleep(REVISION_TTL + 0.2)
        listing, size = [], 0
        for _ in range(10):
            started = time.perf_counter()
            tools = await c.session.list_tools()
            listing.append(time.perf_counter() - started)
            size = len(json.dumps(tools.model_dump(by_alias=True, exclude_none=True, mode="json")))
        protocol = c.protocol_version
        if len(tools.tools) != args.tools:
            raise SystemExit(f"tools/list gave {len(tools.tools)} tools, not {args.tools}")
    mcp_median, rest_median = statistics.median(through_mcp), statistics.median(through_rest)
    return {
        "runs": args.runs,
        "mode": args.mode,
        "protocol": protocol,
        "mcp_median_ms": round(mcp_median * 1000, 1),
        "rest_median_ms": round(rest_median * 1000, 1),
        "ratio": round(mcp_median / rest_median, 3),
        "target_ratio": TARGET_RATIO,
        "tools": args.tools,
        "list_median_ms": round(statistics.median(listing) * 1000, 1),
        "list_bytes": size,
    }


def publish_many(count: int) -> None:
    from django.db import close_old_connections

    for i in range(count):
        publish(f"bench_{i:04d}")
    close_old_connections()


if __name__ == "__main__":
    sys.exit(main())

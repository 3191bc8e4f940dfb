"""Settings of a console a test serves in its own process (tests/api/test_mcp.py): the
production settings, with the per-process memos off, so what a test just wrote is what
the server answers (the memos' bounded staleness is tested in test_api_registry.py)."""

from console.settings import *  # noqa: F403

CONSOLE_API_AUTH_CACHE_SECONDS = 0
CONSOLE_REGISTRY_REVISION_TTL = 0

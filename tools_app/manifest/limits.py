"""The caps a TOOL.md is held to (docs/tool-format.md): sizes, lengths and timeouts."""

from __future__ import annotations

from tools_app.lib import strictyaml

MAX_FRONTMATTER = 64 * 1024
MAX_TOOLMD = 256 * 1024
MAX_DESCRIPTION = 2000
MAX_VERSION = 2**31 - 1
MAX_TIMEOUT = 900
MAX_DEPTH = strictyaml.MAX_DEPTH
DEFAULT_TIMEOUT = 60

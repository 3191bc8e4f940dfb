"""kind: http tools: checks, runs, the shim, OpenAPI import (tools_app/http_tools/)."""

"""The generated index.js that lets a seed-rules loader run python, bash and http tools.

A loader that follows the seed's tool format only loads `index.ts`/`index.js` exporting
execute(toolCallId, params, signal, onUpdate). For a python or bash tool, what the console
mirrors (DATA_PATH/tools and the sync bundles) therefore carries an `index.js` rendered
from index.template.js: it runs the real entry with the runner's protocol (the python
harness, embedded from runner/harness/harness.py, or INPUT_<NAME> and fd 3 for bash).
A `kind: http` tool gets one rendered from index.http.template.js: it has no code to run
locally, so it invokes the tool through the console's agent API (CONSOLE_URL and
CONSOLE_TOKEN from the loader's environment) and follows the run. Integration secrets
and the egress policy stay in the console: the file holds the tool's name, nothing else
of the console's (not even its URL, which would make the mirrored file depend on the
request that asked for it, and the bundle's hash with it).

Both verify their own folder before they run anything: its .tool-signature.json against
keys.json and the root key beside the folders (docs/sync.md, "Verification"). The verifier
is the block between `// verify:begin` and `// verify:end` of the sync client
(clients/sync-tools.mjs), embedded as it is: one source for the client, the shims and
loaders.

`mirror_files` is the one place that decides what a mirrored tool holds, so the folder on
disk, the manifest's hashes and the bundle always agree."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from tools_app.runner.limits import Limits
from tools_app.runner.sandbox import HARNESS_DIR, harness_config

SHIM_PATH = "index.js"
TEMPLATE = Path(__file__).with_name("index.template.js")
HTTP_TEMPLATE = Path(__file__).with_name("index.http.template.js")
# The sync client: the checkout's clients/sync-tools.mjs, else the copy setup.py puts beside
# this module in a wheel (a worker machine has no checkout). Never a link: a checkout that
# travels without links would hold a file naming its target instead.
_CHECKOUT_CLIENT = Path(__file__).resolve().parents[3] / "clients" / "sync-tools.mjs"
SYNC_CLIENT = (
    _CHECKOUT_CLIENT if _CHECKOUT_CLIENT.is_file() else Path(__file__).with_name("sync-tools.mjs")
)
VERIFIER = SYNC_CLIENT
VERIFIER_BLOCK = re.compile(r"^// verify:begin\n.*?^// verify:end\n", re.M | re.S)
# A tool whose folder has one of these already is loadable as it is.
LOADABLE = ("index.ts", "index.js")
SHIMMED_LANGUAGES = ("python", "bash")
ENTRIES = {"python": "index.py", "bash": "index.sh"}


def needs_shim(files: Mapping[str, bytes], manifest: Mapping[str, Any]) -> bool:
    if any(name in files for name in LOADABLE):
        return False
    kind = manifest.get("kind", "code")
    if kind == "http":
        return True
    language = manifest.get("language", "typescript")
    return kind == "code" and language in SHIMMED_LANGUAGES and ENTRIES[language] in files


@cache
def _template() -> str:
    return TEMPLATE.read_text(encoding="utf-8")


@cache
def _http_template() -> str:
    return HTTP_TEMPLATE.read_text(encoding="utf-8")


@cache
def verifier() -> str:
    """The sync client's verifier block, its `export`s dropped (a shim exports execute only)."""
    found = VERIFIER_BLOCK.search(VERIFIER.read_text(encoding="utf-8"))
    if found is None:
        raise RuntimeError(f"{VERIFIER}: no // verify:begin ... // verify:end block")
    return re.sub(r"^export ", "", found.group(0), flags=re.M)


@cache
def _harness() -> str:
    return (HARNESS_DIR / "harness.py").read_text(encoding="utf-8")


@cache
def fingerprint() -> str:
    """Changes whenever the generated file would: part of the sync revision, so a console
    upgrade that changes a template, the harness or the verifier is a change clients see."""
    text = f"{_template()}\0{_harness()}\0{_http_template()}\0{verifier()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def render(manifest: Mapping[str, Any]) -> bytes:
    """The index.js for a python, bash or http tool described by `manifest`."""
    if manifest.get("kind", "code") == "http":
        return render_http(manifest)
    language = manifest["language"]
    config: dict[str, Any] = {
        "name": manifest["name"],
        "language": language,
        "entry": ENTRIES[language],
        "timeout": int(manifest.get("timeout") or Limits.timeout),
        "limits": harness_config(Limits()),
    }
    if language == "python":
        config["harness"] = _harness()
    text = _template().replace("__VERIFIER__", verifier())
    text = text.replace("__LANGUAGE__", language).replace("__ENTRY__", ENTRIES[language])
    return text.replace("__CONFIG__", json.dumps(config, indent=2)).encode("utf-8")


def render_http(manifest: Mapping[str, Any]) -> bytes:
    """The index.js for a `kind: http` tool: only its name goes in (never a secret, a URL
    of the tool's request or of the console)."""
    config = {"name": manifest["name"], "kind": "http"}
    text = _http_template().replace("__VERIFIER__", verifier())
    return text.replace("__CONFIG__", json.dumps(config, indent=2)).encode("utf-8")


def mirror_files(files: Mapping[str, bytes], manifest: Mapping[str, Any]) -> dict[str, bytes]:
    """A version's files as mirrored: with the generated index.js where one is needed."""
    mirrored = dict(files)
    if needs_shim(files, manifest):
        mirrored[SHIM_PATH] = render(manifest)
    return dict(sorted(mirrored.items()))

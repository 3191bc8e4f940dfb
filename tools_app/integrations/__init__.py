"""Integrations (docs/integrations.md): types, validation, write-only secrets, the runner's
environment, the connection test and key rotation.

One module per seam (validation, errors, types, fields, service, environment, connection,
rotation, paths, policy); every public name is re-exported here, so callers import from
`tools_app.integrations`.

Views, commands and Django admin all go through the functions here, so every change is
validated the same way, written in one transaction and audited with the names of the
fields that changed, never their values.

Integration types are YAML files `seed/integrations/<slug>.yaml`:

    label: SearXNG                      # required
    description: ...                    # required
    custom: false                       # true: admins define the fields per integration
    fields:                             # required unless custom
      - name: url                       # ^[a-z][a-z0-9_]{0,63}$, unique
        label: Base URL                 # defaults to name
        env: SEARXNG_URL                # the variable a tool receives; unique
        kind: url                       # string (default) | url | path
        secret: false                   # true: encrypted, write-only; kind must be string
        required: true
        default: ...                    # used when empty (not for secrets)
        help: ...
    test:                               # optional: a 2xx (or `expect`) means it works
      method: GET                       # GET | HEAD | POST
      url: "{url}/search?q=test&format=json"
      headers: {Authorization: "Bearer {token}"}   # dropped when a placeholder is empty
      body: ...                         # POST only
      expect: [200]                     # default: any 2xx

Placeholders `{field}` name fields of the type; url fields are inserted as they are
(without a trailing slash), other values percent-encoded in the URL and verbatim in
headers. Parsing never expands YAML anchors/aliases and every error names the file, the
line and the key, like TOOL.md errors.
"""

from __future__ import annotations

# Names the old module imported and callers reach through it.
from tools_app.audit import Actor
from tools_app.integrations.connection import (
    TestOutcome,
    connection_test,
    redact,
)
from tools_app.integrations.environment import (
    PreviewItem,
    PreviewVariable,
    env_preview,
    environment_for,
    readable_paths_for,
    secret_label,
)
from tools_app.integrations.errors import (
    Conflict,
    IntegrationError,
    IntegrationUnavailable,
    InUse,
    InvalidIntegration,
    RotationError,
    SecretsUnavailable,
    UnknownIntegration,
    UnknownType,
)
from tools_app.integrations.fields import (
    CUSTOM_FLAGS,
    fields_of,
    format_custom_fields,
    parse_custom_fields,
    type_of,
)
from tools_app.integrations.paths import bindable, protected_path_problem, protected_paths
from tools_app.integrations.policy import (
    Basis,
    Decision,
    SecretAccess,
    is_published,
    secret_access,
    set_allow_test_runs,
)
from tools_app.integrations.rotation import (
    RotationResult,
    rotate,
    rotate_keys,
)
from tools_app.integrations.service import (
    FieldState,
    create_integration,
    delete_integration,
    field_states,
    get_integration,
    published_tools_using,
    set_enabled,
    tools_using,
    update_integration,
)
from tools_app.integrations.types import (
    FieldSpec,
    IntegrationType,
    Problem,
    TestSpec,
    TypeRegistry,
    get_type,
    integration_type_warnings,
    integration_types,
    load_types,
    parse_type,
    placeholders,
    types_dir,
)
from tools_app.integrations.validation import (
    ENV_RE,
    EXCERPT_CHARS,
    FIELD_KEYS,
    FIELD_NAME_RE,
    KINDS,
    MAX_FIELDS,
    MAX_LABEL,
    MAX_PATH,
    MAX_SECRET,
    MAX_TYPE_FILE,
    MAX_URL,
    MAX_VALUE,
    METHODS,
    RESERVED_ENV,
    RESERVED_ENV_PREFIXES,
    RESERVED_SLUGS,
    SLUG_RE,
    TEST_KEYS,
    TEST_TIMEOUT,
    TYPE_KEYS,
    TYPE_SLUG_RE,
    env_problem,
    secret_problem,
    slug_problem,
    url_problem,
    value_problem,
)
from tools_app.models import Integration, IntegrationSecret, Tool

__all__ = [
    "Basis",
    "Decision",
    "SecretAccess",
    "bindable",
    "is_published",
    "protected_path_problem",
    "protected_paths",
    "secret_access",
    "set_allow_test_runs",
    "Actor",
    "Integration",
    "IntegrationSecret",
    "Tool",
    "CUSTOM_FLAGS",
    "Conflict",
    "ENV_RE",
    "EXCERPT_CHARS",
    "FIELD_KEYS",
    "FIELD_NAME_RE",
    "FieldSpec",
    "FieldState",
    "InUse",
    "IntegrationError",
    "IntegrationType",
    "IntegrationUnavailable",
    "InvalidIntegration",
    "KINDS",
    "MAX_FIELDS",
    "MAX_LABEL",
    "MAX_PATH",
    "MAX_SECRET",
    "MAX_TYPE_FILE",
    "MAX_URL",
    "MAX_VALUE",
    "METHODS",
    "PreviewItem",
    "PreviewVariable",
    "Problem",
    "RESERVED_ENV",
    "RESERVED_ENV_PREFIXES",
    "RESERVED_SLUGS",
    "RotationError",
    "RotationResult",
    "SLUG_RE",
    "SecretsUnavailable",
    "TEST_KEYS",
    "TEST_TIMEOUT",
    "TYPE_KEYS",
    "TYPE_SLUG_RE",
    "TestOutcome",
    "TestSpec",
    "TypeRegistry",
    "UnknownIntegration",
    "UnknownType",
    "connection_test",
    "create_integration",
    "delete_integration",
    "env_preview",
    "env_problem",
    "environment_for",
    "field_states",
    "fields_of",
    "format_custom_fields",
    "get_integration",
    "get_type",
    "integration_type_warnings",
    "integration_types",
    "load_types",
    "parse_custom_fields",
    "parse_type",
    "placeholders",
    "published_tools_using",
    "readable_paths_for",
    "redact",
    "rotate",
    "rotate_keys",
    "secret_label",
    "secret_problem",
    "set_enabled",
    "slug_problem",
    "tools_using",
    "type_of",
    "types_dir",
    "update_integration",
    "url_problem",
    "value_problem",
]

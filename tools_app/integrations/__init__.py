"""Integrations (docs/integrations.md): types, validation, write-only secrets, the runner's
environment, the connection test and key rotation.

One module per seam (validation, errors, types, fields, service, environment, connection,
rotation, paths, policy); callers import each name from the module that defines it.

Views, commands and Django admin all go through the functions here, so every change is
validated the same way, written in one transaction and audited with the names of the
fields that changed, never their values.

Integration types are YAML files `seed/integrations/<slug>.yaml`:

    label: SearXNG                      # required
    description: ...                    # required
    custom: false                       # true: admins define the fields per integration
    egress: open                        # or confined: tools granted it reach its URLs only
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

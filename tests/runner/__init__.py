"""The sandboxed runner: bwrap, limits, seccomp, spares, teardown (tools_app/runner/)."""

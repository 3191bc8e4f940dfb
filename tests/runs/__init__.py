"""Runs: start, execute, progress, artifacts, the reaper, a real worker (tools_app/runs/)."""

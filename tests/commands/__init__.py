"""The management commands as a person runs them (tools_app/management/)."""

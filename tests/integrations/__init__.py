"""Integrations, their secrets and the vault (tools_app/integrations/, vault)."""

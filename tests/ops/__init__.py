"""Settings, health, the broker, the state directory, dev.py and packaging (tools_app/ops/)."""

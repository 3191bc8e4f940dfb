"""The console's pages through Django's test client (tools_app/views/, templates/)."""

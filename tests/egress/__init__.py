"""The egress policy and the console's outbound HTTP client (tools_app/egress/)."""

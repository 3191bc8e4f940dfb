"""`kind: http` tools: their request and outputs blocks (spec.py), their checks, their
execution and the OpenAPI import."""

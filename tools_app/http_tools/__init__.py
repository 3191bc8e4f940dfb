"""`kind: http` tools: their checks, their execution and the OpenAPI import."""

"""Signed versions (docs/signing.md): canonical JSON, DSSE envelopes, the signed manifest of a
version, keys.json and the console's key ring. canonical, envelope, statement and trust are
pure (no Django): the same checks run in the console, the worker and any verifier."""

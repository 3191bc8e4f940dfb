"""Outbound network: the egress policy, its configuration, the pinned transport and the
console's own HTTP client."""

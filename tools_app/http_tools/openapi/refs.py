"""Following a document's `$ref`s: only local ones (`#/...`), lazily and per operation; an
external ref is refused, and a reference cycle is an error naming the chain of refs."""

from __future__ import annotations

from typing import Any

from tools_app.http_tools.openapi.document import MAX_DEPTH, OpenApiError


def _pointer_part(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")


def pointer(*parts: str) -> str:
    return "#/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


class Resolver:
    """Follows local `$ref`s; `chain` is the refs being expanded (to name a cycle)."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document

    def target(self, ref: Any) -> Any:
        if not isinstance(ref, str):
            raise OpenApiError(f"$ref must be a string, got {ref!r:.60}")
        if not ref.startswith("#"):
            raise OpenApiError(
                f"external reference {ref!r} is not supported: only references inside the "
                "document ('#/components/...') are followed"
            )
        node: Any = self.document
        for raw in ref[1:].split("/")[1:] if ref != "#" else []:
            part = _pointer_part(raw)
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise OpenApiError(f"reference {ref!r} points at nothing in the document")
        return node

    def deref(self, node: Any, chain: tuple[str, ...] = ()) -> tuple[Any, tuple[str, ...]]:
        """`node` with its own $ref chain followed (not its children)."""
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if ref in chain:
                cycle = " -> ".join([*chain[chain.index(ref) :], ref])
                raise OpenApiError(f"reference cycle: {cycle}")
            chain = (*chain, ref)
            node = self.target(ref)
        return node, chain

    def full(self, node: Any, chain: tuple[str, ...] = (), depth: int = 0) -> Any:
        """`node` with every $ref inside it replaced by its target (a copy)."""
        if depth > MAX_DEPTH:
            raise OpenApiError(f"references nest deeper than {MAX_DEPTH} levels")
        node, chain = self.deref(node, chain)
        if isinstance(node, dict):
            return {k: self.full(v, chain, depth + 1) for k, v in node.items()}
        if isinstance(node, list):
            return [self.full(v, chain, depth + 1) for v in node]
        return node

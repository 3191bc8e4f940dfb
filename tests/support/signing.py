"""Fixed keys and documents for the signing tests, and the vectors Node checks itself
against (tests/data/signing_vectors.json: JCS, PAE, a keys.json and a version's envelope,
all made by the Python side from fixed private keys)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tools_app.signing import canonical, statement, trust
from tools_app.signing.envelope import (
    KEYS_TYPE,
    MANIFEST_TYPE,
    encode_public,
    key_id,
    pae,
    seal,
)

VECTORS = Path(__file__).resolve().parents[1] / "data" / "signing_vectors.json"

ROOT_SEED = bytes(range(32))
SIGNING_SEED = bytes(range(32, 64))
OTHER_SEED = bytes(range(64, 96))
ISSUED = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
EXPIRES = ISSUED + timedelta(days=365)


def fixed_key(seed: bytes) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(seed)


def public_b64(private: Ed25519PrivateKey) -> str:
    return encode_public(private.public_key())


def kid(private: Ed25519PrivateKey) -> str:
    return key_id(private.public_key())


def keys_envelope(
    *,
    root: Ed25519PrivateKey | None = None,
    keys: list[Ed25519PrivateKey] | None = None,
    serial: int = 1,
    issued: datetime = ISSUED,
    expires: datetime = EXPIRES,
) -> dict:
    """A keys.json envelope signed by `root` (ROOT_SEED) listing `keys` (SIGNING_SEED)."""
    root = root or fixed_key(ROOT_SEED)
    keys = [fixed_key(SIGNING_SEED)] if keys is None else keys
    payload = trust.keys_payload(
        serial=serial,
        issued=issued,
        expires=expires,
        root=root.public_key(),
        keys=[(k.public_key(), issued) for k in keys],
    )
    return seal(KEYS_TYPE, payload, kid(root), root)


# A small tool as delivered: files and what a model sees.
TOOL_FILES = {
    "TOOL.md": b"---\nname: web_fetch\nversion: 3\ndescription: Fetch a page.\n---\n# web_fetch\n",
    "index.ts": b"export async function execute() {\n  return { ok: true };\n}\n",
    "lib/\u00e9t\u00e9.ts": "export const \u00e9t\u00e9 = 1;\n".encode(),
}
TOOL_VIEW = {
    "name": "web_fetch",
    "description": "Fetch a page.",
    "inputSchema": {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "The page \u2014 any URL"}},
        "required": ["url"],
        "additionalProperties": False,
    },
}


def tool_statement(serial: int = 12) -> dict:
    return statement.build(
        "web_fetch",
        3,
        {"kind": "code", "language": "typescript"},
        TOOL_FILES,
        publisher="alice",
        published=ISSUED,
        serial=serial,
        view=TOOL_VIEW,
    )


def manifest_envelope(signer: Ed25519PrivateKey | None = None, serial: int = 12) -> dict:
    signer = signer or fixed_key(SIGNING_SEED)
    return seal(MANIFEST_TYPE, tool_statement(serial), kid(signer), signer)


# JSON texts and their canonical form (RFC 8785 and its examples; what JSON.parse reads).
JCS_INPUTS = [
    "0.5",
    "1e21",
    "1e-7",
    "100.0",
    "-0.0",
    "1.0",
    "4.50",
    "2e-3",
    "1E30",
    "0.000000000000000000000000001",
    "333333333.33333329",
    "123456789012345678901",
    "9007199254740993",
    "-1.5e-7",
    "1e20",
    "5e-324",
    "1.7976931348623157e308",
    "0.1",
    "[0.1, 0.2, 0.30000000000000004]",
    '"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/"',
    '"\\u2028\\u2029\\u007f\\b\\f\\t\\r\\n\\u0000\\u001f"',
    '"\\ud83d\\ude00 astral \\u00e9"',
    '{"b": 1, "a": [true, false, null], "c": {"z": {}, "y": []}}',
    '{"\\u20ac": "Euro Sign", "\\r": "Carriage Return", "\\ufb33": "Hebrew Letter Dalet '
    'With Dagesh", "1": "One", "\\ud83d\\ude00": "Emoji: Grinning Face", "\\u0080": '
    '"Control", "\\u00f6": "Latin Small Letter O With Diaeresis"}',
    '{"\\uffff": 1, "\\ud83d\\ude00": 2, "\\ud800\\udc00": 3, "\\ue000": 4}',
    '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], '
    '"literals": [null, true, false]}',
]


def build_vectors() -> dict:
    root, signing = fixed_key(ROOT_SEED), fixed_key(SIGNING_SEED)
    envelope = manifest_envelope()
    body = base64.b64decode(envelope["payload"])
    return {
        "about": "Made by tests/support/signing.py (build_vectors); docs/signing.md",
        "jcs": [
            {"input": text, "canonical": canonical.dumps(json.loads(text)).decode("utf-8")}
            for text in JCS_INPUTS
        ],
        "keys": {
            name: {
                "seedHex": seed.hex(),
                "keyid": kid(private),
                "publicKey": public_b64(private),
            }
            for name, seed, private in (
                ("root", ROOT_SEED, root),
                ("signing", SIGNING_SEED, signing),
                ("other", OTHER_SEED, fixed_key(OTHER_SEED)),
            )
        },
        "now": canonical.timestamp(ISSUED + timedelta(days=1)),
        "keysEnvelope": keys_envelope(),
        "manifest": {
            "files": {path: data.decode("utf-8") for path, data in TOOL_FILES.items()},
            "model": TOOL_VIEW,
            "statement": tool_statement(),
            "digest": tool_statement()["digest"],
            "pae": base64.b64encode(pae(MANIFEST_TYPE, body)).decode("ascii"),
            "envelope": envelope,
        },
    }


def vectors_text() -> str:
    return json.dumps(build_vectors(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":  # python -m tests.support.signing > tests/data/signing_vectors.json
    print(vectors_text(), end="")

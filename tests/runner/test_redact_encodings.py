"""Redaction of encoded secrets (docs/security.md, tools_app/runner/redact.py).

The reported attack: a tool printed a secret base64-encoded and it was stored as is. Each
injected value is now also caught as base64 (standard and URL-safe, at every alignment
inside a longer base64 text), hex, reversed and URL-encoded, in results, progress,
stderr, artifact names and the content of text artifacts."""

from __future__ import annotations

import base64
import binascii
import contextlib
import re
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from tests.runner.test_runner import run_tool
from tools_app.runner import Redactor
from tools_app.runner.redact import MIN_ENCODED

LABEL = "{{vault.TOKEN}}"
# '+', '/' and '~' make standard and URL-safe base64 and URL-encoding differ from the value.
SECRET = "sk-live~Zq9+/wX?&=é-84f1c2d0"


@pytest.fixture
def redactor() -> Redactor:
    return Redactor({LABEL: SECRET})


def b64_inside(prefix: bytes, suffix: bytes = b" tail", *, urlsafe: bool = False) -> str:
    data = prefix + SECRET.encode() + suffix
    return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()


@pytest.mark.parametrize("prefix", [b"", b"a", b"ab", b"abc", b"Bearer ", b"token=xx"])
@pytest.mark.parametrize("urlsafe", [False, True])
def test_it_catches_base64_at_every_alignment(redactor, prefix, urlsafe):
    encoded = b64_inside(prefix, urlsafe=urlsafe)

    redacted = redactor.redact(f"payload: {encoded}")

    assert LABEL in redacted
    # What is left cannot be decoded back to the secret.
    rest = redacted.replace(LABEL, "")
    assert SECRET.encode() not in _decodes(rest)


def _decodes(text: str) -> bytes:
    out = b""
    for word in text.split():
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            with contextlib.suppress(binascii.Error, ValueError):
                out += decode(word + "==")
    return out


def test_it_catches_the_whole_base64_of_the_value(redactor):
    for encoded in (
        base64.b64encode(SECRET.encode()).decode(),
        base64.urlsafe_b64encode(SECRET.encode()).decode(),
        base64.b64encode(SECRET.encode()).decode().rstrip("="),
    ):
        redacted = redactor.redact(encoded)
        assert LABEL in redacted
        assert SECRET.encode() not in _decodes(redacted.replace(LABEL, " "))


def test_it_catches_hex_lower_and_upper(redactor):
    raw = SECRET.encode()
    assert redactor.redact(f"x={raw.hex()};") == f"x={LABEL};"
    assert redactor.redact(f"x={raw.hex().upper()};") == f"x={LABEL};"
    # Inside a longer hex dump too (hex is byte-aligned).
    assert LABEL in redactor.redact((b"\x00\x01" + raw + b"\xff").hex())


def test_it_catches_the_reversed_value(redactor):
    assert redactor.redact(f"[{SECRET[::-1]}]") == f"[{LABEL}]"


def test_it_catches_url_encodings(redactor):
    lower = re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(SECRET, safe=""))
    for encoded in (quote(SECRET, safe=""), quote(SECRET), quote_plus(SECRET), lower):
        assert redactor.redact(f"?t={encoded}&x=1") == f"?t={LABEL}&x=1", encoded


def test_it_catches_the_json_escaped_value():
    quoted = 'a"b\\c-secret-9'
    redactor = Redactor({LABEL: quoted})
    assert redactor.redact('{"t": "a\\"b\\\\c-secret-9"}') == '{"t": "' + LABEL + '"}'


def test_it_does_not_search_short_encodings_of_short_values():
    """The base64 core of a 2-byte value is one or two characters: searching it would
    redact ordinary words. The value itself still is redacted."""
    redactor = Redactor({LABEL: "ab"})
    assert redactor.redact("ab YWI= 6162 ba") == f"{LABEL} YWI= 6162 ba"
    assert MIN_ENCODED >= 8


def test_it_removes_a_partial_encoded_secret_at_a_cut_edge(redactor):
    hexed = SECRET.encode().hex()
    assert redactor.redact("head " + hexed[:20], cut_end=True) == "head "
    assert redactor.redact(hexed[-20:] + " tail", cut_start=True) == " tail"


def test_it_redacts_binary_content_only_for_long_forms(redactor):
    data = b"\x89PNG\x00" + SECRET.encode() + b"\x00" + SECRET.encode().hex().encode()
    redacted, is_text, changed = redactor.redact_bytes(data)
    assert not is_text and changed
    assert SECRET.encode() not in redacted and SECRET.encode().hex().encode() not in redacted
    short = Redactor({LABEL: "ab"})
    assert short.redact_bytes(b"\xff\xfeab") == (b"\xff\xfeab", False, False)
    assert short.redact_bytes(b"text ab") == (f"text {LABEL}".encode(), True, True)


ENCODING_TOOL = """
import base64, os, sys
from urllib.parse import quote

def execute(tool_call_id, params, signal, on_update):
    s = os.environ["VAULT_TOKEN"]
    raw = s.encode()
    forms = [
        base64.b64encode(b"Authorization: Bearer " + raw).decode(),
        base64.urlsafe_b64encode(b"x" + raw + b"y").decode(),
        raw.hex(), raw.hex().upper(), s[::-1], quote(s, safe=""),
    ]
    for form in forms:
        on_update({"content": [{"type": "text", "text": "progress " + form}]})
        print("stderr " + form, file=sys.stderr)
    out = os.environ["TOOL_OUTPUT_DIR"]
    with open(os.path.join(out, "dump-" + raw.hex() + ".txt"), "w") as f:
        f.write("\\n".join(forms) + "\\n" + s + "\\n")
    return {"content": [{"type": "text", "text": "result " + " ".join(forms)}]}
"""


def leaked_forms(text: str) -> list[str]:
    raw = SECRET.encode()
    cores = [base64.b64encode(raw).decode()[:20], base64.urlsafe_b64encode(raw).decode()[:20]]
    forms = [SECRET, raw.hex(), raw.hex().upper(), SECRET[::-1], quote(SECRET, safe="")]
    found = [f for f in forms + cores if f in text]
    found += ["base64"] if SECRET.encode() in _decodes(text) else []
    return found


def test_a_real_run_redacts_every_encoding_everywhere(tmp_path: Path):
    updates: list = []
    outcome = run_tool(
        tmp_path, "python", ENCODING_TOOL, updates=updates,
        env={"VAULT_TOKEN": SECRET}, secrets={LABEL: SECRET},
    )  # fmt: skip

    result = outcome.result["content"][0]["text"]
    progress = "\n".join(i["text"] for u in updates for i in u["content"])
    assert result.startswith("result ") and result.count(LABEL) >= 6
    assert progress.count(LABEL) >= 6
    assert outcome.stderr_tail.count(LABEL) >= 6
    (artifact,) = outcome.artifacts
    assert artifact.name == f"dump-{LABEL}.txt"
    content = artifact.path.read_text()
    assert content.count(LABEL) == 7 and artifact.size == len(content.encode())
    for where, text in {
        "result": result,
        "progress": progress,
        "stderr": outcome.stderr_tail,
        "artifact name": artifact.name,
        "artifact content": content,
        "notices": "\n".join(outcome.notices),
    }.items():
        assert leaked_forms(text) == [], where


def test_it_catches_a_base64_secret_decoded_and_its_basic_password():
    credential = base64.b64encode(b"ada:pa55-w0rd-basic").decode()
    redactor = Redactor({"{{login.BASIC}}": credential})
    text = redactor.redact(f"got ada:pa55-w0rd-basic; pw pa55-w0rd-basic; raw {credential}")
    assert "pa55-w0rd-basic" not in text and credential not in text
    assert text.count("{{login.BASIC}}") == 3
    # A token that only looks like base64 (it decodes to bytes, not text) adds nothing.
    assert Redactor({"L": "AAECAwQFBgcICQ=="}).redact("plain words") == "plain words"

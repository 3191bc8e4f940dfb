"""Every tool shipped in seed/tools validates, with the inputs and integrations agents rely on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools_app.http_tools.context import validation_context
from tools_app.manifest.folder import validate_tool_dir

SEED_TOOLS = Path(__file__).resolve().parents[2] / "seed" / "tools"
SHIPPED = (
    "web_fetch",
    "web_search",
    "email_db",
    "convert_audio_to_mp3",
    "apify_run_actor",
    "apify_get_run",
    "apify_get_dataset_items",
    "gmail",
    "ocr",
)
BODY_SECTIONS = ("## Authentication", "## Usage", "## Examples", "## Errors", "## Notes")


def _tool_dirs() -> list[Path]:
    return sorted(p for p in SEED_TOOLS.iterdir() if p.is_dir() and not p.name.startswith("."))


def test_it_ships_the_four_seed_tools() -> None:
    names = {p.name for p in _tool_dirs()}
    assert set(SHIPPED) <= names


@pytest.mark.parametrize("tool_dir", _tool_dirs(), ids=lambda p: p.name)
def test_it_validates_every_seed_tool_without_problems(db, tool_dir: Path) -> None:
    # db: the checks of a kind: http tool read the integrations its URL may reach.
    result = validate_tool_dir(tool_dir, context=validation_context())
    # Warnings count too: a shipped tool should not lean on forward-compatibility leniency.
    assert result.ok
    assert [str(p) for p in result.problems] == []
    assert result.manifest is not None
    assert result.manifest.name == tool_dir.name
    assert result.manifest.version >= 1


@pytest.mark.parametrize("name", SHIPPED)
def test_it_documents_each_seed_tool_for_people_and_agents(db, name: str) -> None:
    manifest = validate_tool_dir(SEED_TOOLS / name, context=validation_context()).manifest
    assert manifest is not None
    assert manifest.body.lstrip().startswith("# ")
    for section in BODY_SECTIONS:
        assert f"\n{section}\n" in manifest.body, f"{name}: missing section {section}"
    assert all(spec.description.strip() for spec in manifest.inputs.values())
    assert manifest.label != manifest.name


def test_it_declares_the_expected_languages_integrations_and_network(db) -> None:
    manifests = {
        name: validate_tool_dir(SEED_TOOLS / name, context=validation_context()).manifest
        for name in SHIPPED
    }
    expected = {
        "web_fetch": ("typescript", (), True),
        "web_search": ("typescript", ("searxng",), True),
        "email_db": ("python", ("email_db",), False),
        "convert_audio_to_mp3": ("bash", (), False),
        "gmail": ("typescript", ("google",), True),
        "ocr": ("python", (), False),
    }
    for name, (language, integrations, network) in expected.items():
        manifest = manifests[name]
        assert manifest is not None
        assert manifest.language == language
        assert tuple(manifest.integrations) == integrations
        assert manifest.network is network


def test_it_marks_the_searxng_token_input_sensitive_and_optional() -> None:
    manifest = validate_tool_dir(SEED_TOOLS / "web_search", context=validation_context()).manifest
    assert manifest is not None
    token = manifest.inputs["searxng_token"]
    assert token.sensitive
    assert token.optional


def test_it_offers_the_documented_enum_values_and_defaults() -> None:
    email = validate_tool_dir(SEED_TOOLS / "email_db", context=validation_context()).manifest
    audio = validate_tool_dir(
        SEED_TOOLS / "convert_audio_to_mp3", context=validation_context()
    ).manifest
    assert email is not None and audio is not None
    assert tuple(email.inputs["format"].values) == ("table", "json")
    assert email.inputs["format"].default == "table"
    assert email.inputs["max_rows"].default == 100
    assert tuple(audio.inputs["bitrate"].values) == ("64k", "128k", "192k", "256k", "320k")
    assert audio.inputs["bitrate"].default == "192k"
    assert audio.inputs["output_path"].optional


def test_it_offers_the_ocr_tools_inputs() -> None:
    ocr = validate_tool_dir(SEED_TOOLS / "ocr", context=validation_context()).manifest
    assert ocr is not None
    assert ocr.inputs["image"].type == "file" and ocr.inputs["image"].optional
    assert ocr.inputs["image_path"].optional and ocr.inputs["output_path"].optional
    assert tuple(ocr.inputs["output"].values) == ("text", "words")
    assert ocr.inputs["psm"].default == "auto" and ocr.inputs["languages"].default == "eng"
    assert ocr.inputs["preprocess"].default is True

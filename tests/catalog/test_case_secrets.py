"""Sealed case inputs (tools_app/catalog/case_secrets.py): vault tokens bound to the tool and
the input, opened for their sealer or by the sensitive presets' rule, and a clear error,
never a value, when they cannot be opened."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from tests.support.cases import GREET_TS, greet_files, save
from tools_app.audit import Actor
from tools_app.cases.document import Case
from tools_app.catalog import case_secrets
from tools_app.catalog.presets import set_allow_test_runs
from tools_app.integrations import vault
from tools_app.models import Tool
from tools_app.models.runs import RunVia

pytestmark = pytest.mark.django_db

CANARY = "k-case-canary-8841"


def case_with(sealed: dict[str, str]) -> Case:
    return Case(name="c", description="", inputs={"name": "Ada"}, sealed=sealed, sample=None,
                expect=(), line=1)  # fmt: skip


def test_it_seals_each_value_apart_and_opens_them_for_their_sealer(developer):
    draft = save(greet_files(cases=None))
    sealed = case_secrets.seal({"key": CANARY}, tool="greet", user=developer)
    assert set(sealed) == {"key"} and CANARY not in sealed["key"]
    opened = case_secrets.open_inputs(case_with(sealed), draft, user=developer, via=RunVia.BROWSER)
    assert opened == {"key": CANARY}


def test_another_developer_gets_it_only_as_presets_allow(developer, console_admin):
    from tests.support import make_user
    from tools_app.roles import DEVELOPER

    other = make_user("otto", DEVELOPER)
    save(greet_files(cases=None), publish=True)
    draft = save(greet_files(cases=None, source="// v2\n" + GREET_TS))
    case = case_with(case_secrets.seal({"key": CANARY}, tool="greet", user=developer))
    with pytest.raises(case_secrets.SealedInputError) as caught:
        case_secrets.open_inputs(case, draft, user=other, via=RunVia.BROWSER)
    assert "sealed input key" in str(caught.value) and CANARY not in str(caught.value)
    # An admin, the operator's command, the published version, or the tool's switch.
    assert case_secrets.open_inputs(case, draft, user=console_admin, via=RunVia.BROWSER)
    assert case_secrets.open_inputs(case, draft, user=None, via=RunVia.COMMAND)
    published = Tool.objects.get(name="greet").published_version
    assert case_secrets.open_inputs(case, published, user=other, via=RunVia.BROWSER)
    set_allow_test_runs(Tool.objects.get(name="greet"), True, actor=Actor(user=console_admin))
    assert case_secrets.open_inputs(case, draft, user=other, via=RunVia.BROWSER)


def test_a_token_is_bound_to_its_tool_and_input(developer):
    draft = save(greet_files(cases=None))
    elsewhere = case_secrets.seal({"key": CANARY}, tool="other_tool", user=developer)
    with pytest.raises(case_secrets.SealedInputError, match="another tool or input"):
        case_secrets.open_inputs(case_with(elsewhere), draft, user=developer, via=RunVia.BROWSER)
    moved = {"name": case_secrets.seal({"key": CANARY}, tool="greet", user=developer)["key"]}
    with pytest.raises(case_secrets.SealedInputError, match="another tool or input"):
        case_secrets.open_inputs(case_with(moved), draft, user=developer, via=RunVia.BROWSER)


@pytest.mark.parametrize("token", ["", "not-a-token", "gAAAAABfake", None])
def test_a_token_that_is_not_one_is_a_clear_error(developer, token):
    draft = save(greet_files(cases=None))
    with pytest.raises(case_secrets.SealedInputError, match="sealed input key"):
        case_secrets.open_inputs(case_with({"key": token}), draft, user=developer,
                                 via=RunVia.BROWSER)  # fmt: skip


def test_a_token_from_another_console_says_so(developer, settings):
    draft = save(greet_files(cases=None))
    sealed = case_secrets.seal({"key": CANARY}, tool="greet", user=developer)
    settings.CONSOLE_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    vault.clear_cache()
    with pytest.raises(case_secrets.SealedInputError, match="another console") as caught:
        case_secrets.open_inputs(case_with(sealed), draft, user=developer, via=RunVia.BROWSER)
    assert CANARY not in str(caught.value)


def test_a_vault_token_holding_something_else_is_refused(developer):
    draft = save(greet_files(cases=None))
    plain, _ = vault.encrypt('"just a string"')
    with pytest.raises(case_secrets.SealedInputError, match="no sealed value"):
        case_secrets.open_inputs(case_with({"key": plain}), draft, user=developer,
                                 via=RunVia.BROWSER)  # fmt: skip

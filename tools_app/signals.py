"""Every signal receiver of the app, connected once: ToolsAppConfig.ready() imports this
module. The work is done where the concept lives; a receiver only says when."""

from __future__ import annotations

from typing import Any

from axes.signals import user_locked_out
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.signals import setting_changed
from django.db import transaction
from django.db.backends.signals import connection_created
from django.db.models.signals import m2m_changed, post_delete, post_migrate, post_save
from django.dispatch import receiver

from tools_app import roles
from tools_app.catalog import integrity
from tools_app.integrations import vault
from tools_app.models import AgentToken, KeysDocument, Tool, ToolVersion
from tools_app.ops import statedir
from tools_app.views.auth import record_lockout


@receiver(post_migrate, sender=apps.get_app_config("tools_app"))
def ensure_groups(**kwargs: Any) -> None:
    roles.ensure_groups(**kwargs)


@receiver(m2m_changed, sender=get_user_model().groups.through, dispatch_uid="staff_follows_groups")
def staff_follows_groups(**kwargs: Any) -> None:
    roles.staff_follows_groups(**kwargs)


@receiver(connection_created, dispatch_uid="private_sqlite_files")
def private_sqlite_files(**kwargs: Any) -> None:
    statedir.private_sqlite_files(**kwargs)


@receiver(user_locked_out, dispatch_uid="audit_lockout")
def audit_lockout(**kwargs: Any) -> None:
    record_lockout(**kwargs)


@receiver(setting_changed, dispatch_uid="vault_forget_keys")
def forget_keys(*, setting: str, **kwargs: Any) -> None:
    if setting in ("CONSOLE_ENCRYPTION_KEYS", "ENCRYPTION_KEY_FILE"):
        vault.clear_cache()


# The agent API's memos are imported when a receiver runs, not here: importing the API
# builds every router, which a worker or a management command does not need.
@receiver(post_save, sender=AgentToken, dispatch_uid="api-forget-token-save")
@receiver(post_delete, sender=AgentToken, dispatch_uid="api-forget-token-delete")
def forget_token(instance: AgentToken, **kwargs: Any) -> None:
    """A revoked or deleted token is refused at once by this process."""
    from tools_app.api import auth

    auth.forget_token(instance)


@receiver(post_save, sender=Tool, dispatch_uid="api-forget-revision-save")
@receiver(post_delete, sender=Tool, dispatch_uid="api-forget-revision-delete")
def forget_revision(**kwargs: Any) -> None:
    """This process's next registry or sync answer reads the tools' revision again."""
    from tools_app.api import conditional

    conditional.forget_revision()


@receiver(post_save, sender=Tool, dispatch_uid="integrity-forget-tool-save")
@receiver(post_delete, sender=Tool, dispatch_uid="integrity-forget-tool-delete")
@receiver(post_save, sender=ToolVersion, dispatch_uid="integrity-forget-version-save")
@receiver(post_save, sender=KeysDocument, dispatch_uid="integrity-forget-keys-save")
def forget_seals(**kwargs: Any) -> None:
    """This process's next look at the published tools' signatures asks the database
    (a publish, a re-signature or a new keys.json shows at once)."""
    integrity.forget()
    # Again after the commit: a look between the save and the commit saw the old rows.
    transaction.on_commit(integrity.forget)

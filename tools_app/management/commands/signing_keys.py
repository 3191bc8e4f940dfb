"""`manage.py signing_keys create|list|rotate|retire|sign|export-root|reissue`
(docs/signing.md, "The key ring"; docs/commands.md).

Exit 0 on success, 1 when the key ring refuses (no key, the root offline without
--root-key, the only key retired...), 2 on bad usage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tools_app.audit import Actor
from tools_app.catalog import datapath
from tools_app.models import SigningKey
from tools_app.models.signing import KeyRole
from tools_app.signing import keyring, versions
from tools_app.signing.trust import SignatureRefused


class Command(BaseCommand):
    help = "Manage the Ed25519 keys that sign published tool versions (docs/signing.md)."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
        create = actions.add_parser("create", help="Create the root key and a signing key.")
        create.add_argument(
            "--if-missing",
            action="store_true",
            help="Do nothing (exit 0) when the console has keys already (start scripts).",
        )
        actions.add_parser("list", help="The keys, keys.json's serial and expiry.")
        rotate = actions.add_parser("rotate", help="A new signing key signs from now on.")
        retire = actions.add_parser("retire", help="Stop trusting a signing key.")
        retire.add_argument("key_id", metavar="KEYID")
        retire.add_argument(
            "--resign",
            action="store_true",
            help="First re-sign the published versions it signed with the newest key.",
        )
        sign = actions.add_parser("sign", help="Sign the published versions that are unsigned.")
        sign.add_argument(
            "--all", action="store_true", help="Re-sign every published version (upgrades)."
        )
        export = actions.add_parser("export-root", help="Write the root private key to a file.")
        export.add_argument("--out", type=Path, required=True, metavar="FILE")
        export.add_argument(
            "--remove", action="store_true", help="Then delete it from the console (offline)."
        )
        reissue = actions.add_parser("reissue", help="keys.json again with a new expiry.")
        for sub in (rotate, retire, reissue):
            sub.add_argument(
                "--root-key",
                type=Path,
                metavar="FILE",
                help="The root key file export-root wrote (when the root is offline).",
            )

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        actor = Actor.system()
        root_key: Path | None = options.get("root_key")
        if root_key is not None and not root_key.is_file():
            raise CommandError(f"--root-key {root_key}: no such file", returncode=2)
        try:
            if action == "create":
                self._create(actor, if_missing=options["if_missing"])
            elif action == "list":
                self._list()
            elif action == "rotate":
                key = keyring.rotate(actor=actor, root_key=root_key)
                self.stdout.write(f"signing key {key.key_id} created; it signs from now on")
            elif action == "retire":
                self._retire(options["key_id"], actor, root_key, resign=options["resign"])
            elif action == "sign":
                self._sign(actor, every=options["all"])
            elif action == "export-root":
                key = keyring.export_root(options["out"], remove=options["remove"], actor=actor)
                where = "removed from the console" if options["remove"] else "still on the console"
                self.stdout.write(f"root key {key} written to {options['out']} (0600); {where}")
            elif action == "reissue":
                document = keyring.reissue(actor=actor, root_key=root_key)
                self.stdout.write(
                    f"keys.json #{document.serial} issued, expires {document.expires_at:%Y-%m-%d}"
                )
        except (keyring.KeyRingError, keyring.SigningKeyMissing) as exc:
            raise CommandError(str(exc), returncode=1) from None
        if action in ("create", "rotate", "retire", "reissue"):
            datapath.write_trust()  # on-disk verifiers take the new keys.json

    def _create(self, actor: Actor, *, if_missing: bool) -> None:
        if if_missing:
            created = keyring.ensure(actor=actor)
            if not created:
                self.stdout.write("signing keys exist already; nothing to do")
                return
        else:
            keyring.create(actor=actor)
        root = keyring.root_key()
        signing = keyring.active_keys().last()
        assert root is not None and signing is not None
        self.stdout.write(
            f"root key {root.key_id} (pinned in {keyring.pin_path()}) and signing key "
            f"{signing.key_id} created"
        )
        # The upgrade step (docs/signing.md, "Upgrading"): with no key before, no published
        # version can have lost a signature, so every unsigned one is signed now, once.
        done = versions.sign_published(actor=actor, only_unsigned=True)
        if done:
            self.stdout.write(f"signed {len(done)} published version(s) that had no signature")
            datapath.mirror_all()
        pinned = keyring.pinned_root()
        if pinned is not None and pinned != root.public_key:
            self.stderr.write(
                "warning: CONSOLE_SIGNING_ROOT_KEY pins another root key; set it to "
                f"{root.public_key} or nothing verifies"
            )

    def _list(self) -> None:
        root = keyring.root_key()
        if root is None:
            raise keyring.SigningKeyMissing(keyring.MISSING)
        newest = keyring.active_keys().last()
        for key in [root, *SigningKey.objects.filter(role=KeyRole.SIGNING)]:
            if key.role == KeyRole.ROOT:
                state = "online" if key.online else "offline"
            elif key.retired_at is not None:
                state = f"retired {key.retired_at:%Y-%m-%d %H:%M}"
            else:
                state = "signs" if newest is not None and key.pk == newest.pk else "verifies"
            self.stdout.write(
                f"{key.key_id}  {key.role:<7}  {state:<22}  created {key.created_at:%Y-%m-%d}"
            )
        try:
            keys = keyring.keyset()
        except SignatureRefused as exc:
            raise CommandError(f"keys.json does not open: {exc}", returncode=1) from None
        self.stdout.write(
            f"keys.json #{keys.serial}, expires {keys.expires:%Y-%m-%d}, "
            f"{len(keys.keys)} key(s) verify"
        )

    def _retire(self, key: str, actor: Actor, root_key: Path | None, *, resign: bool) -> None:
        retired = keyring.retire(key, actor=actor, root_key=root_key)
        self.stdout.write(f"signing key {retired.key_id} retired: it verifies nothing any more")
        if resign:
            done = versions.sign_published(actor=actor, only_unsigned=False, signed_by=key)
            self.stdout.write(f"re-signed {len(done)} published version(s) it had signed")
            datapath.mirror_all()

    def _sign(self, actor: Actor, *, every: bool) -> None:
        done = versions.sign_published(actor=actor, only_unsigned=not every)
        for item in done:
            self.stdout.write(f"{item.name} v{item.version}: signed by {item.key_id}")
        self.stdout.write(f"signed {len(done)} published version(s)")
        if done:
            datapath.mirror_all()

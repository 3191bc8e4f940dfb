"""Run the test authorization server: `python -m tests.oauth_server.serve PORT`, with
OAUTH_SERVER_DB, OAUTH_REDIRECT_URI and OAUTH_CLIENT_SECRET in the environment. Prints
`ready CLIENT_ID` once it answers. Users: alice and bob (password "pw")."""

import os
import sys

os.environ["DJANGO_SETTINGS_MODULE"] = "tests.oauth_server.settings"

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.core.servers.basehttp import WSGIServer, get_internal_wsgi_application, run  # noqa: E402
from oauth2_provider.models import Application  # noqa: E402


def main() -> None:
    port = int(sys.argv[1])
    call_command("migrate", verbosity=0)
    for name in ("alice", "bob"):
        User.objects.create_user(name, f"{name}@example.org", "pw")
    common = {
        "redirect_uris": os.environ["OAUTH_REDIRECT_URI"],
        "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
        "skip_authorization": not os.environ.get("OAUTH_CONSENT"),
        "algorithm": "",
    }
    web = Application.objects.create(
        name="console",
        client_id="console-client",
        client_secret=os.environ["OAUTH_CLIENT_SECRET"],
        client_type=Application.CLIENT_CONFIDENTIAL,
        hash_client_secret=False,
        **common,
    )
    Application.objects.create(
        name="machine",
        client_id="machine-client",
        client_secret=os.environ["OAUTH_CLIENT_SECRET"],
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
        hash_client_secret=False,
        user=User.objects.get(username="alice"),
    )
    print("ready", web.client_id, flush=True)
    run("127.0.0.1", port, get_internal_wsgi_application(), threading=True, server_cls=WSGIServer)


if __name__ == "__main__":
    main()

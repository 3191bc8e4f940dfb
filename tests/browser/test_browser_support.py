import pytest
from django.contrib.auth.models import User
from django.db import connections

from tests.support.browser import chromium


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_it_closes_the_connections_made_while_the_browser_ran():
    with chromium():
        User.objects.count()
        inside = connections["default"]
        assert inside.connection is not None
    assert inside is not connections["default"]  # the loop is gone: other storage
    # Django never closes an in-memory SQLite test database (closing would destroy it).
    assert inside.connection is None or (inside.vendor == "sqlite" and inside.is_in_memory_db())

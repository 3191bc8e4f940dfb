# The agent API (django-ninja) mounts here; see tools_app/api/.
urlpatterns: list = []

"""The one build step pyproject.toml cannot say: the wheel carries the sync client
(clients/sync-tools.mjs) beside the shims (tools_app/catalog/shim/), whose verifier is its
`// verify:begin` block, for machines that run the console without a checkout."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CLIENT = Path(__file__).resolve().parent / "clients" / "sync-tools.mjs"


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "tools_app" / "catalog" / "shim" / CLIENT.name
        self.copy_file(str(CLIENT), str(target))


setup(cmdclass={"build_py": BuildPy})

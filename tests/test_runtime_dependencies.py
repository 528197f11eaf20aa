"""Every third-party module the service's packages import is one of its declared runtime
dependencies: httpx, a development extra, was once imported by the door's callbacks, and the
image (which installs only the runtime ones) could not start any command."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata

from tests.conftest import REPO_ROOT

PACKAGES = ("bridge", "sandbox", "worker")


def _imported_top_levels() -> set[str]:
    names: set[str] = set()
    for package in PACKAGES:
        for path in (REPO_ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - set(PACKAGES) - {"__future__"}


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_imported_module_is_a_runtime_dependency() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    declared = {
        _normalised(re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0])
        for requirement in project["dependencies"]
    }
    providers = metadata.packages_distributions()
    undeclared = {
        module: sorted(providers.get(module, ["(not installed)"]))
        for module in _imported_top_levels()
        if not declared & {_normalised(dist) for dist in providers.get(module, [])}
    }
    assert not undeclared, undeclared

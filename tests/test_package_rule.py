"""The package rule of docs/architecture.md, held: imports only run down.

``worker`` composes every role and may import ``bridge`` and ``sandbox``; ``bridge`` (the
trusted side) imports neither, so no parser can be reached from the code that holds the
prompt; ``sandbox`` imports nothing of airlock's, so a jailed child loads no trusted-side code
and no exception class of the trusted side crosses the boundary. Every import counts: at
module level, inside a function, under ``TYPE_CHECKING``, and ``importlib.import_module``
with a literal name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("bridge", "sandbox", "worker")
#: What each package may import of the others.
ALLOWED = {"worker": {"bridge", "sandbox"}, "bridge": set(), "sandbox": set()}


def _imported(tree: ast.AST, module: str) -> Iterator[tuple[int, str]]:
    """Every absolute module name ``tree`` (the module ``module``) imports, with its line."""
    package_parts = module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[: len(package_parts) - node.level + 1]
                if node.module:
                    yield node.lineno, ".".join([*base, node.module])
                else:  # `from .. import name`: each name may be a module
                    for alias in node.names:
                        yield node.lineno, ".".join([*base, alias.name])
            elif node.module:
                yield node.lineno, node.module
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value


def _violations(package: str) -> list[str]:
    found = []
    for path in sorted((REPO / package).rglob("*.py")):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for line, name in _imported(tree, module):
            top = name.split(".")[0]
            if top in PACKAGES and top != package and top not in ALLOWED[package]:
                found.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_only_run_down(package: str) -> None:
    assert _violations(package) == []


def test_the_rule_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The checker itself: each way of importing across the rule is caught."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "import importlib\n"
        "if TYPE_CHECKING:\n"
        "    from worker.config import Settings\n"
        "def late():\n"
        "    import sandbox.child\n"
        "    return importlib.import_module('worker.tasks')\n"
        "from .. import worker_like\n"
    )
    names = [name for _, name in _imported(ast.parse(source), "bridge.queue.mod")]
    assert {"worker.config", "sandbox.child", "worker.tasks", "bridge.worker_like"} <= set(names)

"""A module of the repository as it was at an earlier commit, for benches that run today's code
side by side with the code it replaced (loaded from git, not kept in the tree)."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def module_at(commit: str, path: str) -> types.ModuleType:
    """``path`` (from the repository's root) as it was at ``commit``, as a module."""
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{commit}:{path}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    module = types.ModuleType(f"previous_{Path(path).stem}")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"previous_{Path(path).name}", "exec"), module.__dict__)
    return module

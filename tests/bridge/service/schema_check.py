"""The published JSON schemas (docs/schemas) and a validator for documents against them, shared
by the service's request tests and the bridge service's integration tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import REPO_ROOT
from tests.deploy.conftest import HELPER, run_tool

SCHEMAS = REPO_ROOT / "docs" / "schemas"
REQUEST_SCHEMA = SCHEMAS / "request.schema.json"
RESULT_SCHEMA = SCHEMAS / "result.schema.json"


def schema_errors(schema: Path, documents: list[Any]) -> list[list[str]]:
    """Validate with jsonschema, which lives in the linters' environment (tests/deploy)."""
    result = run_tool("python", str(HELPER), "validate", str(schema), stdin=json.dumps(documents))
    assert result.returncode == 0, result.stderr
    errors: list[list[str]] = json.loads(result.stdout)
    return errors

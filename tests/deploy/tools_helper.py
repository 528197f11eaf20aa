"""Run by ``.venv-tools/bin/python``, never imported by the tests.

PyYAML and jsonschema are installed in the linters' environment (.venv-tools), not in the
project's, so the tests ask this script to read YAML and to validate documents and get JSON
back. Commands:

- ``load FILE...``: ``{file: [document, ...]}`` with empty documents dropped.
- ``validate SCHEMA``: reads a JSON list of documents on stdin, prints one list of error
  messages per document (empty when it is valid). The schema itself is checked first.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import yaml


def _load(paths: list[str]) -> dict[str, list[object]]:
    return {
        path: [doc for doc in yaml.safe_load_all(Path(path).read_text()) if doc is not None]
        for path in paths
    }


def _validate(schema_path: str, documents: list[object]) -> list[list[str]]:
    schema = json.loads(Path(schema_path).read_text())
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
    return [
        sorted(
            f"{'/'.join(str(part) for part in error.absolute_path) or '(root)'}: {error.message}"
            for error in validator.iter_errors(document)
        )
        for document in documents
    ]


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[1] == "load":
        json.dump(_load(argv[2:]), sys.stdout)
        return 0
    if len(argv) == 3 and argv[1] == "validate":
        json.dump(_validate(argv[2], json.load(sys.stdin)), sys.stdout)
        return 0
    sys.stderr.write(__doc__ or "")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""The spec's knowledge capability: one module per section (docs/spec-decisions.md)."""

"""The Redis Streams bridge service for callers in any language (docs/bridge-service.md)."""

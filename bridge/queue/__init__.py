"""The queue client: jobs, envelopes and claim checks on Celery and Redis (docs/queue.md)."""

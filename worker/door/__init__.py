"""``airlock serve``: the HTTP front door (docs/http.md).

An ASGI application on Starlette, served by uvicorn. It reads request bodies and answers
selections; it never parses a document: files go to this process's sandbox children on the
embedded default, or to the workers through the queue when ``AIRLOCK_BROKER_URL`` is set.
"""

"""Run one parser on untrusted bytes inside an isolated, resource-limited child process.

A leaf package: it imports nothing else of this project, so the isolation boundary can be
reviewed on its own. See docs/sandbox.md.
"""

"""The parsers. Imported only by the fork server and run only inside a jailed child.

See docs/sandbox.md, "Parsers".
"""

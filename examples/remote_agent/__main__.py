"""``python -m examples.remote_agent``: serve the remote agent (see README.md here)."""

from .server import main

main()

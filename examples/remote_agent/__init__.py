"""A standalone agent service governed by the approval console through its Python client.

No Django and nothing of the console's code: the client package, LangChain, LangGraph and
its SQLite checkpointer. See README.md in this directory.
"""

"""A helpdesk agent written with LangChain's create_agent and governed by the console."""

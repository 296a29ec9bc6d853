"""Demo tools (registered on import). See agents/tools.py for the registry."""

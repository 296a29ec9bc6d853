"""Examples of bringing your own agent to the console."""

"""A user's sitecustomize that fails: Python reports it and goes on, with or without vramledger."""
raise ValueError("broken on purpose")

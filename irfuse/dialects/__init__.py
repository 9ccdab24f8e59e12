"""irfuse's dialects, one a module; `irfuse.context` lists them and loads them into a context."""

"""Solver API (FastAPI): solver prompts and optional answer checks (docs/distributed.md)."""

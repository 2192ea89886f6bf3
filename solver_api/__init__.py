"""Solver API (FastAPI): solver prompts and optional answer checks. Built by issues #4 and #5."""

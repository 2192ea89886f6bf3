"""Executor service: sandboxed validation of proposals and checks of answers (DESIGN.md §5)."""

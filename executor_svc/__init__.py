"""Executor service: sandboxed validation of proposals and checks of answers (docs/design.md §5)."""

"""Alembic revision scripts of the buffer store, oldest first."""

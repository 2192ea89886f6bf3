"""Alembic migrations of the buffer store (run programmatically by `services.store.migrate`)."""

"""Proposer API (FastAPI): proposals, the triplet buffers, seed submission (docs/distributed.md)."""

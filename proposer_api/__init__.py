"""Proposer API (FastAPI): proposals, the triplet buffers, seed submission. Built by issues #4 and #5."""

"""Trainer service: TRR++ updates, checkpoints and weight pushes (docs/design.md §3, docs/trainer-scaling.md)."""

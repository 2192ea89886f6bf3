"""Trainer service: TRR++ updates, checkpoints and weight pushes. Built by issue #6."""

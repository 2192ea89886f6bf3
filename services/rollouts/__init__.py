"""Rollouts: the proposer and solver roles of one policy, from buffer entries to parsed, checked responses.

Shared by the embedded coordinator (in-process) and the proposer/solver HTTP APIs (the distributed profile), so
both profiles build the same prompts and parse the same way.
"""

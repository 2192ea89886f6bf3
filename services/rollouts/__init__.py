"""Rollouts: the proposer and solver roles of one policy, from buffer entries to parsed, checked responses.

Shared by the embedded coordinator (in-process) and the proposer/solver HTTP APIs (the distributed profile), so
both profiles build the same prompts and parse the same way. The `Rollouts` port's two adapters live here too:
`engine_rollouts.EngineRollouts` over an engine in this process, `http_rollouts.HttpRollouts` over the proposer and
solver APIs (the composition root, `azr.factory`, picks one).
"""

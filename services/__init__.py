"""Shared core of the Absolute Zero Reasoner: pure algorithm modules, records, settings, ports, the `azr` CLI."""

__version__ = "0.1.0"

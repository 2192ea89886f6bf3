"""The composition root: the `azr` command, the embedded runner and its run API. It builds the services from
settings and wires them; `services/` (the core) and the service folders never import it."""

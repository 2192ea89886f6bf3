"""The core of the Absolute Zero Reasoner, shared by every service folder and the composition root (`azr/`).

Pure: `algorithm/` (task types, prompts, reading rules, rewards, objectives, task metrics), the records
(`records.py`, `execution.py`) and the ports (`ports/`, every Protocol). With I/O: the ports' adapters (`store/`,
`queues/`, `inference/`), the two roles and their adapters (`rollouts/`), Algorithm 1 (`coordinator/`),
`evaluation/`, `reporting/`, the settings (`settings.py`), what every HTTP service shares (`http/`) and the machine
(`compute/`). It imports no service folder and not `azr/`; inside it the layers run one way (the import contracts in
pyproject.toml)."""

__version__ = "0.1.0"

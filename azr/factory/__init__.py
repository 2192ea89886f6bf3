"""The composition root's one place of wiring: every process is assembled here from settings, by one function that
returns it started, with its closers in one `ExitStack` and its hooks given at construction.

- `open_embedded_run` (azr/factory/embedded.py): `azr run`, the embedded profile in one process;
- `open_coordinator` (coordinator.py): `azr coordinator`;
- `open_trainer` (trainer.py): `azr trainer`, one process or each torchrun rank (rank 0 trains, the others follow);
- `open_proposer_api`, `open_solver_api`, `open_inference_server`, `open_executor_debug_api` (apis.py): `azr serve`;
- `open_executor_worker` (executor_worker.py): `azr worker executor`.

The pieces they share, each picked by a setting (store, episode channels, executor, engine, rollouts, metric sinks,
the self-play loop), are built in `parts` (azr/factory/parts.py), which the small commands (`validate`, `seeds
import`, `eval`) use too. Only this package opens the episode channels and builds rollouts (an import contract).
"""

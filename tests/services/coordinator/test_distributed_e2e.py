"""The distributed profile end to end on loopback, every piece a real process: PostgreSQL, Redis, an RQ executor
worker, `azr serve inference` (tiny model, SGLang wire format), both APIs, `azr trainer` and `azr coordinator`.

Seeding from the first rows of the authors' seed files, then two steps. Checked: episodes of all six groups with
rewards that the executor confirms, buffers in PostgreSQL, a trainer update → checkpoint → weight push → the
inference server serves the new version → the next step's episodes carry it (max_staleness 0 makes the coordinator
wait for it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from throwaway_servers import PrivateDatabase, answers_ok, free_port, wait_for

from executor_svc.executor import Executor
from services.algorithm.task_types import Role, TaskType
from services.rollouts.solving import check_answer, read_answer, solve_task_from_entry
from services.store import open_store

REPO_ROOT = Path(__file__).resolve().parents[3]
TOKEN = "e2e-" + uuid.uuid4().hex
B = 2


class Stack:
    """Starts the services as subprocesses with one environment; stops them all, printing logs on failure."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env, self.logs = env, logs
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"{name}.log", "wb")
        process = subprocess.Popen([sys.executable, "-m", "azr", *args], env=self.env, cwd=self.env["PWD"],
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes[name] = process
        return process

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()



@pytest.fixture()
def stack(tmp_path: Path, redis_url: str, postgres_url: str,
          author_seed_sample: list[Path]) -> Iterator[tuple[Stack, str]]:
    ports = {name: free_port() for name in ("inference", "proposer", "solver")}
    with PrivateDatabase(postgres_url) as database_url:
        env = {**os.environ, "PWD": str(tmp_path),
               "AZR_PROFILE": "distributed", "AZR_API_TOKEN": TOKEN, "AZR_DATABASE_URL": database_url,
               "AZR_REDIS_URL": redis_url, "AZR_RUN_ID": "e2e-" + uuid.uuid4().hex[:8],
               "AZR_RUN_ROOT": str(tmp_path / "runs"), "AZR_EXECUTOR_QUEUE": "e2e-" + uuid.uuid4().hex,
               "AZR_EXECUTOR_BACKEND": "process", "AZR_EXECUTOR_WORKERS": "1", "AZR_MODEL": "tiny",
               "AZR_BATCH_SIZE": str(B), "AZR_MAX_RESPONSE_TOKENS": "16", "AZR_LEARNABILITY_SAMPLES": "2",
               "AZR_SEED_MAX_ROUNDS": "1", "AZR_MAX_STALENESS": "0", "AZR_MICRO_BATCH_SIZE": "4",
               "AZR_CHECKPOINT_EVERY": "1",
               "AZR_SGLANG_URLS": json.dumps([f"http://127.0.0.1:{ports['inference']}"]),
               "AZR_PROPOSER_URL": f"http://127.0.0.1:{ports['proposer']}",
               "AZR_SOLVER_URL": f"http://127.0.0.1:{ports['solver']}",
               "AZR_SEED_FILES": json.dumps([str(path) for path in author_seed_sample])}
        (tmp_path / "logs").mkdir()
        services = Stack(env, tmp_path / "logs")
        try:
            assert subprocess.run([sys.executable, "-m", "azr", "db", "upgrade"], env=env, cwd=tmp_path,
                                  capture_output=True, timeout=120).returncode == 0
            services.start("worker", "worker", "executor")
            services.start("inference", "serve", "inference", "--port", str(ports["inference"]), "--model", "tiny")
            wait_for(lambda: answers_ok(f"http://127.0.0.1:{ports['inference']}/health"), 180, "inference server")
            services.start("proposer", "serve", "proposer", "--port", str(ports["proposer"]))
            services.start("solver", "serve", "solver", "--port", str(ports["solver"]))
            for name in ("proposer", "solver"):
                wait_for(lambda name=name: answers_ok(f"http://127.0.0.1:{ports[name]}/readyz"), 180, f"{name} API")
            services.start("trainer", "trainer", "--max-updates", "2", "--block-s", "0.5")
            yield services, database_url
        except BaseException:
            for name in services.processes:
                print(f"----- {name} -----\n{services.log(name)}")
            raise
        finally:
            services.stop()


@pytest.mark.slow
def test_two_steps_through_every_service(stack: tuple[Stack, str]) -> None:
    services, database_url = stack
    coordinator = services.start("coordinator", "coordinator", "--steps", "2")
    try:
        assert coordinator.wait(timeout=1200) == 0, services.log("coordinator")
        assert services.processes["trainer"].wait(timeout=600) == 0, services.log("trainer")
    except BaseException:
        for name in services.processes:
            print(f"----- {name} -----\n{services.log(name)}")
        raise
    env = services.env
    info = httpx.get(json.loads(env["AZR_SGLANG_URLS"])[0] + "/model_info", timeout=10).json()
    assert info["weight_version"] == "2", info

    store = open_store(database_url)
    try:
        episodes, total = store.list_episodes(env["AZR_RUN_ID"], limit=1000)
        assert total == 2 * 6 * B
        for step, version in ((1, 0), (2, 1)):
            of_step = [e for e in episodes if e.step == step]
            for task_type in TaskType:
                for role in Role:
                    assert len([e for e in of_step if e.task_type is task_type and e.role is role]) == B
            assert {e.policy_version for e in of_step} == {version}, (step, {e.policy_version for e in of_step})
        for task_type in TaskType:
            assert store.count(task_type) > B  # the seed files reached PostgreSQL through the executor
        with Executor(workers=1) as executor:  # the rewards agree with a fresh executor's verdicts
            for episode in [e for e in episodes if e.role is Role.SOLVE]:
                answer, format_ok, _ = read_answer(episode.task_type, episode.text or "")
                entry = store.get(episode.task_type, episode.task_id or "")
                assert entry is not None
                if answer is None or not format_ok:
                    assert episode.reward == -1.0
                else:
                    verdict = check_answer(executor, episode.task_type, solve_task_from_entry(entry), answer)
                    assert episode.reward == (1.0 if verdict.correct else -0.5)
        for episode in [e for e in episodes if e.role is Role.PROPOSE]:
            assert episode.reward == -1.0 or episode.exec_status == "ok"
    finally:
        store.close()
    run_dir = Path(env["AZR_RUN_ROOT"]) / env["AZR_RUN_ID"]
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["v000001", "v000002"]
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) == 2

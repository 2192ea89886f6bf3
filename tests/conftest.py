"""Suite-wide fixtures: where the shared data lives, and the real servers tests need.

A test that needs Redis, PostgreSQL or Docker asks for the fixture. If the server does not answer it is skipped
with the reason shown, unless `AZR_REQUIRE_SERVICES=1` (set by `.ci/run`), where a missing server is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.http.probes import database_unavailable_reason, redis_unavailable_reason

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = Path(os.environ.get("AZR_SHARED_DIR", REPO_ROOT.parent / "shared"))
TEST_REDIS_URL = os.environ.get("AZR_REDIS_URL", "redis://127.0.0.1:6379/0")
TEST_DATABASE_URL = os.environ.get("AZR_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def services_required() -> bool:
    """Whether a missing server must fail the test rather than skip it."""
    return os.environ.get("AZR_REQUIRE_SERVICES", "") == "1"


def skip_or_fail(reason: str) -> None:
    """Skip with a visible reason on a laptop; fail in CI."""
    if services_required():
        pytest.fail(f"required service missing (AZR_REQUIRE_SERVICES=1): {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The shared test-data directory beside the repository (AZR_SHARED_DIR): its `data/` holds the real rows."""
    if not SHARED_DIR.is_dir():
        skip_or_fail(f"shared directory not found at {SHARED_DIR} (set AZR_SHARED_DIR)")
    return SHARED_DIR


SEED_SAMPLE_ROWS = 32


@pytest.fixture(scope="session")
def author_seed_sample(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The first 32 rows of each of the authors' seed files (triplets, then induction programs), under their own names.

    For runs that need real seeds but do not test the import: a whole pair of files takes ~30 s to validate on two
    cores, paid by each run that imports it. Tests of the import itself read the whole files."""
    directory = tmp_path_factory.mktemp("author-seeds")
    sample = []
    for name in ("7b_coder_seed_io.jsonl", "7b_coder_code_f_seed_io.jsonl"):
        lines = (shared_dir / "data" / "azr_seeds" / name).read_text().splitlines(keepends=True)
        (directory / name).write_text("".join(lines[:SEED_SAMPLE_ROWS]))
        sample.append(directory / name)
    return sample


@pytest.fixture(scope="session")
def author_seed_sample_args(author_seed_sample: list[Path]) -> list[str]:
    """`azr run`'s `--seed-file` arguments for `author_seed_sample`."""
    return [arg for path in author_seed_sample for arg in ("--seed-file", str(path))]


@pytest.fixture(scope="session")
def redis_url() -> str:
    """URL of a real Redis server (AZR_REDIS_URL, default 127.0.0.1:6379)."""
    reason = redis_unavailable_reason(TEST_REDIS_URL)
    if reason:
        skip_or_fail(reason)
    return TEST_REDIS_URL


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """URL of a real PostgreSQL database (AZR_DATABASE_URL, default the local `test` database)."""
    reason = database_unavailable_reason(TEST_DATABASE_URL)
    if reason:
        skip_or_fail(reason)
    return TEST_DATABASE_URL


LEAK_MARKER = "azr-marker-"
"""In the command line of every bystander process a test starts (tests/executor_svc): none may outlive the suite."""


def leaked_bystanders() -> list[tuple[int, str]]:
    """(pid, command line) of this process's children that still carry LEAK_MARKER (Linux /proc; else none)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
        if parent == os.getpid() and LEAK_MARKER in command:
            found.append((int(entry.name), command))
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A test that started a bystander and skipped or failed before stopping it leaves a process behind for an
    hour: kill it, and fail the run so the test gets fixed."""
    leaks = leaked_bystanders()
    for pid, _ in leaks:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    if leaks:
        lines = "\n".join(f"  pid {pid}: {command}" for pid, command in leaks)
        session.config.get_terminal_writer().line(f"\nprocesses left running by tests (killed now):\n{lines}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

"""Buffer store figures with 16,384 entries per buffer: sample-K latency (PostgreSQL and SQLite), insert throughput.

Baselines measured in the same run, on the same database:
- sampling: the obvious query `SELECT * ... WHERE buffer = ? ORDER BY random() LIMIT 6` (reads the whole buffer),
  and a bare `SELECT 1` round trip through the same pool (the floor of any query on this machine at that moment);
- inserting: one raw psycopg `INSERT` + `COMMIT` per row into an unindexed scratch table (no de-duplication,
  no lock, no cap): the floor a durable one-row-per-transaction insert cannot beat.

The buffers are filled up to the cap by a bulk load (setup, not measured); `SqlTripletStore.insert_triplet` is
then measured below the cap and at the cap (every insert evicts the oldest proposal). The RQ round trip belongs
to the queue benchmark.

    .venv/bin/python bench/store.py [--rows 16384] [--samples 2000] [--inserts 1000] [--writers 4]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from sqlalchemy import create_engine, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from services.algorithm.task_types import TaskType  # noqa: E402
from services.records import InductionTask, Triplet, TripletSource  # noqa: E402
from services.store import SqlTripletStore, open_store  # noqa: E402
from services.store.entry_rows import induction_row, triplet_row  # noqa: E402
from services.store.schema import buffer_entries, buffer_sizes  # noqa: E402

ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def program(index: int) -> str:
    return f"def f(numbers, k):\n    total = {index}\n    for n in numbers:\n        total += n * k\n    return total"


def triplet(buffer: TaskType, index: int, source: TripletSource = TripletSource.PROPOSED) -> Triplet:
    return Triplet(buffer=buffer, program=program(index), input="[1, 2, 3], 2", output=str(index + 12), source=source)


def induction(index: int) -> InductionTask:
    return InductionTask(program=program(index), inputs=[f"[{i}], 2" for i in range(10)],
                         outputs=[str(index + 2 * i) for i in range(10)], message="sums scaled numbers")


def bulk_fill(store: SqlTripletStore, rows: int) -> None:
    """Setup: `rows` entries per buffer in one transaction, with dense slots (as the store would leave them)."""
    with store.engine.begin() as connection:
        for buffer in TaskType:
            batch = []
            for index in range(rows):
                row = induction_row(induction(index)) if buffer == TaskType.INDUCTION else triplet_row(
                    triplet(buffer, index, TripletSource.SEED if index < 256 else TripletSource.PROPOSED))
                batch.append({**row, "slot": index})
            connection.execute(buffer_entries.insert(), batch)
            connection.execute(buffer_sizes.update().where(buffer_sizes.c.buffer == buffer.value).values(size=rows))
    with store.engine.connect() as connection:  # fresh statistics, as autovacuum would gather them
        connection.exec_driver_sql("ANALYZE")
        connection.commit()


def latencies_ms(operation: Callable[[], Any], repeats: int) -> list[float]:
    for _ in range(min(50, repeats)):  # warm the pool and the statement cache
        operation()
    timings = []
    for _ in range(repeats):
        started = time.perf_counter_ns()
        operation()
        timings.append((time.perf_counter_ns() - started) / 1e6)
    return timings


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def insert_rate(store: SqlTripletStore, start: int, count: int) -> float:
    started = time.perf_counter()
    for index in range(start, start + count):
        store.insert_triplet(triplet(TaskType.DEDUCTION, index))
    return count / (time.perf_counter() - started)


def _writer(url: str, start: int, count: int, cap: int) -> float:
    with open_store(url, buffer_cap=cap) as store:
        return insert_rate(store, start, count)


def concurrent_insert_rate(url: str, start: int, count: int, writers: int, cap: int) -> float:
    context = multiprocessing.get_context("fork")
    started = time.perf_counter()
    with context.Pool(writers) as pool:
        pool.starmap(_writer, [(url, start + w * count, count, cap) for w in range(writers)])
    return writers * count / (time.perf_counter() - started)


def raw_insert_rate(url: str, count: int) -> float:
    import psycopg

    with psycopg.connect(make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)) as conn:
        conn.execute("CREATE TABLE bench_raw (program text, input text, output text)")
        conn.commit()
        started = time.perf_counter()
        for index in range(count):
            conn.execute("INSERT INTO bench_raw VALUES (%s, %s, %s)", (program(index), "[1, 2, 3], 2", str(index)))
            conn.commit()
        return count / (time.perf_counter() - started)


def private_postgres() -> Iterator[str]:
    name = f"azr_bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def sample_figures(store: SqlTripletStore, samples: int, k: int) -> dict[str, list[float]]:
    rng = random.Random(0)
    ours = latencies_ms(lambda: store.sample_references(TaskType.DEDUCTION, k, rng), samples)
    naive_sql = text("SELECT * FROM buffer_entries WHERE buffer = 'deduction' ORDER BY random() LIMIT :k")

    def naive() -> None:
        with store.engine.connect() as connection:
            connection.execute(naive_sql, {"k": k}).all()

    baseline = latencies_ms(naive, max(100, samples // 10))

    def bare_round_trip() -> None:
        with store.engine.connect() as connection:
            connection.exec_driver_sql("SELECT 1").scalar()

    floor = latencies_ms(bare_round_trip, samples)
    batch = latencies_ms(lambda: store.sample_batch(TaskType.DEDUCTION, 64, [], rng), max(100, samples // 10))
    return {"ours": ours, "baseline": baseline, "batch64": batch, "floor": floor}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16_384, help="entries per buffer (the cap)")
    parser.add_argument("--samples", type=int, default=2000, help="timed sample-K calls per database")
    parser.add_argument("--inserts", type=int, default=1000, help="timed inserts per phase")
    parser.add_argument("--writers", type=int, default=4, help="processes in the concurrent insert phase")
    parser.add_argument("--k", type=int, default=6)
    args = parser.parse_args()
    table: list[tuple[str, str, str]] = []

    for url in private_postgres():
        with open_store(url, buffer_cap=args.rows, create=True) as store:
            below = insert_rate(store, 10_000_000, args.inserts)  # into an empty buffer: no eviction
            with store.engine.begin() as connection:
                connection.execute(text("DELETE FROM buffer_entries"))
                connection.execute(text("UPDATE buffer_sizes SET size = 0"))
            bulk_fill(store, args.rows)
            figures = sample_figures(store, args.samples, args.k)
            at_cap = insert_rate(store, 20_000_000, args.inserts)  # every insert evicts one proposal
            assert store.count(TaskType.DEDUCTION) == args.rows
        concurrent = concurrent_insert_rate(url, 30_000_000, args.inserts // args.writers, args.writers, args.rows)
        raw = raw_insert_rate(url, args.inserts)
        ours = figures["ours"]
        table += [
            ("postgres sample-K p50 / p99 (ms)", f"{percentile(ours, .5):.2f} / {percentile(ours, .99):.2f}",
             f"ORDER BY random(): {percentile(figures['baseline'], .5):.2f} / "
             f"{percentile(figures['baseline'], .99):.2f}  "
             f"(x{statistics.median(figures['baseline']) / statistics.median(ours):.0f} faster at p50)"),
            ("postgres bare SELECT 1 round trip p50 / p99 (ms)",
             f"{percentile(figures['floor'], .5):.2f} / {percentile(figures['floor'], .99):.2f}",
             "the floor of any query on this machine right now"),
            ("postgres sample_batch B=64 p50 / p99 (ms)",
             f"{percentile(figures['batch64'], .5):.2f} / {percentile(figures['batch64'], .99):.2f}", ""),
            ("postgres insert, below cap (rows/s)", f"{below:.0f}",
             f"raw INSERT+COMMIT: {raw:.0f}  (ours = {below / raw:.2f}x)"),
            ("postgres insert, at cap with eviction (rows/s)", f"{at_cap:.0f}", f"ours = {at_cap / raw:.2f}x raw"),
            (f"postgres insert, {args.writers} processes (rows/s)", f"{concurrent:.0f}", ""),
        ]

    with tempfile.TemporaryDirectory() as directory:
        with open_store(f"sqlite:///{directory}/bench.sqlite3", buffer_cap=args.rows, create=True) as store:
            bulk_fill(store, args.rows)
            figures = sample_figures(store, args.samples, args.k)
            at_cap = insert_rate(store, 20_000_000, args.inserts)
        ours = figures["ours"]
        table += [
            ("sqlite sample-K p50 / p99 (ms)", f"{percentile(ours, .5):.2f} / {percentile(ours, .99):.2f}",
             f"ORDER BY random(): {percentile(figures['baseline'], .5):.2f} / "
             f"{percentile(figures['baseline'], .99):.2f}"),
            ("sqlite sample_batch B=64 p50 / p99 (ms)",
             f"{percentile(figures['batch64'], .5):.2f} / {percentile(figures['batch64'], .99):.2f}", ""),
            ("sqlite insert, at cap with eviction (rows/s)", f"{at_cap:.0f}", ""),
        ]

    load = " / ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"buffer store, {args.rows} entries per buffer, K={args.k}, {args.samples} timed samples, "
          f"{os.cpu_count()} CPUs, load average {load}")
    width = max(len(row[0]) for row in table)
    for name, value, baseline in table:
        print(f"{name:<{width}}  {value:>14}  {baseline}")


if __name__ == "__main__":
    main()

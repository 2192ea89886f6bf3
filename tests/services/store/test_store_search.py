"""The buffer page's exact-step filter and text search (`list_entries(step=..., text=...)`) on SQLite and PostgreSQL."""

from __future__ import annotations

from services.algorithm.task_types import TaskType
from services.records import InductionTask, Triplet, TripletSource
from services.store import SqlTripletStore


def stored(store: SqlTripletStore, program: str, input: str, output: str, *, step: int = 0,
           source: TripletSource = TripletSource.PROPOSED) -> str:
    triplet = Triplet(buffer=TaskType.DEDUCTION, program=program, input=input, output=output, step=step, source=source)
    return store.insert_triplet(triplet).id


def ids(entries: list) -> set[str]:
    return {entry.id for entry in entries}


def test_step_filter_is_exact_and_combines_with_the_others(store: SqlTripletStore) -> None:
    by_step = {step: [stored(store, f"def f(x):\n    return x * {step}{k}", "2", str(2 * int(f"{step}{k}")), step=step,
                             source=TripletSource.SEED if k == 0 else TripletSource.PROPOSED) for k in range(3)]
               for step in range(4)}
    page, total = store.list_entries(TaskType.DEDUCTION, step=2)
    assert total == 3 and ids(page) == set(by_step[2])
    page, total = store.list_entries(TaskType.DEDUCTION, step=2, source=TripletSource.SEED)
    assert total == 1 and ids(page) == {by_step[2][0]}
    assert store.list_entries(TaskType.DEDUCTION, step=1, min_step=2) == ([], 0)
    assert store.list_entries(TaskType.DEDUCTION, step=9) == ([], 0)
    assert store.list_entries(TaskType.ABDUCTION, step=2) == ([], 0)


def test_text_search_looks_in_program_input_and_output_ignoring_case(store: SqlTripletStore) -> None:
    in_program = stored(store, "def f(s):\n    return s.upper()  # Shout", "'a'", "'A'")
    in_input = stored(store, "def f(s):\n    return len(s)", "'Zebra crossing'", "14")
    in_output = stored(store, "def f(n):\n    return 'x' * n", "3", "'xxx'")
    assert ids(store.list_entries(TaskType.DEDUCTION, text="UPPER")[0]) == {in_program}
    assert ids(store.list_entries(TaskType.DEDUCTION, text="shout")[0]) == {in_program}
    assert ids(store.list_entries(TaskType.DEDUCTION, text="zebra")[0]) == {in_input}
    assert ids(store.list_entries(TaskType.DEDUCTION, text="'XXX'")[0]) == {in_output}
    page, total = store.list_entries(TaskType.DEDUCTION, text="def f(s)")
    assert total == 2 and ids(page) == {in_program, in_input}
    assert store.list_entries(TaskType.DEDUCTION, text="nowhere to be found") == ([], 0)
    assert store.list_entries(TaskType.DEDUCTION, text="")[1] == 3  # an empty search filters nothing


def test_like_wildcards_in_the_search_match_only_themselves(store: SqlTripletStore) -> None:
    percent = stored(store, "def f(x):\n    return f'{x}%'", "5", "'5%'")
    underscore = stored(store, "def f(a_b):\n    return a_b", "1", "1")
    slashes = stored(store, "def f(ab):\n    return ab // 2", "4", "2")
    assert ids(store.list_entries(TaskType.DEDUCTION, text="%")[0]) == {percent}
    assert ids(store.list_entries(TaskType.DEDUCTION, text="a_b")[0]) == {underscore}
    assert ids(store.list_entries(TaskType.DEDUCTION, text="b /")[0]) == {slashes}
    assert ids(store.list_entries(TaskType.DEDUCTION, text="\\")[0]) == set()


def test_text_search_covers_induction_inputs_outputs_and_message(store: SqlTripletStore) -> None:
    task = InductionTask(program="def f(word):\n    return word[::-1]", inputs=["'kayak'", "'Rotor'", "'abc'", "'xy'"],
                         outputs=["'kayak'", "'rotoR'", "'cba'", "'yx'"], message="Reverses the Word")
    entry_id = store.insert_induction(task).id
    store.insert_induction(InductionTask(program="def f(n):\n    return n + 1", inputs=["1", "2"], outputs=["2", "3"],
                                         message="adds one"))
    for needle in ("ROTOR", "'cba'", "reverses the word", "[::-1]"):
        page, total = store.list_entries(TaskType.INDUCTION, text=needle)
        assert (total, ids(page)) == (1, {entry_id}), needle

"""The dashboard in a real headless Chromium against a real proposer API (uvicorn on loopback, SQLite store with the
authors' seed triplets, recorded steps and episodes): the curves carry the recorded points, the table shows the
buffer's entries, an entry named in the URL fragment opens with a highlighted program and its solve history, and
hostile program text stays text.

Chromium runs with `--dump-dom` under a virtual time budget (it waits for the page's fetches); the page sets
`body[data-ready]` once its first complete render is in the DOM, so a snapshot without it is a failure.
"""

from __future__ import annotations

import io
import json
import keyword
import re
import shutil
import subprocess
import tokenize
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from proposer_servers import serve, settings_for
from throwaway_servers import LoopbackServer, skip_or_fail

from proposer_api.app import create_proposer_app
from services.algorithm.task_types import Role, TaskType
from services.records import Episode, InductionTask, Triplet, TripletSource
from services.store import open_store

pytestmark = pytest.mark.slow

VOID_ELEMENTS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
GROUPS = [(task_type.value, role.value) for task_type in TaskType for role in Role]
RUN_B_STEPS = range(1, 7)
EVAL_STEPS = (3, 6)
PAGE_SIZE = 25  # the page's rows per table page (browser.js PAGE_SIZE)

HOSTILE_PROGRAM = '''def f(text: str, n=2):
    # </script><img src=x onerror="document.body.dataset.pwned=1">
    banner = """</script><img src=x onerror=document.body.dataset.pwned=1>"""
    return (text * n)[:10] + banner[0:9] + f'{n:>3}' + 'a\\'b' + str(0x1F) + str(1.5e3)'''
"""A user-submitted program with every token kind and markup that would run if it were parsed as HTML."""


# ---------------------------------------------------------------------------------------------------- a small DOM


@dataclass
class Node:
    """An element of the dumped DOM: tag, attributes, children (nodes and text)."""

    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    def text(self) -> str:
        """The text content, as the DOM's textContent."""
        return "".join(child if isinstance(child, str) else child.text() for child in self.children)

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Node]:
        """Descendants with this tag, class and attribute values (`data_key` stands for `data-key`), in order."""
        wanted = {name.replace("_", "-"): value for name, value in attrs.items()}
        found = []
        for child in self.children:
            if isinstance(child, str):
                continue
            if ((tag is None or child.tag == tag) and (cls is None or cls in child.classes())
                    and all(child.attrs.get(name) == value for name, value in wanted.items())):
                found.append(child)
            found.extend(child.find_all(tag, cls, **attrs))
        return found

    def one(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> Node:
        """The single descendant matching; fails the test when there is none or several."""
        matches = self.find_all(tag, cls, **attrs)
        assert len(matches) == 1, f"expected one <{tag} class={cls} {attrs}>, found {len(matches)}"
        return matches[0]


class DomBuilder(HTMLParser):
    """Builds `Node`s from Chromium's serialised DOM (every non-void element has its end tag)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.open: list[Node] = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {name: value or "" for name, value in attrs})
        self.open[-1].children.append(node)
        if tag not in VOID_ELEMENTS:
            self.open.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.open[-1].children.append(Node(tag, {name: value or "" for name, value in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.open) - 1, 0, -1):
            if self.open[depth].tag == tag:
                del self.open[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.open[-1].children.append(data)


# ---------------------------------------------------------------------------------------------------- fixtures


@dataclass
class Dashboard:
    """The served dashboard and what was stored behind it."""

    url: str
    store: Any
    seed_id: str  # a seed triplet with a solve history
    hostile_id: str
    induction_id: str
    attempts: list[Episode]  # the seed entry's solve attempts, in step order
    run_b: dict[int, dict[str, float]]  # step -> metrics line


@pytest.fixture(scope="module")
def chromium() -> str:
    """The headless browser (Debian's `chromium`)."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        skip_or_fail("chromium is not installed (apt-get install chromium): the dashboard browser test needs it")
    return str(binary)


def metrics_line(step: int) -> dict[str, float]:
    """A run-b metrics line: every curve family, plus keys the dashboard must not draw (time/, task/n_tasks)."""
    line: dict[str, float] = {"step": step, "time/total": 3.5 + step, "task/n_tasks": 6.0}
    for index, (task_type, role) in enumerate(GROUPS):
        line[f"reward/{task_type}/{role}"] = round(((step * 7 + index * 3) % 11) / 10 - 0.5, 3)
        line[f"response_tokens/{task_type}/{role}"] = 80.0 + 13 * step + 5 * index
        line[f"format_ok/{task_type}/{role}"] = round(((step * 5 + index) % 7) / 6, 3)
    for index, task_type in enumerate(TaskType):
        line[f"valid_rate/{task_type.value}"] = round(0.2 + 0.1 * ((step + index) % 5), 3)
        line[f"buffer/{task_type.value}"] = 40 + 6 * step + index
    line["task/cognitive_complexity"] = 1.5 + (step % 3)
    line["task/deduction/cognitive_complexity"] = 2.0 + step / 4
    if step in EVAL_STEPS:
        line["eval/cruxeval_o"] = 0.1 * step
    return line


def hostile_triplet() -> Triplet:
    namespace: dict[str, Any] = {}
    exec(HOSTILE_PROGRAM, namespace)  # our own test program: its output is computed, as the executor would
    return Triplet(buffer=TaskType.DEDUCTION, program=HOSTILE_PROGRAM, input="'<b>bold</b>'",
                   output=repr(namespace["f"]("<b>bold</b>")), source=TripletSource.USER, step=5)


def solve_episode(run_id: str, step: int, index: int, task_id: str, reward: float, role: Role = Role.SOLVE) -> Episode:
    return Episode(id=f"{run_id}/{step}/deduction/{role.value}/{index}", run_id=run_id, step=step,
                   task_type=TaskType.DEDUCTION, role=role, prompt_ids=[1, 2, 3], response_ids=list(range(index + 4)),
                   reward=reward, policy_version=step, task_id=task_id, exec_status="ok" if reward > 0 else "wrong",
                   text=f"<think>step {step}</think><answer><img src=x> {index}</answer>")


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory, sandbox: Any, shared_dir: Path) -> Iterator[Dashboard]:
    """A proposer API on loopback over a SQLite store holding seeds, a hostile entry, two runs and episodes."""
    seeds_dir = shared_dir / "data" / "azr_seeds"
    store = open_store(f"sqlite:///{tmp_path_factory.mktemp('dashboard') / 'buffers.sqlite3'}", create=True)
    try:
        store.initialise()
        rows = [json.loads(line) for line in (seeds_dir / "7b_coder_seed_io.jsonl").open() if line.strip()][:40]
        seed_ids = [store.insert_triplet(Triplet(buffer=TaskType.DEDUCTION, program=row["snippet"], input=row["input"],
                                                 output=row["output"], imports=row.get("imports") or [],
                                                 source=TripletSource.SEED)).id for row in rows]
        seed_id = seed_ids[_richest_program(rows)]
        hostile_id = store.insert_triplet(hostile_triplet()).id
        induction_rows = [json.loads(line) for line in (seeds_dir / "7b_coder_code_f_seed_io.jsonl").open()][:3]
        induction_ids = [store.insert_induction(InductionTask(
            program=row["snippet"], inputs=row["inputs"], outputs=row["outputs"], message=row["message"],
            source=TripletSource.SEED)).id for row in induction_rows]
        for step in (1, 2):
            store.record_step("run-a", step, step - 1, {"reward/deduction/solve": 0.25 * step})
        run_b = {step: metrics_line(step) for step in RUN_B_STEPS}
        for step, line in run_b.items():
            store.record_step("run-b", step, step - 1, line)
        attempts = [solve_episode("run-b", 1, 0, seed_id, -0.5), solve_episode("run-b", 2, 1, seed_id, 1.0),
                    solve_episode("run-b", 4, 0, seed_id, 1.0)]
        store.record_episodes(attempts + [solve_episode("run-b", 1, 5, seed_id, 0.3, role=Role.PROPOSE),
                                          solve_episode("run-b", 2, 2, seed_ids[0], 1.0)])
        with serve(settings_for(f"tok-{uuid.uuid4().hex}"), store, sandbox) as url:
            yield Dashboard(url, store, seed_id, hostile_id, induction_ids[1], attempts, run_b)
    finally:
        store.close()


def _richest_program(rows: list[dict[str, Any]]) -> int:
    """Index of the seed program with the most string and number tokens (the best highlighting exercise)."""
    def literals(index: int) -> int:
        return sum(kind in ("str", "num") for kind, _ in python_tokens(rows[index]["snippet"]))

    return max(range(len(rows)), key=literals)


def render(chromium: str, url: str, profile: Path, budget_ms: int = 3000) -> Node:
    """The DOM Chromium holds after `budget_ms` of virtual time (which stands still while fetches are pending), parsed.
    The page polls every 4 s, so the default budget sees the first render only."""
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
               "--disable-extensions", "--disable-background-networking", f"--user-data-dir={profile}",
               f"--virtual-time-budget={budget_ms}", "--dump-dom", url]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, f"chromium failed ({result.returncode}): {result.stderr[-3000:]}"
    builder = DomBuilder()
    builder.feed(result.stdout)
    body = builder.root.one("body")
    status = body.one(id="status")
    assert body.attrs.get("data-ready") == "1", f"the page never finished its first render; status: {status.text()!r}"
    assert status.attrs.get("data-state") == "ok", f"the page reported: {status.text()!r}"
    return builder.root


# ---------------------------------------------------------------------------------------------------- checks


def python_tokens(program: str) -> list[tuple[str, str]]:
    """(kind, text) of the tokens the page must highlight, as Python itself tokenizes the program."""
    kinds = {tokenize.COMMENT: "com", tokenize.STRING: "str", tokenize.NUMBER: "num"}
    tokens = []
    for token in tokenize.generate_tokens(io.StringIO(program).readline):
        if token.type in kinds:
            tokens.append((kinds[token.type], token.string))
        elif token.type == tokenize.NAME and keyword.iskeyword(token.string):
            tokens.append(("kw", token.string))
    return tokens


def highlighted(pre: Node, kinds: tuple[str, ...] = ("com", "str", "num", "kw")) -> list[tuple[str, str]]:
    """(kind, text) of the page's token spans of those kinds, in order."""
    spans = pre.find_all("span")
    return [(span.attrs["class"][len("tok-"):], span.text()) for span in spans
            if span.attrs.get("class", "").startswith("tok-") and span.attrs["class"][len("tok-"):] in kinds]


def path_points(d: str) -> list[tuple[float, float]]:
    """The vertices of an SVG path written as `M x,y L x,y ...`."""
    assert re.fullmatch(r"M[\d.\-]+,[\d.\-]+( L[\d.\-]+,[\d.\-]+)*", d), d
    return [(float(x), float(y)) for x, y in re.findall(r"[ML]([\d.\-]+),([\d.\-]+)", d)]


def assert_affine(pairs: list[tuple[float, float]], decreasing: bool, what: str) -> None:
    """Every (value, coordinate) pair lies on one line (the chart's scale), rising or falling as told."""
    low, high = min(pairs), max(pairs)
    assert high[0] > low[0], f"{what}: no spread to check"
    slope = (high[1] - low[1]) / (high[0] - low[0])
    assert (slope < 0) if decreasing else (slope > 0), f"{what}: slope {slope}"
    for value, coordinate in pairs:
        expected = low[1] + (value - low[0]) * slope
        assert coordinate == pytest.approx(expected, abs=0.02), f"{what}: {value} -> {coordinate}"


def expected_families(lines: dict[int, dict[str, float]]) -> dict[str, set[str]]:
    families: dict[str, set[str]] = {}
    for line in lines.values():
        for key in line:
            prefix = key.split("/")[0]
            if prefix in ("reward", "format_ok", "response_tokens", "valid_rate", "buffer", "eval"):
                families.setdefault(prefix, set()).add(key)
            elif prefix == "task" and not key.endswith("/n_tasks"):
                families.setdefault("task/" + key.split("/")[-1], set()).add(key)
    return families


# ---------------------------------------------------------------------------------------------------- tests


def test_the_curves_and_the_table_show_the_stored_run_and_buffer(dashboard: Dashboard, chromium: str,
                                                                 tmp_path: Path) -> None:
    dom = render(chromium, f"{dashboard.url}/dashboard", tmp_path / "profile")
    charts = dom.one(id="charts")
    assert charts.attrs["data-steps"] == str(len(RUN_B_STEPS))  # the most recently active run is shown first
    families = expected_families(dashboard.run_b)
    drawn = {svg.attrs["data-metric"]: svg for svg in charts.find_all("svg", cls="chart")}
    assert set(drawn) == set(families)  # time/ and task/n_tasks are not curves
    for family, keys in families.items():
        paths = {path.attrs["data-key"]: path for path in drawn[family].find_all("path", cls="series")}
        assert set(paths) == keys, family
        steps_and_values, values_and_ys = [], []
        for key, path in paths.items():
            recorded = [(step, line[key]) for step, line in dashboard.run_b.items() if key in line]
            points = path_points(path.attrs["d"])
            assert int(path.attrs["data-points"]) == len(points) == len(recorded), key
            steps_and_values += [(step, x) for (step, _), (x, _) in zip(recorded, points)]
            values_and_ys += [(value, y) for (_, value), (_, y) in zip(recorded, points)]
        assert_affine(steps_and_values, decreasing=False, what=f"{family} x")  # steps to the right
        assert_affine(values_and_ys, decreasing=True, what=f"{family} y")  # larger values higher up
    assert int(drawn["eval"].one("path", cls="series").attrs["data-points"]) == len(EVAL_STEPS)
    options = [option.text() for option in dom.one("select", id="run").find_all("option")]
    assert options == ["run-b (6 steps)", "run-a (2 steps)"]

    stored, total = dashboard.store.list_entries(TaskType.DEDUCTION, limit=PAGE_SIZE)
    rows = dom.one("table", id="entries").one("tbody").find_all("tr")
    assert [row.attrs["data-entry-id"] for row in rows] == [entry.id for entry in stored]
    for row, entry in zip(rows, stored):
        cells = {cell.attrs.get("class"): cell.text() for cell in row.find_all("td")}
        assert (cells["step"], cells["source"]) == (str(entry.step), entry.source.value)
        assert cells["program"].startswith(" ".join(entry.program.split())[:40])
    assert dom.one(id="page-info").text() == f"1–{PAGE_SIZE} of {total}"
    hostile_row = dom.one("tr", data_entry_id=dashboard.hostile_id)
    assert "</script><img src=x" in hostile_row.one("td", cls="program").text()
    assert dom.find_all("img") == []  # entry text never became markup


def test_an_entry_in_the_fragment_opens_highlighted_with_its_solve_history(dashboard: Dashboard, chromium: str,
                                                                            tmp_path: Path) -> None:
    url = f"{dashboard.url}/dashboard#run=run-a&buffer=deduction&entry={dashboard.seed_id}"
    dom = render(chromium, url, tmp_path / "profile")
    assert dom.one(id="charts").attrs["data-steps"] == "2"  # the run named in the fragment
    entry = dashboard.store.get(TaskType.DEDUCTION, dashboard.seed_id)
    detail = dom.one("section", id="detail")
    assert (detail.attrs["data-state"], detail.attrs["data-entry-id"]) == ("shown", dashboard.seed_id)
    program = detail.one("pre", id="program")
    assert program.text() == entry.program
    assert highlighted(program) == python_tokens(entry.program)
    assert [span.text() for span in program.find_all("span", cls="tok-def")] == ["f"]
    assert detail.one("pre", id="entry-input").text() == entry.input
    assert detail.one("pre", id="entry-output").text() == entry.output
    history = detail.one("table", id="history").one("tbody").find_all("tr")
    assert [row.attrs["data-episode-id"] for row in history] == [episode.id for episode in dashboard.attempts]
    for row, episode in zip(history, dashboard.attempts):
        assert float(row.attrs["data-reward"]) == episode.reward
        assert row.one("td", cls="step").text() == str(episode.step)
        assert row.one("td", cls="response").one("pre").text() == episode.text  # its <img> stayed text
    assert "selected" in dom.one("tr", data_entry_id=dashboard.seed_id).classes()
    assert dom.find_all("img") == []


def test_hostile_program_text_renders_as_highlighted_text(dashboard: Dashboard, chromium: str, tmp_path: Path) -> None:
    url = f"{dashboard.url}/dashboard#buffer=deduction&source=user&q=SCRIPT&entry={dashboard.hostile_id}"
    dom = render(chromium, url, tmp_path / "profile")
    assert [row.attrs["data-entry-id"] for row in dom.one("table", id="entries").one("tbody").find_all("tr")] == [
        dashboard.hostile_id]  # the fragment's source filter and search
    assert dom.one(id="page-info").text() == "1–1 of 1"
    program = dom.one("pre", id="program")
    assert program.text() == HOSTILE_PROGRAM
    assert highlighted(program) == python_tokens(HOSTILE_PROGRAM)
    assert [span.text() for span in program.find_all("span", cls="tok-builtin")] == ["str", "str", "str"]
    assert dom.one("pre", id="entry-input").text() == "'<b>bold</b>'"
    assert dom.find_all("img") == [] and dom.one(id="detail").find_all("b") == []
    assert "data-pwned" not in dom.one("body").attrs


def test_an_induction_entry_shows_its_message_and_given_and_hidden_pairs(dashboard: Dashboard, chromium: str,
                                                                        tmp_path: Path) -> None:
    url = f"{dashboard.url}/dashboard#buffer=induction&entry={dashboard.induction_id}"
    dom = render(chromium, url, tmp_path / "profile")
    task = dashboard.store.get(TaskType.INDUCTION, dashboard.induction_id)
    stored, _ = dashboard.store.list_entries(TaskType.INDUCTION)
    rows = dom.one("table", id="entries").one("tbody").find_all("tr")
    assert [row.attrs["data-entry-id"] for row in rows] == [entry.id for entry in stored]
    detail = dom.one("section", id="detail")
    assert detail.one(id="entry-message").text() == task.message
    assert highlighted(detail.one("pre", id="program")) == python_tokens(task.program)
    pairs = detail.one("table", id="pairs").one("tbody").find_all("tr")
    given = len(task.inputs) // 2
    assert [[cell.text() for cell in row.find_all("td")] for row in pairs] == [
        [str(index), task.inputs[index], task.outputs[index], "given" if index < given else "hidden"]
        for index in range(len(task.inputs))]
    assert detail.one("table", id="history").one("tbody").find_all("tr") == []
    assert "0 attempts" in detail.one(id="history-title").text()


def test_the_page_polls_and_appends_only_the_new_steps(chromium: str, sandbox: Any, tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'live.sqlite3'}", create=True)
    for step in (1, 2, 3):
        store.record_step("run-live", step, step, {"reward/induction/solve": step / 4})
    settings = settings_for(f"tok-{uuid.uuid4().hex}")
    app = create_proposer_app(settings.api, settings.rollout, store, sandbox)
    polls: list[str | None] = []

    @app.middleware("http")
    async def a_step_arrives_after_the_first_poll(request: Any, call_next: Any) -> Any:
        response = await call_next(request)
        if request.url.path == "/v1/runs/run-live/steps":
            polls.append(request.query_params.get("since_step"))
            if len(polls) == 1:
                store.record_step("run-live", 4, 4, {"reward/induction/solve": 0.1})
        return response

    try:
        with LoopbackServer(app) as url:
            dom = render(chromium, f"{url}/dashboard", tmp_path / "profile", budget_ms=6000)  # one poll after the first
    finally:
        store.close()
    assert polls[:2] == [None, "3"] and set(polls[2:]) <= {"4"}  # the second fetch asked only for newer steps
    assert dom.one(id="charts").attrs["data-steps"] == "4"
    path = dom.one("svg", cls="chart", data_metric="reward").one("path", cls="series")
    points = path_points(path.attrs["d"])
    assert path.attrs["data-key"] == "reward/induction/solve" and len(points) == 4
    assert points[3][1] > points[0][1] > points[1][1] > points[2][1]  # 0.1 < 0.25 < 0.5 < 0.75, lower is larger y

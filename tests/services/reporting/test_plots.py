"""The figures on hand-written metrics: all five written, real pictures with the expected line colours, gaps and
empty panels drawn without crashing, figures that change with the data, and the two figures that may be left out."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from services.reporting.plots import (
    CRUXEVAL_COLOURS,
    DPI,
    NO_CRUXEVAL,
    NO_FORMAT_OK,
    NO_TASK_METRICS,
    ROLE_COLOURS,
    TYPE_COLOURS,
    cruxeval_figure,
    format_ok_figure,
    response_length_figure,
    rewards_figure,
    task_complexity_figure,
    trailing_mean,
    write_figures,
)
from services.reporting.run_metrics import RunMetrics, Series, load_run_metrics, parse_metrics_text
from tests.services.reporting.png_checks import assert_real_figure, pixels_of_colour, read_rgb
from tests.services.reporting.synthetic_metrics import metrics_line, write_run

ALL_FIGURES = ["rewards.png", "format_ok.png", "response_length.png", "proposals.png", "task_complexity.png",
               "cruxeval.png"]
LINE_PIXELS = 100  # a drawn 3-step line at 100 dpi covers several hundred pixels of its colour


def render(tmp_path: Path, name: str, lines: list[dict]) -> tuple[Path, list[Path], dict[str, str]]:
    run_dir = write_run(tmp_path / name, lines)
    report = write_figures(load_run_metrics(run_dir), run_dir / "plots")
    return run_dir / "plots", report.written, report.not_written


def test_every_figure_is_written_and_shows_its_lines(tmp_path: Path) -> None:
    lines = [metrics_line(step, with_eval=step in (1, 3, 5)) for step in range(1, 6)]
    out, written, not_written = render(tmp_path, "full", lines)
    assert [path.name for path in written] == ALL_FIGURES and not_written == {}
    images = {name: assert_real_figure(out / name) for name in ALL_FIGURES}
    for name in ("rewards.png", "format_ok.png", "response_length.png"):
        for role, colour in ROLE_COLOURS.items():
            assert pixels_of_colour(images[name], colour) > LINE_PIXELS, (name, role)
    for name in ("proposals.png", "task_complexity.png"):
        for task_type, colour in TYPE_COLOURS.items():
            assert pixels_of_colour(images[name], colour) > LINE_PIXELS, (name, task_type)
    for key, colour in CRUXEVAL_COLOURS.items():
        assert pixels_of_colour(images["cruxeval.png"], colour) > LINE_PIXELS, key
    assert not list(out.glob(".*.partial")), "a partial file was left behind"


def test_the_colour_check_finds_nothing_where_no_line_is_drawn(tmp_path: Path) -> None:
    lines = [{key: value for key, value in metrics_line(step).items() if not key.endswith("/solve")}
             for step in range(1, 4)]
    out, _, _ = render(tmp_path, "propose-only", lines)
    image = read_rgb(out / "rewards.png")
    assert pixels_of_colour(image, ROLE_COLOURS["propose"]) > LINE_PIXELS
    assert pixels_of_colour(image, ROLE_COLOURS["solve"]) == 0


def figure_pixels(figure: Figure, path: Path) -> np.ndarray:
    figure.savefig(path, dpi=DPI, format="png")
    return read_rgb(path)


def test_the_figures_depend_on_the_data(tmp_path: Path) -> None:
    def run_of(shift: float) -> RunMetrics:
        text = "".join(json.dumps(metrics_line(step, reward_shift=shift, with_task_metrics=False)) + "\n"
                       for step in range(1, 5))
        return parse_metrics_text(text, tmp_path / "metrics.jsonl")

    base, same_again, shifted = run_of(0.0), run_of(0.0), run_of(0.4)
    rewards = [figure_pixels(rewards_figure(run), tmp_path / f"rewards-{index}.png")
               for index, run in enumerate((base, same_again, shifted))]
    assert np.array_equal(rewards[0], rewards[1]), "the same data must draw the same figure"
    assert rewards[0].shape == rewards[2].shape
    changed = np.any(rewards[0] != rewards[2], axis=2).sum()
    assert changed > 200, f"only {changed} pixels changed although every reward moved"
    # Only the rewards moved: the response-length figure is pixel for pixel the same.
    lengths = [figure_pixels(response_length_figure(run), tmp_path / f"lengths-{index}.png")
               for index, run in enumerate((base, shifted))]
    assert np.array_equal(lengths[0], lengths[1])


def test_gaps_and_missing_keys_are_drawn_without_crashing(tmp_path: Path) -> None:
    lines = [metrics_line(step) for step in range(1, 6)]
    lines[1]["reward/deduction/propose"] = None
    lines[2]["valid_rate/abduction"] = None
    del lines[3]["buffer/induction"], lines[3]["task/answer_diversity"]
    for line in lines:  # induction rewards never have a value
        line["reward/induction/propose"] = line["reward/induction/solve"] = None
    lines[4] = {"step": 5, "policy_version": 4}  # a line with almost nothing in it
    out, written, _ = render(tmp_path, "gaps", lines)
    assert [path.name for path in written] == ALL_FIGURES[:5]
    for path in written:
        assert_real_figure(path)
    run = load_run_metrics(out.parent)
    panels = rewards_figure(run).axes
    assert [axes.get_title() for axes in panels] == ["deduction", "abduction", "induction"]
    assert "no data" in [text.get_text() for text in panels[2].texts]
    assert not panels[0].texts and len(panels[0].get_lines()) == 2


def test_cruxeval_and_task_figures_are_left_out_when_the_run_has_none(tmp_path: Path) -> None:
    lines = [metrics_line(step, with_task_metrics=False) for step in range(1, 4)]
    for line in lines:
        line["task/n_tasks"] = 0.0  # what the coordinator logs when no proposal was valid
    out, written, not_written = render(tmp_path, "bare", lines)
    assert [path.name for path in written] == ["rewards.png", "format_ok.png", "response_length.png", "proposals.png"]
    assert not_written == {"task_complexity.png": NO_TASK_METRICS, "cruxeval.png": NO_CRUXEVAL}
    assert not (out / "cruxeval.png").exists() and not (out / "task_complexity.png").exists()


def test_cruxeval_points_are_joined_across_steps_without_evaluation() -> None:
    lines = [metrics_line(step, with_eval=step in (2, 5), with_task_metrics=False) for step in range(1, 7)]
    lines[4]["eval/cruxeval_o/count"] = 800
    text = "".join(json.dumps(line) + "\n" for line in lines)
    figure = cruxeval_figure(parse_metrics_text(text, Path("metrics.jsonl")))
    assert figure is not None
    drawn = {line.get_label(): line for line in figure.axes[0].get_lines()}
    assert set(drawn) == {"CRUXEval-O (output prediction), 800 rows", "CRUXEval-I (input prediction)"}
    output = drawn["CRUXEval-O (output prediction), 800 rows"]
    assert list(output.get_xdata()) == [2, 5]
    assert list(output.get_ydata()) == [lines[1]["eval/cruxeval_o"], lines[4]["eval/cruxeval_o"]]
    assert figure.axes[0].get_xlim() == (0.5, 6.5)


def test_task_figure_falls_back_to_the_raw_metric_and_marks_missing_panels() -> None:
    text = "".join(json.dumps({"step": step, "task/cognitive_complexity": 2.0 + step,
                               "task/deduction/cognitive_complexity": 1.0 + step}) + "\n" for step in (1, 2, 3))
    figure = task_complexity_figure(parse_metrics_text(text, Path("metrics.jsonl")))
    assert figure is not None
    panels = figure.axes
    assert [axes.get_title() for axes in panels] == ["ComplexiPy score", "Halstead measure", "AST edit distance",
                                                      "Answer diversity"]
    assert panels[0].get_ylabel() == "cognitive_complexity"
    assert [line.get_label() for line in panels[0].get_lines()] == ["all", "deduction"]
    assert list(panels[0].get_lines()[0].get_ydata()) == [3.0, 4.0, 5.0]
    for axes in panels[1:]:
        assert "no data" in [t.get_text() for t in axes.texts]


def test_the_trailing_mean_skips_gaps_and_averages_the_last_steps() -> None:
    series = Series("format_ok/deduction/solve", [1, 2, 3, 4, 5], [0.0, 1.0, math.nan, 0.5, 1.0])
    smoothed = trailing_mean(series, 3)
    assert smoothed.steps == [1, 2, 3, 4, 5]
    assert smoothed.values == [0.0, 0.5, 0.5, 0.75, 0.75]
    assert math.isnan(trailing_mean(Series("x", [1], [math.nan]), 3).values[0])


def test_the_format_ok_figure_draws_each_step_and_its_trailing_mean_or_is_left_out() -> None:
    lines = [metrics_line(step, with_task_metrics=False) for step in range(1, 7)]
    run = parse_metrics_text("".join(json.dumps(line) + "\n" for line in lines), Path("metrics.jsonl"))
    figure = format_ok_figure(run)
    assert figure is not None
    deduction = figure.axes[0]
    means = {line.get_label(): line for line in deduction.get_lines() if not line.get_label().startswith("_")}
    assert set(means) == {"propose (mean of 5 steps)", "solve (mean of 5 steps)"}
    solve = [line["format_ok/deduction/solve"] for line in lines]
    assert list(means["solve (mean of 5 steps)"].get_ydata())[-1] == sum(solve[-5:]) / 5
    assert len(deduction.get_lines()) == 4  # per role: the per-step points and the mean
    bare = [{k: v for k, v in line.items() if not k.startswith("format_ok/")} for line in lines]
    bare_run = parse_metrics_text("".join(json.dumps(line) + "\n" for line in bare), Path("metrics.jsonl"))
    assert format_ok_figure(bare_run) is None
    assert NO_FORMAT_OK.startswith("no format_ok")

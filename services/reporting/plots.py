"""PNG figures of a run's metrics (`azr plot`): rewards, format-OK shares, response lengths, proposals, task metrics,
CRUXEval.

Figures are built on `matplotlib.figure.Figure` directly, never pyplot: no global figure state, no display, and the
PNG is rendered by Agg whatever backend the environment names. A step without a value is a gap in the line (markers
keep isolated points visible); a panel with no value at all says "no data" instead of drawing empty axes silently.
Colours are fixed per role and per task type so the same line has the same colour in every figure (and a test can
find it in the pixels).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from services.reporting.run_metrics import KNOWN_ROLES, RunMetrics, Series, ordered

DPI = 100
"""Pixels per inch of every figure (figure sizes below are in inches)."""

ROLE_COLOURS: dict[str, str] = {"propose": "#1f77b4", "solve": "#ff7f0e"}
"""Line colour per role (matplotlib's tab:blue and tab:orange)."""

TYPE_COLOURS: dict[str, str] = {"deduction": "#2ca02c", "abduction": "#d62728", "induction": "#9467bd"}
"""Line colour per task type (tab:green, tab:red, tab:purple); unknown types get grey."""

ROLE_LINESTYLES: dict[str, str] = {"propose": "-", "solve": "--"}
"""Line style per role: where both roles have the same values the dashed line leaves the solid one visible."""

TYPE_LINESTYLES: dict[str, str] = {"deduction": "-", "abduction": "--", "induction": ":"}
"""Line style per task type, for the same reason (D_ded and D_abd often have equal sizes)."""

OVERALL_COLOUR = "#000000"
"""Colour of a metric over all task types together."""

CRUXEVAL_COLOURS: dict[str, str] = {"eval/cruxeval_o": "#17becf", "eval/cruxeval_i": "#bcbd22"}
"""Line colour per CRUXEval key (tab:cyan, tab:olive)."""

CRUXEVAL_LABELS: dict[str, str] = {"eval/cruxeval_o": "CRUXEval-O (output prediction)",
                                   "eval/cruxeval_i": "CRUXEval-I (input prediction)"}
"""Legend label per CRUXEval key."""

FORMAT_OK_SMOOTHING = 5
"""Steps in the trailing mean drawn over each format-OK series: at a small B one step's share is 0, 1/B, ... 1, so
the per-step points alone hide a trend."""

NO_FORMAT_OK = "no format_ok metrics in this run"
"""Why `format_ok.png` is not written when no line has a `format_ok/<type>/<role>` value."""

NO_CRUXEVAL = "no CRUXEval evaluation in this run"
"""Why `cruxeval.png` is not written when no line has an `eval/cruxeval_*` value."""

NO_TASK_METRICS = "no task complexity or diversity metrics in this run (no valid proposal was measured)"
"""Why `task_complexity.png` is not written when no line has one of its metrics."""

COMPLEXITY_PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ComplexiPy score", ("complexity_score", "cognitive_complexity")),
    ("Halstead measure", ("halstead_score", "halstead_volume")),
    ("AST edit distance", ("ast_edit_distance_normalized", "ast_edit_distance")),
    ("Answer diversity", ("answer_diversity",)),
)
"""Fig 27's panels: title and the App. C.4 metric names to draw, the paper's (normalised) scale first, the raw
metric as the fallback for a run that logged only that."""


@dataclass
class PlotReport:
    """What `write_figures` did: the files written, and for each figure not written, why."""

    written: list[Path] = field(default_factory=list)
    not_written: dict[str, str] = field(default_factory=dict)


def _new_figure(width: float, height: float, title: str) -> Figure:
    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    figure.suptitle(title)
    return figure


def _draw(axes: Axes, series: Series, *, colour: str, label: str, linewidth: float = 1.8,
          linestyle: str = "-") -> bool:
    """Draw one series (NaN = gap); returns whether it had any value."""
    if not series.has_data:
        return False
    axes.plot(series.steps, series.values, color=colour, label=label, linewidth=linewidth, linestyle=linestyle,
              marker="o", markersize=3.5)
    return True


def _finish_panel(axes: Axes, title: str, ylabel: str, drawn: bool) -> None:
    axes.set_title(title)
    axes.set_xlabel("step")
    axes.set_ylabel(ylabel)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.grid(True, alpha=0.3)
    if drawn:
        axes.legend(loc="best", fontsize="small")
    else:
        axes.text(0.5, 0.5, "no data", transform=axes.transAxes, ha="center", va="center", color="#777777")


def _type_colour(task_type: str) -> str:
    return TYPE_COLOURS.get(task_type, "#7f7f7f")


def _type_linestyle(task_type: str) -> str:
    return TYPE_LINESTYLES.get(task_type, "-.")


def role_figure(run: RunMetrics, prefix: str, title: str, ylabel: str, ylim: tuple[float, float] | None) -> Figure:
    """One panel per task type with a line per role, from keys `<prefix>/<type>/<role>` (paper Figs 15-17)."""
    task_types = run.task_types() or ["deduction", "abduction", "induction"]
    figure = _new_figure(5.0 * len(task_types), 4.6, title)
    for axes, task_type in zip(figure.subplots(1, len(task_types), squeeze=False)[0], task_types):
        roles = ordered({key.split("/")[2] for key in run.keys()
                         if key.startswith(f"{prefix}/{task_type}/") and key.count("/") == 2}, KNOWN_ROLES)
        drawn = [_draw(axes, run.series(f"{prefix}/{task_type}/{role}"), colour=ROLE_COLOURS.get(role, "#7f7f7f"),
                       label=role, linestyle=ROLE_LINESTYLES.get(role, "-.")) for role in roles]
        if ylim is not None:
            axes.set_ylim(*ylim)
        _finish_panel(axes, task_type, ylabel, any(drawn))
    return figure


def rewards_figure(run: RunMetrics) -> Figure:
    """Mean Eq 6 reward per task type x role over steps."""
    return role_figure(run, "reward", "Reward per task type and role (Eq 6)", "mean reward", (-1.1, 1.1))


def trailing_mean(series: Series, window: int) -> Series:
    """At each step, the mean of the values among the last `window` steps up to it (NaN skipped; NaN if none)."""
    values = []
    for index in range(len(series.values)):
        recent = [v for v in series.values[max(0, index - window + 1):index + 1] if not math.isnan(v)]
        values.append(sum(recent) / len(recent) if recent else math.nan)
    return Series(f"{series.key} (trailing mean of {window})", list(series.steps), values)


def format_ok_figure(run: RunMetrics) -> Figure | None:
    """Share of well-formed responses (the Eq 6 format check) per task type x role: each step as a faint point, and
    the trailing mean over FORMAT_OK_SMOOTHING steps as a line. None when the run logged no format-OK share."""
    task_types = run.task_types() or ["deduction", "abduction", "induction"]
    if not any(run.series(f"format_ok/{t}/{role}").has_data for t in task_types for role in KNOWN_ROLES):
        return None
    figure = _new_figure(5.0 * len(task_types), 4.6, "Well-formed responses per task type and role (Eq 6 format)")
    for axes, task_type in zip(figure.subplots(1, len(task_types), squeeze=False)[0], task_types):
        drawn = []
        for role in KNOWN_ROLES:
            series = run.series(f"format_ok/{task_type}/{role}")
            if not series.has_data:
                continue
            colour = ROLE_COLOURS.get(role, "#7f7f7f")
            axes.plot(series.steps, series.values, color=colour, linestyle="none", marker="o", markersize=3.5,
                      alpha=0.35)
            drawn.append(_draw(axes, trailing_mean(series, FORMAT_OK_SMOOTHING), colour=colour,
                               label=f"{role} (mean of {FORMAT_OK_SMOOTHING} steps)",
                               linestyle=ROLE_LINESTYLES.get(role, "-.")))
        axes.set_ylim(-0.05, 1.05)
        _finish_panel(axes, task_type, "share well-formed", any(drawn))
    return figure


def response_length_figure(run: RunMetrics) -> Figure:
    """Mean response length in tokens per task type x role over steps."""
    return role_figure(run, "response_tokens", "Response length per task type and role", "mean tokens", None)


def proposals_figure(run: RunMetrics) -> Figure:
    """Share of valid proposals per task type, and the size of each buffer, over steps."""
    task_types = run.task_types()
    figure = _new_figure(12.0, 4.6, "Proposals: validity and buffer growth")
    validity, buffers = figure.subplots(1, 2, squeeze=True)
    drawn = [_draw(validity, run.series(f"valid_rate/{t}"), colour=_type_colour(t), label=t,
                      linestyle=_type_linestyle(t)) for t in task_types]
    validity.set_ylim(-0.05, 1.05)
    _finish_panel(validity, "valid proposals", "share accepted by the executor", any(drawn))
    drawn = [_draw(buffers, run.series(f"buffer/{t}"), colour=_type_colour(t), label=t,
                      linestyle=_type_linestyle(t)) for t in task_types]
    _finish_panel(buffers, "buffer sizes", "entries", any(drawn))
    return figure


def _complexity_metric(run: RunMetrics, candidates: tuple[str, ...]) -> str | None:
    """The first candidate metric logged with a value, overall or for some task type."""
    keys = run.keys()
    for metric in candidates:
        if any((key == f"task/{metric}" or (key.startswith("task/") and key.endswith(f"/{metric}")))
               and run.has_values(key) for key in keys):
            return metric
    return None


def task_complexity_figure(run: RunMetrics) -> Figure | None:
    """Complexity and diversity of valid proposals over steps (paper Fig 27), overall and per task type; None when
    the run logged none of them."""
    chosen = [(title, _complexity_metric(run, candidates)) for title, candidates in COMPLEXITY_PANELS]
    if all(metric is None for _, metric in chosen):
        return None
    figure = _new_figure(4.2 * len(chosen), 4.6, "Metrics on proposed tasks (App. C.4, Fig 27)")
    task_types = run.task_types()
    for axes, (title, metric) in zip(figure.subplots(1, len(chosen), squeeze=False)[0], chosen):
        drawn = False
        if metric is not None:
            drawn = _draw(axes, run.series(f"task/{metric}"), colour=OVERALL_COLOUR, label="all", linewidth=2.4)
            for task_type in task_types:
                drawn |= _draw(axes, run.series(f"task/{task_type}/{metric}"), colour=_type_colour(task_type),
                               label=task_type, linewidth=1.2, linestyle=_type_linestyle(task_type))
        _finish_panel(axes, title, metric or "", drawn)
    return figure


def _cruxeval_label(run: RunMetrics, key: str) -> str:
    """The split's name, with the rows of its last evaluation (`<key>/count`) when logged: a subset shows as one."""
    counts = run.series(f"{key}/count").present().values
    return f"{CRUXEVAL_LABELS[key]}, {int(counts[-1])} rows" if counts else CRUXEVAL_LABELS[key]


def cruxeval_figure(run: RunMetrics) -> Figure | None:
    """CRUXEval-O and -I accuracy on the steps where the evaluation ran (points joined); None when it never ran."""
    present = {key: run.series(key).present() for key in CRUXEVAL_COLOURS}
    if not any(series.has_data for series in present.values()):
        return None
    figure = _new_figure(8.0, 5.0, "CRUXEval accuracy")
    axes = figure.subplots()
    drawn = [_draw(axes, series, colour=CRUXEVAL_COLOURS[key], label=_cruxeval_label(run, key))
             for key, series in present.items()]
    axes.set_ylim(-0.02, 1.02)
    if len(run.steps) > 1:  # the whole run on the x axis, so sparse evaluations sit where they ran
        axes.set_xlim(run.steps[0] - 0.5, run.steps[-1] + 0.5)
    _finish_panel(axes, "on the steps where the evaluation ran", "accuracy", any(drawn))
    return figure


FIGURES: tuple[tuple[str, Callable[[RunMetrics], Figure | None], str], ...] = (
    ("rewards.png", rewards_figure, ""),
    ("format_ok.png", format_ok_figure, NO_FORMAT_OK),
    ("response_length.png", response_length_figure, ""),
    ("proposals.png", proposals_figure, ""),
    ("task_complexity.png", task_complexity_figure, NO_TASK_METRICS),
    ("cruxeval.png", cruxeval_figure, NO_CRUXEVAL),
)
"""File name, builder, and the reason given when the builder returns None (nothing to draw)."""


def write_figures(run: RunMetrics, out_dir: Path) -> PlotReport:
    """Write every figure that has something to show into `out_dir` (created); say why the others were not."""
    out_dir.mkdir(parents=True, exist_ok=True)
    report = PlotReport()
    for name, build, reason_if_empty in FIGURES:
        figure = build(run)
        if figure is None:
            report.not_written[name] = reason_if_empty
            continue
        path = out_dir / name
        partial = path.with_name(f".{name}.partial")  # replaced in one rename: a reader never sees half a PNG
        figure.savefig(partial, dpi=DPI, format="png")
        partial.replace(path)
        report.written.append(path)
    return report

// The run's curves as inline SVG: one chart per metric family of the metrics line (the curves of `azr plot`).
// Each chart is `svg.chart[data-metric=<family>]` holding one `path.series[data-key=<metric key>]` per key.

const SVG_NS = "http://www.w3.org/2000/svg";
const CHART_SIZE = { width: 460, height: 210, left: 52, right: 12, top: 10, bottom: 26 };
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
                 "#7f7f7f", "#bcbd22"];

// Families in display order: [family id, title, does a metric key belong to it].
const CHART_FAMILIES = [
  ["reward", "Reward per task × role", (key) => /^reward\/[^/]+\/[^/]+$/.test(key)],
  ["format_ok", "Well-formed responses (Eq 6 format) per task × role", (key) => /^format_ok\/[^/]+\/[^/]+$/.test(key)],
  ["response_tokens", "Response length (tokens) per task × role", (key) => key.startsWith("response_tokens/")],
  ["valid_rate", "Valid proposals per task type", (key) => key.startsWith("valid_rate/")],
  ["solve_rate", "Solve rate per task type", (key) => key.startsWith("solve_rate/")],
  ["buffer", "Buffer sizes", (key) => key.startsWith("buffer/")],
  ["eval", "CRUXEval accuracy", (key) => key.startsWith("eval/")],
  // the collapse watch (services/coordinator/collapse_metrics.py): lengths falling, the prompt's example copied,
  // proposals without a program, samples of one task all alike, spreads that come from correctness
  ["response_tokens_median", "Median response length (tokens) per task × role",
   (key) => key.startsWith("response_tokens_median/")],
  ["think_chars_median", "Median think block (characters) per task × role",
   (key) => key.startsWith("think_chars_median/")],
  ["example_copy", "Answers equal to the prompt's own example", (key) => key.startsWith("example_copy/")],
  ["proposal_shape", "Proposals with a fenced program / an input block",
   (key) => key.startsWith("has_program/") || key.startsWith("has_input/")],
  ["distinct_answers", "Distinct answers per group of samples of one task",
   (key) => key.startsWith("distinct_answers/")],
  ["correct_spread", "Groups whose reward spread comes from a right answer",
   (key) => key === "groups_with_correct_spread"],
  ["is_capped", "Tokens whose importance weight hit its cap", (key) => key === "train/is_capped_fraction"],
];

/** The family a metric key is drawn in, or null. `task/<m>` and `task/<type>/<m>` share the chart `task/<m>`. */
function familyOf(key) {
  if (key.startsWith("task/")) {
    const metric = key.split("/").pop();
    return metric === "n_tasks" ? null : "task/" + metric;
  }
  for (const [family, , belongs] of CHART_FAMILIES) {
    if (belongs(key)) return family;
  }
  return null;
}

function familyTitle(family) {
  for (const [id, title] of CHART_FAMILIES) {
    if (id === family) return title;
  }
  return "Task " + family.slice("task/".length).replace(/_/g, " ");
}

const FAMILY_ORDER = ["reward", "format_ok", "response_tokens", "valid_rate", "solve_rate", "response_tokens_median",
                      "think_chars_median", "example_copy", "proposal_shape", "distinct_answers", "correct_spread",
                      "is_capped", "buffer", "task", "eval"];

function familyRank(family) {
  return FAMILY_ORDER.indexOf(family.startsWith("task/") ? "task" : family);
}

/** {family: {key: [[step, value], ...]}} from the recorded steps (finite numbers only, in step order). */
function seriesByFamily(steps) {
  const families = {};
  for (const record of steps) {
    for (const [key, value] of Object.entries(record.metrics)) {
      if (typeof value !== "number" || !Number.isFinite(value)) continue;
      const family = familyOf(key);
      if (family === null) continue;
      const series = (families[family] = families[family] || {});
      (series[key] = series[key] || []).push([record.step, value]);
    }
  }
  return families;
}

/** About `count` round tick values covering [low, high]. */
function niceTicks(low, high, count) {
  const span = high - low;
  const raw = span / Math.max(1, count);
  const magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((candidate) => candidate >= raw) || raw;
  const ticks = [];
  for (let tick = Math.ceil(low / step) * step; tick <= high + step * 1e-9; tick += step) {
    ticks.push(Math.abs(tick) < step * 1e-9 ? 0 : tick);
  }
  return ticks;
}

function padded(low, high) {
  if (low === high) {
    const pad = Math.abs(low) * 0.1 || 1;
    return [low - pad, high + pad];
  }
  const pad = (high - low) * 0.05;
  return [low - pad, high + pad];
}

function formatNumber(value) {
  if (value === null || value === undefined) return "–";
  if (Number.isInteger(value)) return String(value);
  const magnitude = Math.abs(value);
  if (magnitude >= 1000 || (magnitude > 0 && magnitude < 0.001)) return value.toExponential(2);
  return String(Number(value.toPrecision(4)));
}

function svgElement(tag, attributes, parent) {
  const element = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  if (parent) parent.appendChild(element);
  return element;
}

/** A figure with one SVG chart of `seriesMap` ({key: points}) and its legend. */
function buildChart(family, seriesMap) {
  const { width, height, left, right, top, bottom } = CHART_SIZE;
  const keys = Object.keys(seriesMap).sort();
  const bounds = { stepLow: Infinity, stepHigh: -Infinity, low: Infinity, high: -Infinity };
  for (const key of keys) {
    for (const [step, value] of seriesMap[key]) {  // a loop, not Math.min(...): long runs overflow the call stack
      bounds.stepLow = Math.min(bounds.stepLow, step);
      bounds.stepHigh = Math.max(bounds.stepHigh, step);
      bounds.low = Math.min(bounds.low, value);
      bounds.high = Math.max(bounds.high, value);
    }
  }
  const { stepLow, stepHigh } = bounds;
  const [xLow, xHigh] = stepLow === stepHigh ? [stepLow - 1, stepHigh + 1] : [stepLow, stepHigh];
  const [yLow, yHigh] = padded(bounds.low, bounds.high);
  const x = (step) => left + ((step - xLow) / (xHigh - xLow)) * (width - left - right);
  const y = (value) => top + (1 - (value - yLow) / (yHigh - yLow)) * (height - top - bottom);

  const figure = document.createElement("figure");
  figure.className = "chart-card";
  figure.dataset.metric = family;
  const caption = document.createElement("figcaption");
  caption.textContent = familyTitle(family);
  const readout = document.createElement("span");
  readout.className = "readout";
  caption.appendChild(readout);
  figure.appendChild(caption);

  const svg = svgElement("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img",
                                  "data-metric": family, "data-series": keys.length });
  svgElement("title", {}, svg).textContent = familyTitle(family);
  for (const tick of niceTicks(yLow, yHigh, 4)) {
    svgElement("line", { class: "grid", x1: left, x2: width - right, y1: y(tick), y2: y(tick) }, svg);
    svgElement("text", { class: "tick y", x: left - 4, y: y(tick) + 3 }, svg).textContent = formatNumber(tick);
  }
  for (const tick of niceTicks(xLow, xHigh, 5).filter((t) => Number.isInteger(t))) {
    svgElement("text", { class: "tick x", x: x(tick), y: height - 8 }, svg).textContent = String(tick);
  }
  svgElement("rect", { class: "frame", x: left, y: top, width: width - left - right,
                       height: height - top - bottom }, svg);

  const legend = document.createElement("ul");
  legend.className = "legend";
  keys.forEach((key, index) => {
    const points = seriesMap[key];
    const color = PALETTE[index % PALETTE.length];
    // A lone point still shows: "M x,y L x,y" with a round line cap draws a dot.
    const path = points.map(([step, value], i) => `${i ? "L" : "M"}${x(step).toFixed(2)},${y(value).toFixed(2)}`);
    if (points.length === 1) path.push(path[0].replace("M", "L"));
    svgElement("path", { class: "series", d: path.join(" "), stroke: color, "data-key": key,
                         "data-points": points.length }, svg);
    const item = document.createElement("li");
    item.dataset.key = key;
    const swatch = svgElement("svg", { class: "swatch", viewBox: "0 0 10 10", width: 10, height: 10 });
    svgElement("rect", { width: 10, height: 10, fill: color }, swatch);
    item.appendChild(swatch);
    item.appendChild(document.createTextNode(` ${key} `));
    const last = document.createElement("b");
    last.textContent = formatNumber(points[points.length - 1][1]);
    item.appendChild(last);
    legend.appendChild(item);
  });
  const cursor = svgElement("line", { class: "cursor", y1: top, y2: height - bottom, x1: -10, x2: -10 }, svg);
  svg.addEventListener("mousemove", (event) => {
    const box = svg.getBoundingClientRect();
    const atX = ((event.clientX - box.left) / box.width) * width;
    const step = Math.round(xLow + ((atX - left) / (width - left - right)) * (xHigh - xLow));
    const values = keys.map((key) => [key, seriesMap[key].find((p) => p[0] === step)]).filter(([, p]) => p);
    if (!values.length) return;
    cursor.setAttribute("x1", x(step));
    cursor.setAttribute("x2", x(step));
    const shown = values.map(([key, p]) => `${key.split("/").slice(1).join("/")}=${formatNumber(p[1])}`);
    readout.textContent = ` step ${step}: ${shown.join(", ")}`;
  });
  figure.appendChild(svg);
  figure.appendChild(legend);
  return figure;
}

/** Redraw every chart of `steps` into `container`; returns how many charts were drawn. */
function drawCharts(container, steps) {
  const families = seriesByFamily(steps);
  const order = Object.keys(families).sort((a, b) => familyRank(a) - familyRank(b) || a.localeCompare(b));
  container.replaceChildren(...order.map((family) => buildChart(family, families[family])));
  return order.length;
}

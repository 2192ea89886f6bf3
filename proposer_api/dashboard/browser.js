// The buffer browser: a filtered, paged table of one buffer (`table#entries`) and the detail of one entry
// (`section#detail`: highlighted program, input/output or induction pairs and message, solve history).
// Every piece of entry text goes in through textContent, never as markup.

const BUFFERS = ["deduction", "abduction", "induction"];
const SOURCES = ["zero", "seed", "proposed", "user"];
const PAGE_SIZE = 25;

/** GET a JSON route of this server; an Error carrying the route's reason on anything but 2xx. */
async function getJson(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" }, cache: "no-store" });
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const reason = body && typeof body.detail === "string" ? body.detail : JSON.stringify(body && body.detail);
    const error = new Error(`${response.status}: ${reason}`);
    error.status = response.status;
    throw error;
  }
  return body;
}

/** An element with text (and a class), appended to `parent` when given. */
function element(tag, text, className, parent) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  if (parent) parent.appendChild(node);
  return node;
}

/** The first non-blank line of `text`, cut to `length` characters. */
function preview(text, length) {
  const line = (text || "").split("\n").find((candidate) => candidate.trim()) || "";
  return line.length > length ? line.slice(0, length - 1) + "…" : line;
}

/** `text` on one line (runs of whitespace become one space), cut to `length` characters. */
function squeeze(text, length) {
  const line = (text || "").replace(/\s+/g, " ").trim();
  return line.length > length ? line.slice(0, length - 1) + "…" : line;
}

function entryPath(buffer, entryId) {
  return `/v1/buffers/${encodeURIComponent(buffer)}/${encodeURIComponent(entryId)}`;
}

/** The page route of the current filters. */
function entriesPath(view) {
  const query = new URLSearchParams({ limit: String(PAGE_SIZE), offset: String(view.offset) });
  if (view.source) query.set("source", view.source);
  if (view.step !== "") query.set("step", view.step);
  if (view.q) query.set("q", view.q);
  return `/v1/buffers/${encodeURIComponent(view.buffer)}?${query}`;
}

/** Fill `tbody` with one row per entry of `page`; `onSelect(entryId)` runs when a row is clicked or entered. */
function renderEntries(tbody, page, selectedId, onSelect) {
  const rows = page.entries.map((entry) => {
    const row = document.createElement("tr");
    row.dataset.entryId = entry.id;
    row.dataset.source = entry.source;
    row.dataset.step = String(entry.step);
    row.tabIndex = 0;
    if (entry.id === selectedId) row.classList.add("selected");
    element("td", entry.id, "id", row);
    element("td", entry.step, "step", row);
    element("td", entry.source, "source", row);
    element("td", entry.policy_version, "policy", row);
    element("td", squeeze(entry.program, 70), "program", row);
    const io = entry.inputs
      ? `${entry.inputs.length} pairs: ${preview(entry.message, 40)}`
      : `${preview(entry.input, 30)} → ${preview(entry.output, 30)}`;
    element("td", io, "io", row);
    row.addEventListener("click", () => onSelect(entry.id));
    row.addEventListener("keydown", (event) => { if (event.key === "Enter") onSelect(entry.id); });
    return row;
  });
  tbody.replaceChildren(...rows);
}

/** `dl` rows of label -> value. */
function definitionList(id, pairs) {
  const list = document.createElement("dl");
  list.id = id;
  for (const [label, value] of pairs) {
    element("dt", label, null, list);
    element("dd", value, null, list);
  }
  return list;
}

function codeBlock(id, text, highlight) {
  const pre = document.createElement("pre");
  pre.id = id;
  const code = element("code", null, highlight ? "python" : null, pre);
  if (highlight) code.appendChild(highlightPython(text));
  else code.textContent = text;
  return pre;
}

/** The input/output of a triplet, or the pairs (given ones marked) and message of an induction task. */
function renderInputOutput(section, entry) {
  if (!entry.inputs) {
    element("h4", "Input", null, section);
    section.appendChild(codeBlock("entry-input", entry.input, true));
    element("h4", "Output", null, section);
    section.appendChild(codeBlock("entry-output", entry.output, true));
    return;
  }
  element("h4", "Message", null, section);
  element("p", entry.message, "message", section).id = "entry-message";
  element("h4", `Input/output pairs (first ${Math.floor(entry.inputs.length / 2)} shown to the solver)`, null, section);
  const table = element("table", null, null, section);
  table.id = "pairs";
  const head = element("tr", null, null, element("thead", null, null, table));
  ["#", "input", "output", "shown"].forEach((label) => element("th", label, null, head));
  const body = element("tbody", null, null, table);
  entry.inputs.forEach((input, index) => {
    const row = element("tr", null, null, body);
    element("td", index, null, row);
    element("code", input, null, element("td", null, null, row));
    element("code", entry.outputs[index], null, element("td", null, null, row));
    element("td", index < Math.floor(entry.inputs.length / 2) ? "given" : "hidden", null, row);
  });
}

/** The solve attempts of the entry, oldest first, each with its response text folded away. */
function renderHistory(section, history) {
  const title = element("h4", `Solve history (${history.total} attempt${history.total === 1 ? "" : "s"})`, null, section);
  title.id = "history-title";
  const table = element("table", null, null, section);
  table.id = "history";
  const head = element("tr", null, null, element("thead", null, null, table));
  for (const label of ["run", "step", "policy", "reward", "status", "tokens", "response"]) {
    element("th", label, null, head);
  }
  const body = element("tbody", null, null, table);
  for (const attempt of history.attempts) {
    const row = element("tr", null, attempt.reward > 0 ? "solved" : "failed", body);
    row.dataset.episodeId = attempt.episode_id;
    row.dataset.reward = String(attempt.reward);
    element("td", attempt.run_id, null, row);
    element("td", attempt.step, "step", row);
    element("td", attempt.policy_version, null, row);
    element("td", formatNumber(attempt.reward), "reward", row);
    element("td", attempt.exec_status || "–", "status", row);
    element("td", attempt.response_tokens, null, row);
    const details = element("details", null, null, element("td", null, "response", row));
    element("summary", preview(attempt.text, 50) || "(empty)", null, details);
    element("pre", attempt.text || "", null, details);
  }
  if (history.total > history.attempts.length) {
    element("p", `showing the first ${history.attempts.length} of ${history.total}`, "note", section);
  }
}

/** Fetch one entry and its solve history and show them in `section`; a missing entry says so instead. */
async function loadDetail(section, buffer, entryId) {
  section.hidden = false;
  section.dataset.entryId = entryId;
  section.dataset.buffer = buffer;
  let entry;
  let history;
  try {
    [entry, history] = await Promise.all([getJson(entryPath(buffer, entryId)),
                                          getJson(entryPath(buffer, entryId) + "/history?limit=100")]);
  } catch (error) {
    section.replaceChildren(element("h3", `${buffer} #${entryId}`), element("p", error.message, "error"));
    section.dataset.state = "missing";
    return;
  }
  if (section.dataset.entryId !== entryId) return;  // another entry was picked meanwhile
  section.replaceChildren();
  const title = element("h3", `${buffer} #${entry.id}`, null, section);
  title.id = "detail-title";
  const close = element("button", "×", "close", title);
  close.type = "button";
  close.id = "detail-close";
  section.appendChild(definitionList("entry-meta", [
    ["source", entry.source], ["step", entry.step], ["policy version", entry.policy_version],
    ["created", entry.created_at], ["imports", (entry.imports || []).join(", ") || "–"],
    ["program hash", (entry.program_hash || "").slice(0, 16)],
  ]));
  element("h4", "Program", null, section);
  section.appendChild(codeBlock("program", entry.program, true));
  renderInputOutput(section, entry);
  renderHistory(section, history);
  section.dataset.state = "shown";
}

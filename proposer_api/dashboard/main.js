// The page's state, kept in the URL fragment (#run=..&buffer=..&source=..&step=..&q=..&offset=..&entry=..) so a
// view can be linked, and the poll that keeps curves and table current. `body[data-ready]` is set once the first
// complete render (curves, table, and the entry named in the fragment) is in the DOM.

const POLL_MS = 4000;
const $ = (selector) => document.querySelector(selector);

const view = { run: "", buffer: "deduction", source: "", step: "", q: "", offset: 0, entry: "" };
const runData = { run: "", steps: [], lastStep: null };
let tableRequest = 0;  // the newest table load; older answers are dropped

function readFragment() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  view.run = fragment.get("run") || "";
  view.buffer = BUFFERS.includes(fragment.get("buffer")) ? fragment.get("buffer") : "deduction";
  view.source = SOURCES.includes(fragment.get("source")) ? fragment.get("source") : "";
  view.step = /^\d+$/.test(fragment.get("step") || "") ? fragment.get("step") : "";
  view.q = fragment.get("q") || "";
  view.offset = Math.max(0, parseInt(fragment.get("offset") || "0", 10) || 0);
  view.entry = /^\d+$/.test(fragment.get("entry") || "") ? fragment.get("entry") : "";
}

function writeFragment() {
  const fragment = new URLSearchParams();
  for (const [key, value] of Object.entries(view)) {
    if (value !== "" && !(key === "offset" && value === 0)) fragment.set(key, String(value));
  }
  history.replaceState(null, "", "#" + fragment.toString());
}

function showStatus(text, state) {
  const status = $("#status");
  status.textContent = text;
  status.dataset.state = state;
}

function syncControls() {
  $("#buffer").value = view.buffer;
  $("#source").value = view.source;
  $("#step-filter").value = view.step;
  if (document.activeElement !== $("#search")) $("#search").value = view.q;
}

// ---------------------------------------------------------------------------------------------------- runs, curves

async function refreshRuns() {
  const { runs } = await getJson("/v1/runs");
  const select = $("#run");
  const known = runs.map((run) => run.run_id);
  if (!view.run || !known.includes(view.run)) view.run = known[0] || "";
  const labels = runs.map((run) => `${run.run_id} (${run.steps} step${run.steps === 1 ? "" : "s"})`);
  if (labels.join("\n") !== [...select.options].map((option) => option.textContent).join("\n")) {
    // Rebuilt only when something changed: replacing the options would close a list the user has open.
    select.replaceChildren(...runs.map((run, index) => {
      const option = element("option", labels[index]);
      option.value = run.run_id;
      return option;
    }));
  }
  select.value = view.run;
  const current = runs.find((run) => run.run_id === view.run);
  const when = current && current.last_recorded_at ? ` at ${new Date(current.last_recorded_at).toLocaleString()}` : "";
  $("#run-info").textContent = current ? `last step ${current.last_step ?? "–"}${when}` : "no run recorded yet";
}

/** Fetch the steps after the last one held (all of them for a new run), page by page; redraw when any arrived. */
async function refreshCurves() {
  if (runData.run !== view.run) {
    Object.assign(runData, { run: view.run, steps: [], lastStep: null });
  }
  let arrived = runData.steps.length === 0;
  while (runData.run) {
    const since = runData.lastStep === null ? "" : `?since_step=${runData.lastStep}`;
    const page = await getJson(`/v1/runs/${encodeURIComponent(runData.run)}/steps${since}`);
    if (page.run_id !== runData.run) return;  // the run changed meanwhile
    if (page.steps.length) {
      runData.steps.push(...page.steps);
      runData.lastStep = page.steps[page.steps.length - 1].step;
      arrived = true;
    }
    if (!page.has_more) break;
  }
  if (arrived) {
    const drawn = drawCharts($("#charts"), runData.steps);
    $("#charts").dataset.steps = String(runData.steps.length);
    $("#charts-empty").hidden = drawn > 0;
  }
}

// ---------------------------------------------------------------------------------------------------- buffers

/** Entry counts in the buffer selector's options (their text only: the open list stays open). */
async function refreshBufferCounts() {
  const stats = await getJson("/v1/buffers");
  for (const stat of stats) {
    const option = $(`#buffer option[value="${stat.buffer}"]`);
    if (option) option.textContent = `${stat.buffer} (${stat.count})`;
  }
}

async function refreshTable() {
  const request = ++tableRequest;
  const page = await getJson(entriesPath(view));
  if (request !== tableRequest) return;
  renderEntries($("#entries tbody"), page, view.entry, selectEntry);
  const first = page.total ? page.offset + 1 : 0;
  $("#page-info").textContent = `${first}–${page.offset + page.entries.length} of ${page.total}`;
  $("#entries").dataset.total = String(page.total);
  $("#prev").disabled = page.offset === 0;
  $("#next").disabled = page.offset + page.entries.length >= page.total;
}

async function refreshDetail() {
  if (!view.entry) {
    $("#detail").hidden = true;
    delete $("#detail").dataset.entryId;
    return;
  }
  await loadDetail($("#detail"), view.buffer, view.entry);
}

function selectEntry(entryId) {
  view.entry = entryId;
  writeFragment();
  for (const row of document.querySelectorAll("#entries tbody tr")) {
    row.classList.toggle("selected", row.dataset.entryId === entryId);
  }
  refreshDetail().catch(reportError);
}

/** Filters changed: back to the first page, no entry open. */
function filtersChanged() {
  if ($("#buffer").value !== view.buffer) {
    view.entry = "";
    refreshDetail().catch(reportError);
  }
  view.buffer = $("#buffer").value;
  view.source = $("#source").value;
  view.step = /^\d+$/.test($("#step-filter").value) ? $("#step-filter").value : "";
  view.q = $("#search").value;
  view.offset = 0;
  writeFragment();
  refreshTable().catch(reportError);
}

function reportError(error) {
  showStatus(`error: ${error.message}`, "error");
}

// ---------------------------------------------------------------------------------------------------- wiring, poll

function wire() {
  $("#run").addEventListener("change", () => {
    view.run = $("#run").value;
    writeFragment();
    refreshCurves().catch(reportError);
  });
  $("#buffer").replaceChildren(...BUFFERS.map((buffer) => Object.assign(element("option", buffer), { value: buffer })));
  $("#source").replaceChildren(element("option", "any source"),
                               ...SOURCES.map((source) => Object.assign(element("option", source), { value: source })));
  $("#source").options[0].value = "";
  for (const id of ["#buffer", "#source", "#step-filter"]) $(id).addEventListener("change", filtersChanged);
  let typing = 0;
  $("#search").addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(filtersChanged, 300); });
  $("#filters").addEventListener("submit", (event) => { event.preventDefault(); filtersChanged(); });
  const turnPage = (offset) => {
    view.offset = Math.max(0, offset);
    writeFragment();
    refreshTable().catch(reportError);
  };
  $("#prev").addEventListener("click", () => turnPage(view.offset - PAGE_SIZE));
  $("#next").addEventListener("click", () => turnPage(view.offset + PAGE_SIZE));
  $("#detail").addEventListener("click", (event) => {
    if (event.target.id === "detail-close") selectEntry("");
  });
  window.addEventListener("hashchange", () => { readFragment(); syncControls(); refreshAll().catch(reportError); });
}

async function refreshAll() {
  await refreshRuns();
  await Promise.all([refreshCurves(), refreshBufferCounts(), refreshTable()]);
  syncControls();
  showStatus(`updated ${new Date().toLocaleTimeString()}`, "ok");
}

async function start() {
  readFragment();
  wire();
  syncControls();
  try {
    await refreshAll();
    await refreshDetail();
    writeFragment();
  } catch (error) {
    reportError(error);
  }
  document.body.dataset.ready = "1";
  setInterval(() => refreshAll().catch(reportError), POLL_MS);
}

start();

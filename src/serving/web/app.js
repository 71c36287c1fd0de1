// The chat page's logic: streams answers from /v1/chat/completions (server-sent events), stops
// them through /v1/requests/{id}/cancel, keeps the conversation on the page or in a server-side
// session (/v1/sessions), and polls /metrics for the engine panel. Model text is only ever put
// into the page as text nodes, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);

const state = {
  messages: [],       // the conversation without the system prompt, as OpenAI chat messages
  busy: false,
  requestId: null,
  session: null,      // server-side session id while the toggle is on
  sessionSystem: "",  // the system prompt the session started with
  synced: 0,          // messages of conversation() the session has committed
  lastAnswer: null,   // {text, calls, finish, usage, timings} of the last answer
  chat: 0,            // counts "New chat"s: an answer that ends after one is not kept
};
window.cherenkovChat = state;  // read by the integration test

function conversation() {
  const system = $("system").value;
  return (system ? [{ role: "system", content: system }] : []).concat(state.messages);
}

function setStatus(text) {
  $("status").textContent = text;
}

function setBusy(busy) {
  state.busy = busy;
  $("send").disabled = busy;
  $("stop").disabled = !busy;
}

// ---- rendering (text nodes only) ----

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// A paragraph with `inline code` spans.
function paragraph(text) {
  const p = el("p");
  const pieces = text.split("`");
  pieces.forEach((piece, i) => {
    // Odd pieces are inside backticks, unless the last backtick is unmatched.
    if (i % 2 === 1 && i < pieces.length - 1) p.appendChild(el("code", "", piece));
    else p.appendChild(document.createTextNode(i % 2 === 1 ? "`" + piece : piece));
  });
  return p;
}

// Fenced code blocks (```lang ... ```) become <pre><code>; an unclosed fence (still streaming)
// runs to the end. Other text becomes paragraphs split at blank lines.
function renderText(container, text) {
  container.textContent = "";
  const lines = text.split("\n");
  let prose = [];
  let code = null;
  const flushProse = () => {
    const joined = prose.join("\n");
    prose = [];
    for (const block of joined.split(/\n{2,}/)) {
      if (block.trim() !== "") container.appendChild(paragraph(block));
    }
  };
  const flushCode = () => {
    const pre = el("pre");
    const codeNode = el("code", "", code.lines.join("\n"));
    if (code.lang) codeNode.dataset.lang = code.lang;
    pre.appendChild(codeNode);
    container.appendChild(pre);
    code = null;
  };
  for (const line of lines) {
    const fence = line.match(/^\s*```\s*([\w+#.-]*)\s*$/);
    if (code) {
      if (fence && fence[1] === "") flushCode();
      else code.lines.push(line);
    } else if (fence) {
      flushProse();
      code = { lang: fence[1], lines: [] };
    } else {
      prose.push(line);
    }
  }
  if (code) flushCode();
  flushProse();
}

function addMessageView(role, text) {
  const view = el("div", "message " + role);
  view.appendChild(el("div", "role", role === "user" ? "You" : "Assistant"));
  const body = el("div", "text");
  view.appendChild(body);
  view.dataset.raw = text || "";
  renderText(body, text || "");
  $("messages").appendChild(view);
  view.scrollIntoView({ block: "end" });
  return view;
}

function showToolCalls(view, calls) {
  for (const call of calls) {
    const box = el("div", "tool-call");
    box.appendChild(el("span", "name", call.function.name + "()"));
    let args = call.function.arguments;
    try {
      args = JSON.stringify(JSON.parse(args), null, 2);
    } catch (e) {
      // Shown as the model wrote it.
    }
    const pre = el("pre");
    pre.appendChild(el("code", "", args));
    box.appendChild(pre);
    view.appendChild(box);
  }
}

function usageLine(answer) {
  const u = answer.usage || {};
  const t = answer.timings || {};
  const cached = (u.prompt_tokens_details || {}).cached_tokens || 0;
  const parts = [];
  if (u.prompt_tokens !== undefined) parts.push(`prompt ${u.prompt_tokens} (cached ${cached})`);
  if (u.completion_tokens !== undefined) parts.push(`generated ${u.completion_tokens}`);
  if (t.decode_seconds > 0 && u.completion_tokens) {
    parts.push(`${(u.completion_tokens / t.decode_seconds).toFixed(1)} tok/s`);
  }
  if (t.prefill_seconds !== undefined) parts.push(`prefill ${t.prefill_seconds.toFixed(2)} s`);
  if (answer.finish) parts.push(answer.finish);
  return parts.join(" · ");
}

// ---- requests ----

function numberField(id, body, key, integer) {
  const raw = $(id).value.trim();
  if (raw === "") return;
  const value = integer ? parseInt(raw, 10) : parseFloat(raw);
  if (!Number.isNaN(value)) body[key] = value;
}

async function postJson(path, body) {
  const res = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const data = await res.json().catch(() => null);
  if (!res.ok) throw new Error((data && data.error && data.error.message) || `HTTP ${res.status}`);
  return data;
}

async function ensureSession() {
  const system = $("system").value;
  if (state.session && state.sessionSystem === system) return;
  const created = await postJson("/v1/sessions", {});
  state.session = created.id;
  state.sessionSystem = system;
  state.synced = 0;
  $("session-info").textContent = `Session ${created.id}: each turn sends only its new messages.`;
}

function randomId() {
  const bytes = new Uint8Array(8);
  crypto.getRandomValues(bytes);
  return "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function requestBody() {
  const body = { model: "cherenkov", stream: true, stream_options: { include_usage: true } };
  numberField("temperature", body, "temperature", false);
  numberField("top-p", body, "top_p", false);
  numberField("top-k", body, "top_k", true);
  numberField("max-tokens", body, "max_tokens", true);
  const tools = $("tools").value.trim();
  if (tools !== "") {
    try {
      body.tools = JSON.parse(tools);
    } catch (e) {
      throw new Error("the tools field is not valid JSON: " + e.message);
    }
  }
  return body;
}

// Reads the SSE stream, calling onEvent with each parsed `data:` payload.
async function readEvents(res, onEvent) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const payload = line.slice(6);
        if (payload !== "[DONE]") onEvent(JSON.parse(payload));
      }
    }
  }
}

async function send() {
  const text = $("prompt").value;
  if (state.busy || text.trim() === "") return;
  let body;
  try {
    body = requestBody();
    if ($("use-session").checked) await ensureSession();
  } catch (e) {
    setStatus(e.message);
    return;
  }
  $("prompt").value = "";
  state.messages.push({ role: "user", content: text });
  addMessageView("user", text);
  const all = conversation();
  if (state.session) {
    body.session_id = state.session;
    body.messages = all.slice(state.synced);
  } else {
    body.messages = all;
  }
  state.requestId = randomId();
  body.request_id = state.requestId;
  const view = addMessageView("assistant", "");
  const textNode = view.querySelector(".text");
  const answer = { text: "", calls: [], finish: null, usage: null, timings: null };
  const chat = state.chat;
  state.lastAnswer = answer;
  setBusy(true);
  setStatus("Generating…");
  try {
    const res = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!res.ok) {
      const data = await res.json().catch(() => null);
      throw new Error((data && data.error && data.error.message) || `HTTP ${res.status}`);
    }
    await readEvents(res, (event) => {
      if (event.error) throw new Error(event.error.message);
      if (event.usage) answer.usage = event.usage;
      if (event.timings) answer.timings = event.timings;
      const choice = (event.choices || [])[0];
      if (!choice) return;
      const delta = choice.delta || {};
      if (delta.content) {
        answer.text += delta.content;
        view.dataset.raw = answer.text;
        renderText(textNode, answer.text);
        view.scrollIntoView({ block: "end" });
      }
      for (const call of delta.tool_calls || []) {
        const slot = answer.calls[call.index] ||
          (answer.calls[call.index] = { id: "", type: "function", function: { name: "", arguments: "" } });
        if (call.id) slot.id = call.id;
        if (call.function && call.function.name) slot.function.name += call.function.name;
        if (call.function && call.function.arguments) slot.function.arguments += call.function.arguments;
      }
      if (choice.finish_reason) answer.finish = choice.finish_reason;
    });
    if (answer.calls.length > 0) showToolCalls(view, answer.calls);
    if (chat !== state.chat) return;
    const reply = { role: "assistant", content: answer.calls.length > 0 && answer.text === "" ? null : answer.text };
    if (answer.calls.length > 0) reply.tool_calls = answer.calls;
    state.messages.push(reply);
    // A completed turn is committed by the session; a cancelled one leaves it as it was, and the
    // next turn sends these messages again.
    if (state.session && answer.finish !== "cancelled") state.synced = conversation().length;
    view.appendChild(el("div", "usage", usageLine(answer)));
    view.dataset.finish = answer.finish || "";
    setStatus(answer.finish === "cancelled" ? "Stopped." : "");
  } catch (e) {
    if (chat !== state.chat) return;
    state.messages.pop();  // the user's message was not answered: it can be sent again
    view.classList.add("error");
    view.dataset.finish = "error";
    renderText(textNode, answer.text + (answer.text ? "\n\n" : "") + "Error: " + e.message);
    setStatus("Error: " + e.message);
    if (/session/i.test(e.message)) state.session = null;
  } finally {
    state.requestId = null;
    setBusy(false);
    $("prompt").focus();
  }
}

async function stop() {
  if (!state.busy || !state.requestId) return;
  setStatus("Stopping…");
  try {
    await postJson(`/v1/requests/${state.requestId}/cancel`, {});
  } catch (e) {
    setStatus("Stop failed: " + e.message);
  }
}

function newChat() {
  if (state.busy) stop();
  state.chat++;
  state.messages = [];
  state.session = null;
  state.synced = 0;
  state.lastAnswer = null;
  $("messages").textContent = "";
  updateSessionInfo();
  setStatus("");
  $("prompt").focus();
}

function updateSessionInfo() {
  $("session-info").textContent = $("use-session").checked
    ? "A session is created with the next turn; each turn then sends only its new messages."
    : "Each turn sends the whole conversation.";
}

// ---- engine panel (GET /metrics, Prometheus text) ----

const metrics = { last: null, timer: null };

function parseMetrics(text) {
  const values = { hits: 0, misses: 0, read: 0, memory: {} };
  for (const line of text.split("\n")) {
    if (line.startsWith("#") || line.trim() === "") continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/);
    if (!m) continue;
    const value = parseFloat(m[3]);
    if (m[1] === "cherenkov_expert_hits_total") values.hits += value;
    else if (m[1] === "cherenkov_expert_misses_total") values.misses += value;
    else if (m[1] === "cherenkov_expert_read_bytes_total") values.read += value;
    else if (m[1] === "cherenkov_memory_bytes") {
      const kind = (m[2] || "").match(/kind="([^"]*)"/);
      values.memory[kind ? kind[1] : "total"] = value;
    }
  }
  return values;
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

function showMetrics(now, values) {
  const last = metrics.last;
  metrics.last = { now, values };
  let hits = values.hits;
  let misses = values.misses;
  // The rate over the last interval when experts were read in it, else since the start.
  if (last && values.hits + values.misses > last.values.hits + last.values.misses) {
    hits -= last.values.hits;
    misses -= last.values.misses;
  }
  $("hit-rate").textContent = hits + misses > 0 ? `${((100 * hits) / (hits + misses)).toFixed(1)} %` : "-";
  $("read-rate").textContent = last && now > last.now
    ? `${bytes((values.read - last.values.read) / ((now - last.now) / 1000))}/s` : "-";
  const kinds = Object.keys(values.memory);
  if (kinds.length === 0) {
    $("memory").textContent = "-";
  } else {
    const total = kinds.reduce((sum, k) => sum + values.memory[k], 0);
    $("memory").textContent = bytes(total);
    $("memory").title = kinds.map((k) => `${k}: ${bytes(values.memory[k])}`).join("\n");
  }
}

function clearMetrics() {
  metrics.last = null;
  for (const id of ["hit-rate", "read-rate", "memory"]) $(id).textContent = "-";
}

async function pollMetrics() {
  let delay = 2000;
  try {
    const res = await fetch("/metrics");
    if (res.ok) showMetrics(performance.now(), parseMetrics(await res.text()));
    else {
      clearMetrics();
      delay = 15000;  // no statistics on this server: ask rarely
    }
  } catch (e) {
    clearMetrics();
    delay = 15000;
  }
  metrics.timer = setTimeout(pollMetrics, delay);
}

async function loadModel() {
  try {
    const res = await fetch("/v1/models");
    const data = await res.json();
    const names = data.data.map((m) => m.id);
    $("model").textContent = names[names.length > 1 ? 1 : 0] || "-";
  } catch (e) {
    $("model").textContent = "-";
  }
}

// ---- wiring ----

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  send();
});
$("prompt").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send();
  }
});
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && state.busy) {
    e.preventDefault();
    stop();
  }
});
$("stop").addEventListener("click", stop);
$("new-chat").addEventListener("click", newChat);
$("use-session").addEventListener("change", () => {
  state.session = null;
  state.synced = 0;
  updateSessionInfo();
});
window.cherenkovRender = renderText;  // the integration test renders samples with it
loadModel();
pollMetrics();

#include "server/web_page.h"

namespace kvslim::server {

namespace {

// One self-contained page. The query string can pre-fill and send a message (?prompt=..&press=..
// &budget=..&send=1), which is how the headless-browser test drives it.
const char* const kPage = R"KVSLIM(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kvslim</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 0; display: flex; height: 100vh; color: #222; }
  #left { flex: 1; display: flex; flex-direction: column; border-right: 1px solid #ddd; min-width: 320px; }
  #right { flex: 1; padding: 12px; overflow: auto; }
  header { padding: 8px 12px; background: #f4f4f4; border-bottom: 1px solid #ddd; font-size: 14px; }
  header label { margin-right: 10px; }
  #log { flex: 1; overflow: auto; padding: 12px; }
  .msg { margin: 6px 0; padding: 8px 10px; border-radius: 8px; white-space: pre-wrap; }
  .user { background: #e8f0fe; }
  .assistant { background: #f1f3f4; }
  .error { background: #fde8e8; color: #a00; }
  #form { display: flex; padding: 8px; gap: 6px; border-top: 1px solid #ddd; }
  #input { flex: 1; min-height: 48px; }
  input[type=number] { width: 70px; }
  .stats { font-size: 13px; color: #555; }
  svg text { font-size: 10px; fill: #555; }
</style>
</head>
<body>
<div id="left">
  <header>
    <label>method <select id="press"></select></label>
    <label>budget <input id="budget" type="number" min="1" placeholder="none"></label>
    <label>max tokens <input id="max_tokens" type="number" min="0" value="64"></label>
    <label>temperature <input id="temperature" type="number" min="0" step="0.1" value="0.8"></label>
    <label>API key <input id="api_key" type="password" size="10"></label>
    <button id="reset">new chat</button>
  </header>
  <div id="log"></div>
  <div id="form"><textarea id="input" placeholder="Message"></textarea><button id="send">Send</button></div>
</div>
<div id="right">
  <h3>KV cache of the last answer</h3>
  <div id="kv-summary" class="stats">No request yet.</div>
  <div id="kv-picture"></div>
</div>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let messages = [];

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api_key").value || localStorage.getItem("kvslim_api_key") || "";
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  $("log").appendChild(div);
  $("log").scrollTop = $("log").scrollHeight;
  return div;
}

function mib(bytes) { return (bytes / 1048576).toFixed(2) + " MiB"; }

// One row per (layer, KV head); a kept run of positions [start, end) is one rectangle.
function drawKeptMap(kv) {
  const map = kv.map;
  const n = Math.max(1, map.n_positions);
  const rowH = 10, gap = 2, labelW = 48, width = 640;
  const rows = map.n_layers * map.n_kv_heads;
  const svgNS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNS, "svg");
  svg.setAttribute("id", "kv-map");
  svg.setAttribute("width", labelW + width + 4);
  svg.setAttribute("height", rows * (rowH + gap) + 20);
  let kept = 0, runs = 0;
  map.layers.forEach((heads, l) => {
    heads.forEach((headRuns, h) => {
      const y = (l * map.n_kv_heads + h) * (rowH + gap);
      const label = document.createElementNS(svgNS, "text");
      label.setAttribute("x", 0); label.setAttribute("y", y + rowH - 1);
      label.textContent = "L" + l + " H" + h;
      svg.appendChild(label);
      const bg = document.createElementNS(svgNS, "rect");
      bg.setAttribute("x", labelW); bg.setAttribute("y", y);
      bg.setAttribute("width", width); bg.setAttribute("height", rowH);
      bg.setAttribute("fill", "#eee");
      svg.appendChild(bg);
      for (const [start, end] of headRuns) {
        const r = document.createElementNS(svgNS, "rect");
        r.setAttribute("class", "kept");
        r.setAttribute("x", labelW + start / n * width);
        r.setAttribute("y", y);
        r.setAttribute("width", Math.max(0.5, (end - start) / n * width));
        r.setAttribute("height", rowH);
        r.setAttribute("fill", "#1a73e8");
        svg.appendChild(r);
        kept += end - start; runs++;
      }
    });
  });
  const axis = document.createElementNS(svgNS, "text");
  axis.setAttribute("x", labelW); axis.setAttribute("y", rows * (rowH + gap) + 14);
  axis.textContent = "prompt position 0 .. " + (n - 1) + " (blue: kept)";
  svg.appendChild(axis);
  svg.dataset.keptPositions = kept;
  svg.dataset.runs = runs;
  $("kv-picture").replaceChildren(svg);
}

function showKv(data) {
  const kv = data.kv, t = data.timings;
  const saved = kv.bytes_full > 0 ? (100 * (1 - kv.bytes_final / kv.bytes_full)) : 0;
  $("kv-summary").textContent =
    "method " + kv.press + (kv.budget ? ", budget " + kv.budget : "") +
    " | kept " + kv.kept_tokens.toFixed(1) + " of " + data.usage.prompt_tokens + " prompt tokens per head" +
    " | KV " + mib(kv.bytes_final) + " vs " + mib(kv.bytes_full) + " uncompressed (" + saved.toFixed(0) + "% saved)" +
    " | prompt " + t.prompt_n + " tokens (" + t.cache_n + " reused), " + t.prompt_per_second.toFixed(0) + " tok/s" +
    " | generation " + t.predicted_per_second.toFixed(1) + " tok/s";
  $("kv-summary").dataset.saved = saved.toFixed(1);
  if (kv.map) drawKeptMap(kv);
}

async function send() {
  const text = $("input").value;
  if (!text) return;
  $("input").value = "";
  messages.push({ role: "user", content: text });
  addMessage("user", text);
  const pending = addMessage("assistant", "...");
  const body = { messages, kv_map: true, max_tokens: Number($("max_tokens").value),
                 temperature: Number($("temperature").value), press: $("press").value };
  if ($("budget").value) body.budget = Number($("budget").value);
  try {
    const res = await fetch("/v1/chat/completions", { method: "POST", headers: headers(), body: JSON.stringify(body) });
    const data = await res.json();
    if (!res.ok) throw new Error(data.error ? data.error.message : res.statusText);
    const answer = data.choices[0].message.content;
    pending.textContent = answer;
    messages.push({ role: "assistant", content: answer });
    showKv(data);
  } catch (e) {
    pending.className = "msg error";
    pending.textContent = String(e.message || e);
    messages.pop();
  }
}

async function init() {
  const params = new URLSearchParams(location.search);
  $("api_key").value = params.get("api_key") || localStorage.getItem("kvslim_api_key") || "";
  $("api_key").addEventListener("change", () => localStorage.setItem("kvslim_api_key", $("api_key").value));
  $("send").addEventListener("click", send);
  $("reset").addEventListener("click", () => { messages = []; $("log").replaceChildren(); });
  $("input").addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); } });
  try {
    const res = await fetch("/props", { headers: headers() });
    const props = await res.json();
    if (!res.ok) throw new Error(props.error ? props.error.message : res.statusText);
    for (const p of props.presses) {
      const o = document.createElement("option");
      o.value = p.name; o.textContent = p.name; o.title = p.description;
      $("press").appendChild(o);
    }
    const d = props.default_generation_settings.params;
    $("press").value = d.press;
    if (d.budget) $("budget").value = d.budget;
  } catch (e) {
    addMessage("error", "cannot read /props: " + (e.message || e));
  }
  if (params.get("press")) $("press").value = params.get("press");
  if (params.get("budget")) $("budget").value = params.get("budget");
  if (params.get("max_tokens")) $("max_tokens").value = params.get("max_tokens");
  if (params.get("prompt")) $("input").value = params.get("prompt");
  if (params.get("send") === "1") await send();
}
init();
</script>
</body>
</html>
)KVSLIM";

}  // namespace

const std::string& web_page_html() {
  static const std::string page = kPage;
  return page;
}

}  // namespace kvslim::server

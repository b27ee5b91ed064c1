#!/usr/bin/env node
// Load generator for `kvslim serve`: C concurrent clients each send R streamed completions of a
// ~N-token prompt (every prompt different from its first token, so no slot reuse helps), then
// prints requests/s, time to first token (median, min, max) and the server's KV memory metrics.
//   node scripts/serve-bench.mjs --url http://127.0.0.1:8080 --clients 4 --requests 3 --tokens 1024 \
//        --max-tokens 32 [--press snapkv --budget 256]
const args = Object.fromEntries(process.argv.slice(2).reduce((pairs, a, i, all) => {
  if (a.startsWith("--")) pairs.push([a.slice(2), all[i + 1]]);
  return pairs;
}, []));
const url = args.url ?? "http://127.0.0.1:8080";
const clients = Number(args.clients ?? 1);
const perClient = Number(args.requests ?? 3);
const targetTokens = Number(args.tokens ?? 1024);
const maxTokens = Number(args["max-tokens"] ?? 32);
const extra = {};
if (args.press) extra.press = args.press;
if (args.budget) extra.budget = Number(args.budget);

async function post(path, body) {
  const res = await fetch(url + path, { method: "POST", headers: { "Content-Type": "application/json" },
                                        body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res;
}

// A prompt of about targetTokens tokens whose first words differ per request.
async function makePrompt(seed) {
  let text = `Request ${seed} ${Math.random().toString(36).slice(2)}.`;
  for (let i = 0; ; i++) {
    const next = text + ` Line ${i} says the key is ${(i * 7919 + seed) % 1000}.`;
    if (i % 8 === 7) {
      const n = (await (await post("/tokenize", { content: next })).json()).tokens.length;
      if (n >= targetTokens) return text;
    }
    text = next;
  }
}

function metric(body, name) {
  const m = new RegExp(`^kvslim:${name} (\\S+)$`, "m").exec(body);
  return m ? Number(m[1]) : NaN;
}

async function one(prompt) {
  const start = performance.now();
  const res = await post("/v1/completions", { prompt, max_tokens: maxTokens, temperature: 0, stream: true, ...extra });
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let ttft = null, text = "", last = null;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    if (ttft === null && text.includes('"text":"') && !/"text":""/.test(text.split("\n\n")[0])) ttft = performance.now() - start;
  }
  for (const line of text.split("\n")) if (line.startsWith("data: {")) last = JSON.parse(line.slice(6));
  return { ttft: ttft ?? performance.now() - start, total: performance.now() - start, final: last };
}

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)], min: s[0], max: s[s.length - 1] };
};

const prompts = [];
for (let i = 0; i < clients * perClient; i++) prompts.push(await makePrompt(i));
const start = performance.now();
const results = [];
await Promise.all(Array.from({ length: clients }, async (_, c) => {
  for (let r = 0; r < perClient; r++) results.push(await one(prompts[c * perClient + r]));
}));
const seconds = (performance.now() - start) / 1000;
const metrics = await (await fetch(url + "/metrics")).text();
const final = results[0].final;
console.log(JSON.stringify({
  clients, requests: results.length, prompt_tokens: final?.usage?.prompt_tokens, max_tokens: maxTokens, ...extra,
  requests_per_s: results.length / seconds,
  ttft_ms: stats(results.map((r) => r.ttft)),
  latency_ms: stats(results.map((r) => r.total)),
  kept_tokens: final?.kv?.kept_tokens,
  request_kv_bytes_peak: final?.kv?.bytes_peak,
  request_kv_bytes_final: final?.kv?.bytes_final,
  server_kv_bytes_peak: metric(metrics, "kv_bytes_peak"),
  server_kv_bytes_in_use: metric(metrics, "kv_bytes_in_use"),
  server_rss_bytes: metric(metrics, "process_resident_memory_bytes"),
}));

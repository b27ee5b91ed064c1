// The official OpenAI Node client against `kvslim serve` (run by CTest as server_openai_node):
// chat completions streamed and not equal what `kvslim generate` gives for the same prompt and
// seed, the extra fields (press, budget) reach the engine, and errors arrive as the client's
// typed exceptions. Environment: KVSLIM_BINARY, KVSLIM_MODEL, KVSLIM_TEMPLATE.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import OpenAI from "openai";

const binary = process.env.KVSLIM_BINARY;
const model = process.env.KVSLIM_MODEL;
const template = process.env.KVSLIM_TEMPLATE;
const apiKey = "node-test-key";
let server;
let baseURL;

before(async () => {
  server = spawn(binary, ["serve", "-m", model, "--chat-template", template, "--port", "0", "--threads", "2",
                          "--api-key", apiKey], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("server did not start:\n" + log)), 30000);
    server.stderr.on("data", (chunk) => {
      log += chunk;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    server.on("exit", (code) => reject(new Error(`server exited (${code}):\n${log}`)));
  });
  baseURL = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {  // bounded: 30 s
    const res = await fetch(`${baseURL}/health`).catch(() => null);
    if (res && res.status === 200) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("server never became healthy:\n" + log);
});

after(() => { if (server) server.kill("SIGTERM"); });

const client = () => new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 120000 });
const messages = [
  { role: "system", content: "Answer briefly." },
  { role: "user", content: "The grass is green. The sky is blue. What colour is the sky?" },
];

async function rendered() {
  const res = await fetch(`${baseURL}/apply-template`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ messages }),
  });
  assert.equal(res.status, 200);
  return (await res.json()).prompt;
}

function cliGenerate(prompt, args) {
  const r = spawnSync(binary, ["generate", "-m", model, "-p", prompt, "--json", "--threads", "2", ...args],
                      { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

test("chat completion equals the CLI for the same seed", async () => {
  const cli = cliGenerate(await rendered(), ["-n", "12", "--seed", "7"]);
  const out = await client().chat.completions.create({ model: "kvslim", messages, max_tokens: 12, seed: 7 });
  assert.equal(out.object, "chat.completion");
  assert.equal(out.choices[0].message.role, "assistant");
  assert.equal(out.choices[0].message.content, cli.text);
  assert.equal(out.usage.prompt_tokens, cli.n_prompt);
  assert.equal(out.usage.completion_tokens, cli.n_generated);
  assert.equal(out.kv.press, "full");
});

test("streamed chat completion equals the CLI for the same seed", async () => {
  const cli = cliGenerate(await rendered(), ["-n", "12", "--seed", "8", "--temp", "1.1"]);
  const stream = await client().chat.completions.create({
    model: "kvslim", messages, max_tokens: 12, seed: 8, temperature: 1.1, stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  let usage = null;
  let finish = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.delta?.content) text += choice.delta.content;
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  assert.ok(chunks >= 2);
  assert.equal(text, cli.text);
  assert.equal(finish, cli.stop_reason === "eos" ? "stop" : "length");
  assert.equal(usage.completion_tokens, cli.n_generated);
});

test("per-request press and budget reach the engine", async () => {
  const long = Array.from({ length: 30 }, (_, i) => `Line ${i} says the key is ${(i * 7919) % 1000}.`).join(" ");
  const ask = (extra) => client().chat.completions.create({
    model: "kvslim", messages: [{ role: "user", content: long }], max_tokens: 3, seed: 1, ...extra });
  const full = await ask({});
  const knorm = await ask({ press: "knorm", budget: 40 });
  assert.equal(full.kv.kept_tokens, full.usage.prompt_tokens);
  assert.equal(knorm.kv.press, "knorm");
  assert.equal(knorm.kv.budget, 40);
  assert.ok(knorm.kv.kept_tokens <= 40);
  assert.ok(knorm.kv.bytes_final < full.kv.bytes_final);
});

test("refusals arrive as typed client errors", async () => {
  await assert.rejects(
    client().chat.completions.create({ model: "kvslim", messages, press: "nosuch" }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /valid: full/.test(e.message));
  const wrongKey = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(wrongKey.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  const models = await client().models.list();
  assert.equal(models.data[0].id, "kvslim-small.gguf");
});

// The study's per-request TTFT split on the embedded sim: the sim (a child process, as `npm start` runs it) sends
// vLLM's request spans over OTLP to a receiver the study starts; the bench joins them to its records and the report
// shows the split. At a time-scale other than 1 the spans are not on the client's clock, so no split is made.
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { CLI_ENTRY } from "../../src/entry.ts";
import { shellQuote } from "../../src/shell.ts";
import { DEFAULT_PROFILE, loadProfile } from "../../src/sim/profile.ts";
import { runStudy } from "../../src/study/index.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-split-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const plan = { bench: { requests: 6, outputLen: 8, warmup: 1 } };

test("study on the embedded sim at time-scale 1: every bench request joined to its span, the split adds up to the client's TTFT, in HTML, Markdown and JSON", async () => {
  const out = join(dir, "real-time");
  const { result } = await runStudy({ phases: ["bench"], plan, outDir: out, dbPath: null, telemetry: "none" });
  const s = result.requestSplit;
  assert.ok(s, "no requestSplit section");
  assert.equal(s.requests, 6);
  assert.equal(s.joined, 6, s.findings.join("; "));
  assert.equal(s.perRequest.length, 6);
  const step = result.latency!.itlMs.value;
  for (const q of s.perRequest) {
    const sum = q.networkMs + q.intakeMs + q.queueMs + q.prefillMs + q.deliveryMs;
    assert.ok(Math.abs(sum - q.clientTtftMs) < 1e-6, `request ${q.index}: parts ${sum} vs TTFT ${q.clientTtftMs}`);
    // One request at a time: it waits at most for the step under way to end; a 64-token prefill takes time.
    assert.ok(q.queueMs >= 0 && q.queueMs < step + 1, `request ${q.index}: queue ${q.queueMs} ms, step ${step} ms`);
    assert.ok(q.prefillMs > 0, `request ${q.index}: prefill ${q.prefillMs}`);
  }
  // The bench's own TTFT mean and the split's client TTFT are the same requests.
  const ttft = s.rows.find((r) => r.key === "clientTtftMs")!;
  assert.ok(Math.abs(ttft.mean - result.latency!.ttftMs.value) < 1e-6 * Math.max(1, ttft.mean));
  const html = readFileSync(join(out, "index.html"), "utf8");
  assert.match(html, /id="request-split"/);
  assert.match(html, /data-chart="ttft-split"[\s\S]*<svg/);
  assert.match(readFileSync(join(out, "report.md"), "utf8"), /### Where each TTFT went, per request/);
  const json = JSON.parse(readFileSync(join(out, "results.json"), "utf8"));
  assert.equal(json.requestSplit.joined, 6);
});

test("study on the embedded sim: the engine's spans (detailed traces) calibrate the model's host term to the sim's own host time per step", async () => {
  // The profile's scheduler cost raised past vLLM's reference host range (0.1–0.8 ms), so only the spans can put it there.
  const set = { "cost.schedulerUs": 900 };
  const cost = loadProfile(DEFAULT_PROFILE, set).cost;
  const truth = (cost.schedulerUs + cost.schedulerUsPerSeq) / 1000;
  const out = join(dir, "host");
  const { result } = await runStudy({
    phases: ["bench", "model"],
    plan: { bench: { requests: 12, outputLen: 12, warmup: 1 } },
    simSet: set,
    outDir: out,
    dbPath: null,
    telemetry: "none",
  });
  assert.equal(result.requestSplit?.joined, 12);
  const md = result.model!;
  const h = md.hostFromSpansMs;
  assert.ok(h, md.notes.join("\n"));
  // The sim's step jitter is 2 % (lognormal); the mean over 12 × 12 steps is far tighter than that.
  assert.ok(Math.abs(h.value - truth) <= 0.02 * truth, `measured ${h.value} vs the sim's ${truth}`);
  const note = md.notes.find((n) => n.startsWith("Host term measured from the engine's spans:"));
  assert.ok(note, md.notes.join("\n"));
  const fitted = Number(/fitted ([\d.]+) ±/.exec(note)![1]);
  assert.ok(Math.abs(fitted - truth) <= 0.02 * truth, `fitted host ${fitted} vs the sim's ${truth}: ${note}`);
  assert.match(note, /\(prior 0 ± [\d.]+ ms: the model's engine term for vllm/);
  // The server's step replaced the client's ITL; each row names its origin.
  const rows = md.residuals.map((r) => r.what);
  assert.ok(rows.includes("engine host time per step (engine spans, 12 requests, detailed traces)"), rows.join("; "));
  assert.ok(rows.includes("server decode step at batch 1 (engine spans, 12 requests, detailed traces)"));
  assert.ok(!rows.some((r) => r.startsWith("ITL batch 1 (client)")));
  assert.ok(md.notes.some((n) => /^Queue \(engine spans, 12 requests, detailed traces\): [\d.]+ ms/.test(n)));
  // The calibrated model carries it as its engine term; the report and results.json say so.
  const engine = md.terms.find((t) => t.name === "engine overhead")!;
  assert.ok(Math.abs(engine.ms - fitted) < 0.01, `engine term ${engine.ms}`);
  const json = JSON.parse(readFileSync(join(out, "results.json"), "utf8"));
  assert.equal(json.model.hostFromSpansMs.value, h.value);
  assert.match(readFileSync(join(out, "report.md"), "utf8"), /Host term measured from the engine's spans: /);
});

test("study at time-scale 10: no receiver, no split (the sim's spans are on its own clock), the model calibrated on the client's ITL as before", async () => {
  const { result } = await runStudy({
    phases: ["bench", "model"],
    plan,
    timeScale: 10,
    dbPath: null,
    telemetry: "none",
  });
  assert.equal(result.requestSplit, undefined);
  assert.ok(result.latency);
  assert.equal(result.model?.hostFromSpansMs, undefined);
  assert.deepEqual(
    result.model?.residuals.map((r) => r.what),
    ["ITL batch 1 (client)", "TTFT"],
  );
  assert.ok(!result.model?.notes.some((n) => /engine's spans/.test(n)));
});

/**
 * A program named `name` that refuses to start without the OTLP protocol variable, runs `lines` (shell, to check and
 * reshape its arguments) and then the sim with `simArgs` and the rest, and a study on it: the engine's command line,
 * the sim's spans.
 */
async function studyOnFakeEngine(name: string, lines: string, simArgs: string, cmdArgs: string) {
  const bin = join(dir, `bin-${name}`);
  const exe = join(bin, name);
  rmSync(bin, { recursive: true, force: true });
  mkdirSync(bin, { recursive: true });
  writeFileSync(
    exe,
    `#!/bin/sh
[ "$OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" = http/protobuf ] || { echo "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL not set" >&2; exit 3; }
${lines}
exec ${shellQuote(process.execPath)} ${shellQuote(CLI_ENTRY)} sim --time-scale 1 --seed 3 ${simArgs} "$@"
`,
  );
  chmodSync(exe, 0o755);
  const { result } = await runStudy({
    serverCmd: `${exe} ${cmdArgs} --port {port}`,
    phases: ["bench"],
    plan,
    dbPath: null,
    telemetry: "none",
    host: null,
  });
  const s = result.requestSplit;
  assert.ok(s, "no requestSplit section");
  assert.equal(s.joined, 6, s.findings.join("; "));
  return s;
}

test("study --server-cmd with a vLLM command: the catalog's span flags and environment reach the server, and its spans are joined", async () => {
  // vLLM's command line: `serve MODEL` dropped, the rest (--port, --otlp-traces-endpoint …/v1/traces) to the sim.
  await studyOnFakeEngine("vllm", "shift 2", "", "serve zai-org/GLM-5");
});

test("study --server-cmd with an SGLang command: --enable-trace and the endpoint reach it, each request carries its rid, and its traces are joined", async () => {
  // SGLang's: --enable-trace checked and dropped; the sim in SGLang's layout names requests by the body's rid only.
  const s = await studyOnFakeEngine(
    "sglang",
    `traced=
for a in "$@"; do shift; if [ "$a" = --enable-trace ]; then traced=1; else set -- "$@" "$a"; fi; done
[ -n "$traced" ] || { echo "no --enable-trace" >&2; exit 3; }`,
    "--otlp-layout sglang",
    "",
  );
  assert.ok(s.findings.some((f) => /not sent by SGLang/.test(f)));
});

// Steps, classes and layers on traces captured for this project on an H200 (../shared/traces/h200,
// README there): a CUDA-graph decode replayed 6 times back to back, and a Hugging Face eager decode
// of 8 ProfilerSteps. The same answers must come by other routes (no launches: the repeating kernel
// sequence), and a trace whose steps cannot be told apart must say so.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";
import { analyzeTrace, formatAnalysis, type TraceAnalysis, toReportSection } from "../../src/trace/index.ts";

const H200 = resolve(dirname(fileURLToPath(import.meta.url)), "../../../shared/traces/h200");
const GRAPH = join(H200, "h200-dense8b-graph-b1.json.gz");
const EAGER = join(H200, "h200-hf-llama8b-eager-b1.json.gz");
const dir = mkdtempSync(join(tmpdir(), "inferscope-trace-h200-"));

const cache = new Map<string, Promise<TraceAnalysis>>();
const analysis = (f: string): Promise<TraceAnalysis> => {
  let p = cache.get(f);
  if (!p) {
    p = analyzeTrace([f]);
    cache.set(f, p);
  }
  return p;
};

interface Ev {
  cat?: string;
  name?: string;
  ts?: number;
  args?: Record<string, unknown>;
}
const graphDoc = (): { traceEvents: Ev[] } => JSON.parse(gunzipSync(readFileSync(GRAPH)).toString("utf8"));
const HOST_CATS = new Set(["cuda_runtime", "cuda_driver", "ac2g"]);

const near = (x: number, y: number, tol: number, what: string) =>
  assert.ok(Math.abs(x - y) <= tol * Math.abs(y), `${what}: ${x} vs ${y} (±${tol * 100} %)`);

function checkSixSteps(a: TraceAnalysis, what: string): void {
  assert.equal(a.steps.length, 6, `${what}: ${a.notes.join("; ")}`);
  const span = a.overall.timeline.spanUs;
  for (const s of a.steps) near(s.timeline.spanUs, span / 6, 0.03, `${what} step ${s.index} span`);
  for (const cls of ["gemm", "elementwise"] as const) {
    const total = a.overall.kernelUsByClass[cls]!;
    for (const s of a.steps) near(s.kernelUsByClass[cls]!, total / 6, 0.01, `${what} step ${s.index} ${cls}`);
  }
}

test("graph trace: one step per CUDA-graph launch, each a sixth of the trace", async () => {
  const a = await analysis(GRAPH);
  assert.equal(a.stepMode, "graph");
  assert.match(a.notes.join("\n"), /one step per CUDA\/HIP graph launch \(6 launches/);
  checkSixSteps(a, "graph");
  for (const s of a.steps) assert.equal(s.graphKernels, s.kernels);
});

test("graph trace: the softmax between the attention matmuls is attention; sampling is the one argmax after the LM head", async () => {
  const a = await analysis(GRAPH);
  for (const s of a.steps)
    assert.ok((s.kernelsByClass.sampling ?? 0) <= 2, `step ${s.index}: ${s.kernelsByClass.sampling}`);
  const soft = Object.entries(a.kernelClasses).find(([n]) => n.includes("softmax_warp_forward"))!;
  assert.equal(soft[1].class, "attention");
  assert.equal(soft[1].rule, "sampling", "the name alone says sampling; its place decides");
  assert.equal(soft[1].decidedBy, "context attention.softmax-between-gemms");
  // 32 layers × 6 steps of softmax, none left as sampling
  assert.equal(a.steps.reduce((x, s) => x + (s.kernelsByClass.attention ?? 0), 0) % 192, 0);
});

test("eager trace: 8 ProfilerSteps kept, host-bound; cuDNN SDPA is attention.cudnn-sdpa", async () => {
  const a = await analysis(EAGER);
  assert.equal(a.stepMode, "profiler-step");
  assert.equal(a.steps.length, 8);
  const o = a.overall;
  assert.ok(o.idleHostUs / o.timeline.spanUs > 0.85, `host-bound idle ${o.idleHostUs} of ${o.timeline.spanUs}`);
  const sdpa = Object.entries(a.kernelClasses).find(([n]) => n.includes("fort_native_sdpa"))!;
  assert.deepEqual([sdpa[1].class, sdpa[1].rule], ["attention", "attention.cudnn-sdpa"]);
  for (const s of a.steps) assert.ok((s.kernelsByClass.sampling ?? 0) <= 2);
});

test("layers: 32 found in every step of both traces, with their spread, head and tail", async () => {
  for (const f of [GRAPH, EAGER]) {
    const a = await analysis(f);
    const l = a.layers!;
    assert.ok(l, f);
    assert.equal(l.layers, 32, f);
    assert.equal(l.steps, a.steps.length, f);
    const u = l.layerKernelUs;
    assert.ok(u.min <= u.mean && u.mean <= u.max && u.cv >= 0 && u.cv < 0.1, `${f}: ${JSON.stringify(u)}`);
    // 32 layers + head + tail = the step's kernel time
    const step = a.steps[0]!;
    const stepKernelUs = Object.values(step.kernelUsByClass).reduce((x, y) => x + (y ?? 0), 0);
    near(32 * u.mean + l.head.kernelUs + l.tail.kernelUs, stepKernelUs, 0.02, `${f} layers + head + tail`);
    // the LM head GEMM and the sampling are in the tail, not in a layer
    assert.ok((l.tail.byClass.gemm ?? 0) > 0 && (l.tail.byClass.sampling ?? 0) > 0, JSON.stringify(l.tail.byClass));
    assert.equal(l.layerByClass.sampling, undefined);
    if (l.ops.length) assert.equal(l.ops.length, l.kernelsPerLayer);
  }
  const g = (await analysis(GRAPH)).layers!;
  // per-op table: the attention block (Q·Kᵀ, scale, copy, softmax, copy, P·V) sits inside each layer
  assert.equal(g.ops.filter((o) => o.class === "attention").length, 6);
});

test("no launches in the trace: the repeating kernel sequence gives the same 6 steps, tolerating a missing tail kernel", async () => {
  const doc = graphDoc();
  doc.traceEvents = doc.traceEvents.filter((e) => !HOST_CATS.has(e.cat ?? ""));
  // Drop the argmax of the third step: a step's sampling tail may vary.
  const argmax = doc.traceEvents
    .filter((e) => e.cat === "kernel" && /ArgMax|argmax/.test(e.name ?? ""))
    .sort((x, y) => (x.ts ?? 0) - (y.ts ?? 0));
  assert.equal(argmax.length, 6);
  doc.traceEvents = doc.traceEvents.filter((e) => e !== argmax[2]);
  const f = join(dir, "graph-no-launches.json");
  writeFileSync(f, JSON.stringify(doc));
  const a = await analyzeTrace([f]);
  assert.equal(a.stepMode, "period", a.notes.join("; "));
  assert.equal(a.steps.length, 6);
  const span = a.overall.timeline.spanUs;
  for (const s of a.steps) near(s.timeline.spanUs, span / 6, 0.03, `period step ${s.index}`);
  assert.equal(a.layers?.layers, 32);
});

test("one replay with no launches: steps cannot be told apart, so totals are reported and said to be totals", async () => {
  const doc = graphDoc();
  const kernels = doc.traceEvents.filter((e) => e.cat === "kernel").sort((x, y) => (x.ts ?? 0) - (y.ts ?? 0));
  const firstCorr = kernels[0]!.args!.correlation;
  doc.traceEvents = doc.traceEvents.filter(
    (e) => !HOST_CATS.has(e.cat ?? "") && (e.args?.correlation === undefined || e.args.correlation === firstCorr),
  );
  const f = join(dir, "graph-one-replay.json");
  writeFileSync(f, JSON.stringify(doc));
  const a = await analyzeTrace([f]);
  assert.equal(a.stepMode, "none");
  assert.equal(a.steps.length, 1);
  assert.match(a.notes.join("\n"), /steps cannot be told apart.*totals over the whole trace/);
  // its layers are still found: 32, not 32 "steps"
  assert.equal(a.layers?.layers, 32);
  // The table holds totals and no per-step column (was: an "ms/step" column beside "totals over the whole trace").
  const text = formatAnalysis(a);
  const lines = text.split("\n");
  const at = lines.findIndex((l) =>
    l.startsWith("totals over the whole trace, no ms/step column: steps cannot be told apart ("),
  );
  assert.ok(at >= 0, text);
  assert.match(lines[at + 2]!, /│ class +│ total ms │ +share │ kernels │/);
  assert.match(text, /│ whole time line +│ +[\d.]+ │ +100 % │/);
  assert.doesNotMatch(text, /ms\/step │|kernels\/step|× layers ms\/step|unknown step|^step 0 /m);
  assert.match(text, /GPU activities on 1 stream\(s\), steps cannot be told apart/);
  assert.match(text, /^layers: 32 in the trace × \d+ kernels;/m);
});

test("roofline: each weight GEMM's bytes from llama-3.1-8b's shapes, achieved bandwidth, and the step beside the model", async () => {
  const opts = { model: "llama-3.1-8b", gpu: "h200", measuredBandwidthGBs: 4251, contextLen: 1024 };
  const a = await analyzeTrace([GRAPH], { roofline: opts });
  const r = a.roofline!;
  assert.deepEqual(
    r.gemms.map((g) => g.name),
    ["qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head"],
  );
  const qkv = r.gemms[0]!;
  // 4096 × (32 + 2·8)·128 bf16 weights, plus the batch-1 activations
  assert.equal(qkv.bytes, 4096 * 6144 * 2 + (4096 + 6144) * 2);
  near(qkv.achievedGBs, qkv.bytes / (qkv.us.mean * 1e3), 1e-6, "achieved = bytes / time");
  // o_proj and down_proj are split-K: the GEMM and its reduce are one call
  assert.equal(r.gemms[1]!.kernels.length, 2);
  for (const g of r.gemms) {
    assert.ok(g.ceilingShare > 0.2 && g.ceilingShare < 1.05, `${g.name}: ${g.ceilingShare}`);
    assert.equal(g.callsPerStep, g.name === "lm_head" ? 1 : 32);
  }
  // every weight GEMM of a step is accounted for: their time is the step's GEMM time
  const gemmUs = a.steps.reduce((x, s) => x + (s.kernelUsByClass.gemm ?? 0), 0) / a.steps.length;
  near(r.weightGemms!.us, gemmUs, 0.01, "Σ weight GEMMs vs step GEMM time");
  const w = r.terms.find((t) => t.term === "weights")!;
  assert.ok(w.measuredMs !== null && w.predictedMs.mid > 0);
  near(r.measuredStepMs, a.overall.timeline.spanUs / 6 / 1000, 0.03, "measured step");
  // the HF trace runs q, k, v, gate and up as separate GEMMs: seven per layer
  const e = await analyzeTrace([EAGER], { roofline: { ...opts, contextLen: 516 } });
  assert.deepEqual(
    e.roofline!.gemms.map((g) => g.name),
    ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"],
  );
  // the study report's trace section carries both
  const sec = toReportSection(a);
  assert.equal(sec.layers?.layers, 32);
  assert.match(
    sec.roofline!.gemms[0]!.line,
    /^qkv_proj: 50\.\d MB in 1\d\.\d µs = \d\.\d\d TB\/s, \d+ % of 4\.25 TB\/s$/,
  );
  assert.equal(sec.stepMode, "graph");
});

const cli = (...args: string[]) =>
  spawnSync(process.execPath, ["--import", "tsx", "src/cli/main.ts", "trace", ...args], { encoding: "utf8" });

test("CLI: roofline in the table and --json, --explain shows the evidence, roofline flags without --model refused", () => {
  const table = cli(GRAPH, "--model", "llama-3.1-8b", "--gpu", "h200", "--measured-bandwidth", "4251GB/s");
  assert.equal(table.status, 0, table.stderr);
  assert.match(table.stdout, /layers: 32 per step × 50 kernels \(6 steps\)/);
  assert.match(table.stdout, /qkv_proj: 50\.4 MB in/);
  assert.match(table.stdout, /step vs the model, term by term/);
  const ex = cli(GRAPH, "--explain", "softmax_warp", "--json");
  assert.equal(ex.status, 0, ex.stderr);
  const list = JSON.parse(ex.stdout).explain;
  assert.equal(list.length, 1);
  assert.equal(list[0].decidedBy, "context attention.softmax-between-gemms");
  assert.equal(list[0].matchingRules[0].id, "sampling");
  const bad = cli(GRAPH, "--gpu", "h200");
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--gpu is for the roofline, which needs --model/);
  const bw = cli(GRAPH, "--model", "llama-3.1-8b", "--gpu", "h200", "--measured-bandwidth", "fast");
  assert.equal(bw.status, 2);
  assert.match(bw.stderr, /--measured-bandwidth: not a bandwidth: "fast"/);
  assert.doesNotMatch(bw.stderr, /\n\s+at /, "no stack trace");
});

test("study report: the trace section renders the layers and the roofline in HTML and Markdown", async () => {
  const { sampleResult } = await import("../report/sample.ts");
  const { renderHtml } = await import("../../src/report/html.ts");
  const { renderMarkdown } = await import("../../src/report/markdown.ts");
  const a = await analyzeTrace([GRAPH], {
    roofline: { model: "llama-3.1-8b", gpu: "h200", measuredBandwidthGBs: 4251, contextLen: 1024 },
  });
  const r = sampleResult();
  const sec = toReportSection(a);
  r.trace = { ...r.trace!, layers: sec.layers, roofline: sec.roofline, stepMode: sec.stepMode };
  const html = renderHtml(r, []);
  assert.match(html, /<h3>Layers<\/h3>\s*<p>32 layers per step, 50 kernels each/);
  assert.match(html, /<h3>Weight-GEMM roofline<\/h3>/);
  assert.match(html, /<td>qkv_proj<\/td>/);
  assert.match(html, /softmax_warp_forward/);
  const md = renderMarkdown(r);
  assert.match(md, /32 layers per step, 50 kernels each/);
  assert.match(md, /- qkv\\_proj: 50\.4 MB in 15\.\d µs/);
  assert.match(md, /\| weight reads \|/);
});

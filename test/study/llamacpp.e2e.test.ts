// A real engine as a user's server: llama.cpp's CPU llama-server from ../shared/engines/llama.cpp,
// started over loopback. The study detects it (engine, version, the GGUF's model, this CPU host),
// runs the user's two --variant arms, and says nothing of the seed deployment; bench puts the
// server's own per-request timings beside the client's; the audit reads llama.cpp's counters; the
// calibrated model's decode range holds the measured decode time.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import type { StudyResult } from "../../src/report/types.ts";
import { LLAMA_SERVER, LLAMA_SMALL, type LlamaServer, llamaSkipReason, startLlamaServer } from "../helpers/llamacpp.ts";

const SERVER = LLAMA_SERVER;
const SMALL = LLAMA_SMALL;
const SKIP = llamaSkipReason();

function cli(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const p = spawn(process.execPath, ["bin/inferscope.mjs", ...args]);
    let stdout = "";
    let stderr = "";
    p.stdout.on("data", (d) => (stdout += d));
    p.stderr.on("data", (d) => (stderr += d));
    p.on("close", (status) => done({ status, stdout, stderr }));
  });
}

let server: LlamaServer | undefined;
let url = "";

before(async () => {
  if (SKIP) return;
  server = await startLlamaServer("small-random-llama");
  url = server.url;
});

after(() => server?.stop());

test("bench: per request, client TPOT within 3 % of llama.cpp's predicted_per_token_ms (median)", {
  skip: SKIP,
}, async () => {
  const r = await cli(
    ["bench", "--base-url", url, "--num-prompts", "6", "--concurrency", "1", "--random-input-len", "32"].concat([
      "--random-output-len",
      "128",
      "--ignore-eos",
      "--json",
    ]),
  );
  assert.equal(r.status, 0, r.stderr);
  const s = JSON.parse(r.stdout).inferscope.server_timings;
  assert.ok(s, "server timings summarised");
  assert.equal(s.source, "llamacpp-timings");
  assert.equal(s.requests, 6);
  assert.ok(s.abs_diff_pct <= 3, `median |client TPOT − server| / server = ${s.abs_diff_pct} %`);
  // The step figure (predicted_ms ÷ (n − 1)) has TPOT's definition: closer still.
  assert.ok(s.step_abs_diff_pct <= 3, `step: ${s.step_abs_diff_pct} %`);
  assert.ok(s.server_prompt_ms > 0 && s.ttft_minus_prompt_ms > 0);
});

test("metrics audit recognises llama.cpp and reads its counters", { skip: SKIP }, async () => {
  const r = await cli(["metrics", "audit", `${url}/metrics`, "--window", "1s", "--json"]);
  assert.equal(r.status, 0, r.stderr);
  const a = JSON.parse(r.stdout);
  assert.equal(a.engine.id, "llamacpp");
  const decode = a.concepts.find((c: { concept: string }) => c.concept === "decode");
  assert.equal(decode.observable, true);
  const gen = a.concepts.find((c: { concept: string }) => c.concept === "generation_tokens");
  assert.ok(gen.observable && gen.value.after > 0, JSON.stringify(gen));
  const text = JSON.stringify(a.gaps);
  assert.doesNotMatch(text, /NCCL|--gpu /, "no NCCL experiment and no GPU flags for llama.cpp");
  assert.match(text, /slots/);
});

test("study --server-cmd llama-server --variant t1 --variant t2: detected, A/B run, no seed words, calibrated range holds the measurement", {
  skip: SKIP,
}, async () => {
  const out = join(mkdtempSync(join(tmpdir(), "inferscope-llama-")), "report");
  const cmd = `${SERVER} -m ${SMALL} --alias small-random-llama --host 127.0.0.1 --port {port} --metrics -t 1 -c 4096 -np 4`;
  const r = await cli(
    ["study", "--server-cmd", cmd, "--variant", "t1:", "--variant", "t2: --threads 2", "--quick"].concat([
      "--out",
      out,
      "--no-store",
      "--json",
    ]),
  );
  assert.equal(r.status, 0, r.stderr);
  const res = JSON.parse(readFileSync(join(out, "results.json"), "utf8")) as StudyResult;
  const d = res.meta.deployment;
  assert.equal(d.engine, "llamacpp");
  assert.equal(d.sources?.engine?.source, "detected");
  assert.match(d.engineVersion ?? "", /^b4748/);
  assert.equal(d.modelName, "small-random-llama", "the model named by its GGUF header");
  assert.match(d.sources?.modelName?.from ?? "", /GGUF/);
  assert.equal(d.quant, "gguf");
  assert.equal(d.deviceKind, "cpu");
  assert.equal(d.sources?.deviceKind?.source, "detected");
  // The A/B: the user's arms, with a verdict; no per-all-reduce figure (no collectives).
  assert.deepEqual(
    res.ab!.arms.map((a) => a.name),
    ["t1", "t2"],
  );
  assert.ok(res.ab!.verdict.length > 0);
  assert.equal(res.ab!.deltaPerCallUs, undefined);
  const trace = res.meta.phases.find((p) => p.name === "trace")!;
  assert.equal(trace.status, "unavailable", trace.reason);
  for (const f of ["report.md", "index.html", "results.json"]) {
    const text = readFileSync(join(out, f), "utf8");
    for (const w of ["nvfp4", "rtx-pro-6000", "NCCL", "8×"]) assert.ok(!text.includes(w), `${f} says "${w}"`);
  }
  // The server's own timing beside the client's.
  assert.equal(res.serverTimings?.source, "llamacpp-timings");
  // Telemetry on a CPU host: auto takes /proc/stat (+ RAPL where readable) for a server on this host. Every
  // figure it cannot give is named with the reason, never shown as 0 or left blank.
  const tp = res.meta.phases.find((p) => p.name === "telemetry")!;
  if (tp.status === "ok") {
    const t = res.telemetry!;
    assert.match(t.source, /cpu/);
    assert.ok(t.cpuBusy && t.cpuBusy.value > 0 && t.cpuBusy.value <= 100, `CPU busy ${t.cpuBusy?.value}`);
    // The server found behind its port, its threads read: CPU used and the share spent waiting for a CPU.
    assert.match(t.serverRunQueue?.how ?? "", /llama-server \(pid \d+\)/);
    assert.ok(t.serverRunQueue!.value >= 0 && t.serverRunQueue!.value < 100);
    assert.ok(t.serverCpuCores!.value > 0 && t.serverCpuCores!.value <= 2.5, `${t.serverCpuCores!.value} cores`);
    if (!t.energyJ)
      assert.ok(
        t.unavailable.some((u) => /energy/i.test(u.field) && u.why.length > 0),
        JSON.stringify(t.unavailable),
      );
    else assert.ok(t.energyJ.value > 0);
    const html = readFileSync(join(out, "index.html"), "utf8");
    assert.match(html, /Hardware telemetry/);
    assert.match(html, /CPU busy/);
  } else assert.ok((tp.reason ?? "").length > 0, "an unavailable telemetry phase says why");
  // (d) The model, calibrated on this run, brackets the measured decode time: the calibrated range
  // meets the measurement's own 95 % interval (the fit also weighs the sweep slope, a second
  // measurement of the same per-token time, so on a busy host its centre sits between the two).
  // On a contended host the fit takes the server's own work: the measurement less its measured run-queue wait.
  const m = res.latency!.itlMs;
  const cal = res.model!.calibratedStepMs!;
  const wait = res.model!.hostContentionMs?.value ?? 0;
  assert.ok(
    cal.low! <= m.high! - wait && m.low! - wait <= cal.high!,
    `calibrated [${cal.low}, ${cal.high}] vs measured ${m.value} [${m.low}, ${m.high}] less ${wait} ms waiting for a CPU`,
  );
});

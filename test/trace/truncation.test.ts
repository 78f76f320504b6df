// Truncated traces (hardening review): a cut file reports its last step as partial, and a cut that
// removed all GPU activity names the truncation, not CUPTI.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { InputError } from "../../src/errors.ts";
import { analyzeTrace } from "../../src/trace/index.ts";
import { TraceBuilder } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-trace-cut-"));
const B200 = resolve(
  dirname(fileURLToPath(import.meta.url)),
  "../../../shared/traces/tracelens/b200/eager_trace.json.gz",
);

test("inferscope trace on a .json.gz cut at 90 %: the cut-off last step is reported partial, not counted whole", () => {
  const whole = readFileSync(B200);
  const cut = join(dir, "eager_trace-cut90.json.gz");
  writeFileSync(cut, whole.subarray(0, Math.floor(whole.length * 0.9)));
  const r = spawnSync(process.execPath, ["--import", "tsx", "src/cli/main.ts", "trace", cut, "--json"], {
    encoding: "utf8",
  });
  assert.equal(r.status, 0, r.stderr);
  const a = JSON.parse(r.stdout);
  assert.equal(a.ranks[0].info.truncated, true);
  const last = a.steps[a.steps.length - 1];
  assert.equal(last.kind, "prefill");
  assert.equal(last.clipped, true);
  assert.match(last.clipReason, /^the trace file is truncated: this step is partial/);
  // excluded from the per-kind summaries: no whole prefill step is claimed
  assert.equal(
    a.overall.byKind.find((k: { kind: string }) => k.kind === "prefill"),
    undefined,
  );
  assert.match(a.warnings.join("\n"), /truncated gzip/);
  const text = spawnSync(process.execPath, ["--import", "tsx", "src/cli/main.ts", "trace", cut], {
    encoding: "utf8",
  });
  assert.match(text.stdout, /TRUNCATED, partial results/);
});

test("a trace cut before its GPU activity blames the truncation, not CUPTI", async () => {
  // Kineto's order: CPU-side events first, GPU activities at the end.
  const b = new TraceBuilder();
  b.annotation("execute_context_0(0)_generation_4(4)", 0, 500);
  const corr: number[] = [];
  for (let i = 0; i < 50; i++) corr.push(b.launch(10 + i * 8));
  for (let i = 0; i < 50; i++) b.kernel("nvjet_tst_64x8_64x16_4x1_v_bz_TNT", 600 + i * 10, 8, { corr: corr[i] });
  const text = b.json();
  const firstKernel = text.indexOf('"cat": "kernel"');
  assert.ok(firstKernel > 0);
  const gz = gzipSync(text.slice(0, firstKernel - 40));
  const p = join(dir, "cut-before-gpu.json.gz");
  writeFileSync(p, gz.subarray(0, gz.length - 8)); // drop the gzip trailer as well: a cut download
  await assert.rejects(analyzeTrace([p]), (e: unknown) => {
    assert.ok(e instanceof InputError);
    const m = (e as Error).message;
    assert.match(m, /no GPU kernels in the trace .*: the file is truncated/);
    assert.doesNotMatch(m, /CUPTI could not/);
    assert.ok(m.indexOf("truncated") < (m.indexOf("CUPTI") === -1 ? Number.POSITIVE_INFINITY : m.indexOf("CUPTI")));
    return true;
  });
  // The same CPU-side events in a complete file: now CUPTI is the explanation.
  const c = new TraceBuilder();
  c.annotation("execute_context_0(0)_generation_4(4)", 0, 500);
  for (let i = 0; i < 50; i++) c.launch(10 + i * 8);
  await assert.rejects(analyzeTrace([c.write(join(dir, "no-gpu-complete.json"))]), /CUPTI could not record kernels/);
});

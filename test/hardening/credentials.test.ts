// A server behind an API key (vLLM --api-key guards every route, /start_profile and /stop_profile too):
// trace capture and the study's trace phase send the key on every request, and a 401 names --api-key.
// The server is the real simulator (it writes a real trace) behind a loopback proxy that checks the key.
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type SimHandle, startSim } from "../../src/sim/index.ts";
import type { Measurements } from "../../src/study/assemble.ts";
import { phaseAudit, phaseTrace } from "../../src/study/phases.ts";
import { defaultPlan } from "../../src/study/plan.ts";
import { captureTrace } from "../../src/trace/capture.ts";
import { runCli, STACK } from "../helpers/cli.ts";

const KEY = "sk-test-0123456789";
const dir = mkdtempSync(join(tmpdir(), "inferscope-credentials-"));
let sim: SimHandle;
let proxy: Server;
let url = "";
/** Every request the proxy saw: path and whether it carried the key. */
const seen: Array<{ path: string; keyed: boolean }> = [];

before(async () => {
  sim = await startSim({ port: 0, timeScale: 20, profilerDir: dir, seed: 1 });
  const target = new URL(sim.url);
  proxy = createServer((req, res) => {
    const keyed = req.headers.authorization === `Bearer ${KEY}`;
    seen.push({ path: req.url ?? "", keyed });
    if (!keyed) {
      res.writeHead(401, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: "Unauthorized" }));
      req.resume();
      return;
    }
    const up = request(
      { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
      (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      },
    );
    up.on("error", () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", () => r()));
  const a = proxy.address();
  url = `http://127.0.0.1:${typeof a === "object" && a ? a.port : 0}`;
});

after(async () => {
  await new Promise<void>((r) => proxy.close(() => r()));
  await sim.close(0);
});

test("trace capture with apiKey sends it to /v1/models, /start_profile, the workload and /stop_profile", async () => {
  seen.length = 0;
  const r = await captureTrace(url, { dir, steps: 8, apiKey: KEY, timeoutMs: 60_000 });
  assert.ok(r.files.length >= 1);
  assert.deepEqual([...new Set(seen.map((s) => s.path))].sort(), [
    "/start_profile",
    "/stop_profile",
    "/v1/completions",
    "/v1/models",
  ]);
  assert.ok(
    seen.every((s) => s.keyed),
    JSON.stringify(seen),
  );
});

test("the study's trace phase passes its --api-key to /start_profile and /stop_profile", async () => {
  seen.length = 0;
  const plan = defaultPlan(true);
  const m = { plan, timeScale: 20, seed: 1, kind: "url", deployment: {} } as unknown as Measurements;
  const t = await phaseTrace(url, plan, m, { dir, apiKey: KEY });
  assert.ok(t, "a trace was measured");
  const paths = seen.map((s) => s.path);
  assert.ok(paths.includes("/start_profile") && paths.includes("/stop_profile"), paths.join(" "));
  assert.ok(
    seen.every((s) => s.keyed),
    JSON.stringify(seen),
  );
});

test("the study's audit phase sends its --api-key to /metrics (and /v1/models, /version)", async () => {
  seen.length = 0;
  const a = await phaseAudit(url, { apiKey: KEY, until: Promise.resolve() });
  assert.ok(a, "the audit ran");
  assert.ok(
    seen.some((s) => s.path === "/metrics"),
    seen.map((s) => s.path).join(" "),
  );
  assert.ok(
    seen.every((s) => s.keyed),
    JSON.stringify(seen),
  );
});

test("trace capture without a key: exit 3, the 401 names --api-key", async () => {
  const r = await runCli(["trace", "capture", url, "--dir", dir, "--steps", "4", "--timeout", "20s"], {
    env: { OPENAI_API_KEY: "" },
  });
  assert.equal(r.code, 3, r.stderr);
  assert.match(r.stderr, /GET \/v1\/models: HTTP 401/);
  assert.match(r.stderr, /hint: .*--api-key/);
  assert.doesNotMatch(r.stderr, STACK);
});

test("trace capture --api-key on the command line is sent and never printed", async () => {
  const r = await runCli(
    ["trace", "capture", url, "--dir", dir, "--steps", "8", "--timeout", "60s", "--api-key", KEY, "--json"],
    { limitMs: 90_000 },
  );
  assert.equal(r.code, 0, r.stderr);
  assert.ok(JSON.parse(r.stdout).files.length >= 1);
  assert.ok(!r.stdout.includes(KEY) && !r.stderr.includes(KEY));
});

// A study's exit status says what happened: against a server whose /metrics answers but whose streams
// are malformed, or carry only keepalive comments, no request succeeds, so the study exits 3 — the
// answered audit is no measurement of serving — and its report still shows every phase's status and
// reason. `--stall-timeout` reaches the bench: a keepalive-only server costs one stall, not one per request.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import type { StudyResult } from "../../src/report/types.ts";
import { runCli, STACK } from "../helpers/cli.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-outcome-"));
const METRICS =
  "# HELP vllm:num_requests_running Number of requests in model execution batches.\n" +
  '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 0\n';

interface Served {
  server: Server;
  url: string;
  completions: number;
}

/** A server healthy everywhere but its streams: `stream` writes each completion's body. */
async function serve(stream: (res: import("node:http").ServerResponse) => void): Promise<Served> {
  const s: Served = { server: createServer(), url: "", completions: 0 };
  s.server.on("request", (req, res) => {
    const path = (req.url ?? "").split("?")[0];
    if (path === "/health") return void res.writeHead(200).end();
    if (path === "/metrics")
      return void res.writeHead(200, { "content-type": "text/plain; version=0.0.4" }).end(METRICS);
    if (path === "/v1/models")
      return void res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ object: "list", data: [{ id: "m", object: "model" }] }));
    if (path === "/v1/completions" || path === "/v1/chat/completions") {
      s.completions++;
      req.resume();
      return stream(res);
    }
    res.writeHead(404, { "content-type": "application/json" }).end('{"detail":"Not Found"}');
  });
  await new Promise<void>((r) => s.server.listen(0, "127.0.0.1", r));
  s.url = `http://127.0.0.1:${(s.server.address() as { port: number }).port}`;
  return s;
}

let malformed: Served;
let keepalive: Served;
const timers = new Set<NodeJS.Timeout>();
before(async () => {
  malformed = await serve((res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end('data: {"choices": [{"text": "hel\n\ndata: not json at all\n\n');
  });
  keepalive = await serve((res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.flushHeaders();
    // Bounded: at most 600 comments (60 s), stopped when the client goes.
    let n = 0;
    const t = setInterval(() => {
      if (res.destroyed || ++n > 600) {
        clearInterval(t);
        timers.delete(t);
        res.end();
      } else res.write(": keepalive\n\n");
    }, 100);
    timers.add(t);
  });
});
after(async () => {
  for (const t of timers) clearInterval(t);
  for (const s of [malformed, keepalive]) {
    s.server.closeAllConnections();
    await new Promise((r) => s.server.close(r));
  }
});

function phasesOf(out: string) {
  const result = JSON.parse(readFileSync(join(out, "results.json"), "utf8")) as StudyResult;
  return {
    result,
    status: Object.fromEntries(result.meta.phases.map((p) => [p.name, p])),
    md: readFileSync(join(out, "report.md"), "utf8"),
    html: readFileSync(join(out, "index.html"), "utf8"),
  };
}

test("malformed SSE while /metrics answers: exit 3 (no request succeeded), every phase's status and reason in the report", async () => {
  const out = join(dir, "malformed");
  const r = await runCli(["study", "--url", malformed.url, "--quick", "--out", out, "--no-store"], {
    cwd: dir,
    limitMs: 120_000,
  });
  assert.equal(r.code, 3, r.stderr);
  assert.doesNotMatch(r.stderr, STACK);
  assert.match(r.stderr, /the study measured nothing: no request succeeded \(bench: .*malformed/);
  assert.match(r.stderr, /report in /);
  const { status, md, html } = phasesOf(out);
  // The audit read /metrics: that alone does not make the study a success.
  assert.equal(status.audit?.status, "ok");
  assert.equal(status.bench?.status, "failed");
  assert.match(status.bench?.reason ?? "", /no request succeeded .*malformed/);
  assert.equal(status.sweep?.status, "skipped");
  assert.match(status.sweep?.reason ?? "", /no bench request succeeded/);
  for (const p of Object.values(status)) {
    assert.match(md, new RegExp(`\\| ${p.name} \\| ${p.status} \\|`), `report.md: ${p.name}`);
    assert.ok(html.includes(`<td>${p.name}</td>`), `index.html: ${p.name}`);
    if (p.status !== "ok") assert.ok(p.reason, `${p.name} (${p.status}) says why`);
  }
  assert.ok(html.includes("no bench request succeeded"), "index.html shows the sweep's reason");
  assert.ok(md.includes("no bench request succeeded"), "report.md shows the sweep's reason");
});

test("keepalive-only SSE with --stall-timeout 1s: one stall ends the bench, the sweep is skipped, exit 3 naming the flag", async () => {
  const out = join(dir, "keepalive");
  const before = keepalive.completions;
  const r = await runCli(
    ["study", "--url", keepalive.url, "--quick", "--stall-timeout", "1s", "--out", out, "--no-store"],
    { cwd: dir, limitMs: 120_000 },
  );
  assert.equal(r.code, 3, r.stderr);
  assert.doesNotMatch(r.stderr, STACK);
  assert.match(r.stderr, /the study measured nothing: no request succeeded \(bench: .*streamed no tokens/);
  assert.match(r.stderr, /--stall-timeout/);
  // The server's own count: one request waited out the stall limit (the bench's first), none after it.
  assert.equal(keepalive.completions - before, 1, "requests the server received");
  // The default limit is 60 s per stall: a study under it had the flag's 1 s.
  assert.ok(r.ms < 60_000, `took ${Math.round(r.ms)} ms`);
  const { status } = phasesOf(out);
  assert.equal(status.bench?.status, "failed");
  assert.equal(status.sweep?.status, "skipped");
});

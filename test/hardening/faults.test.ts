// Every command that talks to a server, against every fault the harness serves (test/helpers/faults.ts):
// the exit code, a first error line that names the cause, a flag the user can act on, no stack trace,
// a time bound, no raw control characters on the terminal, and nothing left running.
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { type CliRun, runCli, STACK } from "../helpers/cli.ts";
import { closeAll, FAULTS, type FaultName, type FaultServer, startFaultServers } from "../helpers/faults.ts";

interface Expect {
  code: number;
  /** What the first error line must say. */
  cause?: RegExp;
  /** The flag (or target) the user acts on, anywhere in stderr; null where no flag could help. */
  flag?: RegExp | null;
  /** For exit 0: what stdout must show (the server's text, escaped). */
  stdout?: RegExp;
  /** Flags the user did not type (another command's), which stderr must not name. */
  notFlag?: RegExp;
  /** Not run here, and why. */
  skip?: string;
}

type Table = Record<FaultName, Expect>;
const dir = mkdtempSync(join(tmpdir(), "inferscope-faults-"));
let servers: Map<FaultName, FaultServer>;
const url = (f: FaultName) => servers.get(f)!.url;
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");

/** What the three metrics commands share: the scrape is the same code path. */
function metricsTable(): Table {
  const at = (f: FaultName) => new RegExp(esc(url(f)));
  return {
    refused: { code: 3, cause: /connection refused/, flag: at("refused") },
    silent: { code: 3, cause: /no complete response within 2 s \(--timeout\); no body received/, flag: /--timeout/ },
    trickle: { code: 3, cause: /no complete response within 2 s \(--timeout\); \d+ bytes of body/, flag: /--timeout/ },
    http500: { code: 3, cause: /HTTP 500: engine crashed: CUDA error: out of memory/, flag: at("http500") },
    http401: { code: 3, cause: /HTTP 401: invalid API key/, flag: /--header/ },
    redirect: { code: 3, cause: /HTTP 301 redirect to http:\/\/127\.0\.0\.1:1\/elsewhere/, flag: at("redirect") },
    html: { code: 2, cause: /returned HTML, not metrics/, flag: at("html") },
    empty: { code: 2, cause: /empty body/, flag: at("empty") },
    "sse-malformed": { code: 3, cause: /HTTP 404: Not Found/, flag: /metrics path/ },
    "sse-keepalive": { code: 3, cause: /HTTP 404: Not Found/, flag: /metrics path/ },
    "sse-cut": { code: 3, cause: /HTTP 404: Not Found/, flag: /metrics path/ },
    escapes: { code: 0, stdout: /\\x1b\[2J/ },
    "bad-utf8": { code: 2, cause: /:2:12: invalid UTF-8 \(byte 0xc3\)/, flag: at("bad-utf8") },
  };
}

/** bench, ab and sweep share the bench engine; `target` is how each names the server. */
function loadTable(target: RegExp, connectFlag: RegExp): Table {
  return {
    refused: { code: 3, cause: /connection refused/, flag: target },
    silent: { code: 3, cause: /no complete answer within \d+ ms/, flag: connectFlag },
    trickle: { code: 3, cause: /no complete answer within \d+ ms/, flag: connectFlag },
    http500: { code: 3, cause: /HTTP 500: engine crashed: CUDA error: out of memory/, flag: /--model/ },
    http401: { code: 3, cause: /HTTP 401: invalid API key/, flag: /--api-key/ },
    redirect: { code: 3, cause: /HTTP 301: Moved Permanently/, flag: /--model/ },
    html: { code: 3, cause: /GET \/v1\/models answered an HTML page/, flag: /--model/ },
    empty: { code: 3, cause: /GET \/v1\/models answered an empty body/, flag: /--model/ },
    "sse-malformed": { code: 3, cause: /every request .*failed \(malformed: malformed SSE data/, flag: target },
    "sse-keepalive": {
      code: 3,
      cause: /failed \(stall: no stream data for 2000 ms \(--stall-timeout; keepalive comments do not count\)/,
      flag: /--stall-timeout/,
    },
    "sse-cut": { code: 3, cause: /every request .*failed \(disconnect: connection closed mid-stream/, flag: target },
    escapes: { code: 3, cause: /HTTP 400 Bad Request: bad request \\x1b\[2J\\x1b\[31mPWNED/, flag: /--model/ },
    "bad-utf8": { code: 3, cause: /every request .*failed/, flag: target },
  };
}

function captureTable(): Table {
  const at = (f: FaultName) => new RegExp(esc(url(f)));
  const noProfiler = {
    code: 3,
    cause: /POST \/start_profile: 404: the server's profiler is not enabled/,
    flag: /--profiler/,
  };
  return {
    refused: { code: 3, cause: /connection refused/, flag: at("refused") },
    silent: { code: 3, cause: /no complete answer within 3 s \(--timeout\)/, flag: /--timeout/ },
    trickle: { code: 3, cause: /no complete answer within 3 s \(--timeout\)/, flag: /--timeout/ },
    http500: { code: 3, cause: /GET \/v1\/models: HTTP 500: engine crashed: CUDA error: out of memory/, flag: null },
    http401: { code: 3, cause: /GET \/v1\/models: HTTP 401: invalid API key/, flag: /--api-key/ },
    redirect: { code: 3, cause: /GET \/v1\/models: HTTP 301/, flag: null },
    html: { code: 3, cause: /GET \/v1\/models: expected JSON, got an HTML page/, flag: at("html") },
    empty: { code: 3, cause: /GET \/v1\/models: expected JSON, got an empty body/, flag: at("empty") },
    "sse-malformed": noProfiler,
    "sse-keepalive": noProfiler,
    "sse-cut": noProfiler,
    escapes: { code: 3, cause: /POST \/start_profile: HTTP 400: bad request \\x1b\[2J/, flag: null },
    "bad-utf8": { code: 3, cause: /POST \/v1\/completions: expected JSON/, flag: at("bad-utf8") },
  };
}

function notFlag(t: Table, re: RegExp): Table {
  return Object.fromEntries(Object.entries(t).map(([k, e]) => [k, { ...e, notFlag: re }])) as Table;
}

/** A study runs every phase against the fault; each phase's failure is in the one error line. */
function studyTable(): Table {
  const nothing = (what: RegExp) => new RegExp(`^inferscope: error: the study measured nothing: .*${what.source}`);
  return {
    refused: { code: 3, cause: nothing(/connection refused/), flag: /--url/ },
    silent: { code: 3, cause: nothing(/no complete answer within 5000 ms/), flag: /--url/ },
    trickle: { code: 3, cause: nothing(/no complete response within 10 s; \d+ bytes of body received/), flag: /--url/ },
    http500: { code: 3, cause: nothing(/HTTP 500: engine crashed: CUDA error: out of memory/), flag: /--url/ },
    http401: { code: 3, cause: nothing(/HTTP 401: invalid API key/), flag: /--api-key/ },
    redirect: { code: 3, cause: nothing(/HTTP 301 redirect to http:\/\/127\.0\.0\.1:1\/elsewhere/), flag: /--url/ },
    html: { code: 3, cause: nothing(/answered an HTML page/), flag: /--url/ },
    empty: { code: 3, cause: nothing(/answered an empty body/), flag: /--url/ },
    "sse-malformed": { code: 3, cause: nothing(/the first: malformed: malformed SSE data/), flag: /--url/ },
    // One stall (the table passes --stall-timeout 2s) ends the bench; the sweep is not run after it.
    "sse-keepalive": { code: 3, cause: nothing(/the server streamed no tokens: .*--stall-timeout/), flag: /--url/ },
    "sse-cut": { code: 3, cause: nothing(/the first: disconnect: connection closed mid-stream/), flag: /--url/ },
    // The audit read the escapes server's /metrics, but no request succeeded: exit 3, the server's words escaped.
    escapes: { code: 3, cause: nothing(/bad request \\x1b\[2J/), flag: /--url/ },
    "bad-utf8": { code: 3, cause: nothing(/invalid UTF-8 \(byte 0xc3\)/), flag: /--url/ },
  };
}

let n = 0;
const db = (what: string) => join(dir, `${what}-${n++}.db`);
const COMMANDS: Array<{ name: string; args: (u: string) => string[]; table: () => Table; boundMs?: number }> = [
  {
    name: "bench",
    args: (u) => [
      "bench",
      ...["--base-url", u, "--num-prompts", "2", "--random-input-len", "4", "--random-output-len", "4"],
      ...["--connect-timeout", "2s", "--stall-timeout", "2s"],
    ],
    table: () => loadTable(/--base-url/, /--connect-timeout/),
  },
  { name: "metrics scrape", args: (u) => ["metrics", "scrape", u, "--timeout", "2s"], table: metricsTable },
  {
    name: "metrics audit",
    args: (u) => ["metrics", "audit", u, "--timeout", "2s", "--window", "300ms"],
    table: metricsTable,
  },
  {
    name: "metrics watch",
    args: (u) => ["metrics", "watch", u, "--timeout", "2s", "--interval", "200ms", "--iterations", "2"],
    // A watch line shows rates, never the server's text: nothing to see escaped, only nothing raw.
    table: () => ({ ...metricsTable(), escapes: { code: 0 } }),
  },
  {
    name: "ab",
    args: (u) => [
      "ab",
      ...["--variant", `a=${u}`, "--variant", `b=${u}`, "--repeats", "1", "--num-prompts", "2"],
      ...["--random-output-len", "4", "--warmup", "0", "--stall-timeout", "2s", "--db", db("ab")],
    ],
    table: () => notFlag(loadTable(/variant "a"/, /variant "a"/), /--base-url|--connect-timeout/),
  },
  {
    name: "sweep lengths",
    args: (u) => [
      "sweep",
      "lengths",
      ...["--url", u, "--out", "4,8", "--requests", "1", "--warmup", "0", "--stall-timeout", "2s"],
      ...["--db", db("sweep")],
    ],
    // The bench engine's own flags are not the sweep's: the user typed --url and --levels.
    table: () => notFlag(loadTable(/--url/, /--url/), /--base-url|--rates\b|--request-rate|--connect-timeout/),
  },
  {
    name: "trace capture",
    args: (u) => ["trace", "capture", u, "--dir", dir, "--steps", "4", "--timeout", "3s"],
    table: captureTable,
  },
  {
    name: "study",
    args: (u) => [
      "study",
      "--url",
      u,
      "--quick",
      "--stall-timeout",
      "2s",
      "--out",
      join(dir, `study-${n}`),
      "--db",
      db("study"),
    ],
    // The study has no --timeout, --connect-timeout or --base-url, and its --model is no served name.
    table: () => notFlag(studyTable(), /--base-url|--connect-timeout|--timeout|pass --model/),
    // Discovery, then the audit's 10 s scrape limit beside the bench's 5 s connect limit, then the sweep's.
    boundMs: 45_000,
  },
];

// Raw control characters other than newline (and the tab tables never use): a server drove the terminal.
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;
const BOUND_MS = 25_000;

before(async () => {
  servers = await startFaultServers();
});
after(async () => {
  await closeAll(servers);
});

function check(r: CliRun, e: Expect, what: string, boundMs = BOUND_MS): void {
  const detail = `${what}\n--- stderr\n${r.stderr}\n--- stdout\n${r.stdout.slice(0, 800)}`;
  assert.equal(r.killed, false, `ran past the hard limit: ${detail}`);
  assert.ok(r.ms < boundMs, `took ${Math.round(r.ms)} ms: ${detail}`);
  assert.equal(r.code, e.code, detail);
  assert.doesNotMatch(r.stderr, STACK, detail);
  assert.doesNotMatch(r.stderr, /internal error/, detail);
  assert.deepEqual(r.leftovers, [], `processes left running: ${detail}`);
  assert.doesNotMatch(r.stdout, RAW_CONTROL, `raw control characters on stdout: ${detail}`);
  assert.doesNotMatch(r.stderr, RAW_CONTROL, `raw control characters on stderr: ${detail}`);
  if (e.notFlag) assert.doesNotMatch(r.stderr, e.notFlag, `names a flag the user did not type: ${detail}`);
  if (e.code === 0) {
    if (e.stdout) assert.match(r.stdout, e.stdout, detail);
    return;
  }
  const lines = r.stderr.split("\n").filter((l) => l.startsWith("inferscope: error: "));
  assert.equal(lines.length, 1, `one error line: ${detail}`);
  if (e.cause) assert.match(lines[0]!, e.cause, detail);
  if (e.flag) assert.match(r.stderr, e.flag, detail);
}

for (const cmd of COMMANDS)
  describe(`${cmd.name} against hostile servers`, { concurrency: 3, timeout: 180_000 }, () => {
    for (const fault of FAULTS)
      test(fault, async (t) => {
        const expect = cmd.table()[fault];
        if (expect.skip) return t.skip(expect.skip);
        const r = await runCli(cmd.args(url(fault)), { limitMs: (cmd.boundMs ?? BOUND_MS) + 15_000 });
        check(r, expect, `${cmd.name} × ${fault}`, cmd.boundMs);
      });
  });

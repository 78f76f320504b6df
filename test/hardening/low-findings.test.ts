// Issue 34's low findings, each run the way the adversarial pass ran it: the real CLI, real files, real
// loopback servers. Each case failed before its fix (the message it printed is quoted in its name).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { sweepTable } from "../../src/cli/commands/bench.ts";
import { checkRunStore } from "../../src/input-file.ts";
import { diffSnapshots } from "../../src/metrics/diff.ts";
import { byteSize } from "../../src/metrics/scrape.ts";
import { inputFromOptions } from "../../src/model/options.ts";
import { whatif } from "../../src/model/whatif.ts";
import { openStore } from "../../src/store/index.ts";
import { assertRefused, runCli } from "../helpers/cli.ts";
import { type FaultServer, startFaultServer } from "../helpers/faults.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-low-"));
const file = join(dir, "a-file.txt");
writeFileSync(file, "not a directory\n");
const dead = "http://127.0.0.1:1";
const MODEL = ["--model", "glm-5", "--gpu", "rtx-pro-6000", "--quant", "nvfp4"];
// Another program's SQLite database (Python's sqlite3 writes the file; no driver of ours touches it).
const foreign = join(dir, "photos.db");
execFileSync("python3", [
  "-c",
  `import sqlite3; c=sqlite3.connect(${JSON.stringify(foreign)}); c.execute("create table photos(x)"); c.commit()`,
]);
const foreignBytes = readFileSync(foreign);

// [what, argv, first error line must match]: exit 2 before any work.
const CASES: Array<[string, string[], RegExp]> = [
  [
    "study --url ftp:// (ran every phase, exit 3)",
    ["study", "--url", "ftp://127.0.0.1:1", "--out", join(dir, "r1")],
    /--url is not an http\(s\) URL: ftp:/,
  ],
  [
    "tune --budget -5 ('not a duration')",
    ["tune", "--knob", "NCCL_PROTO=,LL", "--budget", "-5"],
    /--budget "-5" is neither a number of server starts .* nor a duration/,
  ],
  [
    "tune --slo with the tpot objective (ignored)",
    ["tune", "--knob", "NCCL_PROTO=,LL", "--slo", "tpot:50"],
    /--slo applies to --objective throughput-at-slo only/,
  ],
  [
    "tune --out FILE",
    ["tune", "--knob", "NCCL_PROTO=,LL", "--out", file],
    /--out .*a-file\.txt: is a file, not a directory/,
  ],
  [
    "tune --log-dir FILE",
    ["tune", "--knob", "NCCL_PROTO=,LL", "--log-dir", file],
    /--log-dir .*: is a file, not a directory/,
  ],
  [
    "tune --db DIR (not named)",
    ["tune", "--knob", "NCCL_PROTO=,LL", "--db", dir],
    /--db .*: is a directory; give the run store file/,
  ],
  [
    "ab --log-dir FILE",
    ["ab", "--variant", `a=${dead}`, "--variant", `b=${dead}`, "--log-dir", file],
    /--log-dir .*: is a file/,
  ],
  ["study --out FILE", ["study", "--url", dead, "--out", file], /--out .*: is a file, not a directory/],
  [
    "bench --stall-timeout 0 (accepted)",
    ["bench", "--base-url", dead, "--stall-timeout", "0"],
    /--stall-timeout must be longer than 0/,
  ],
  [
    "sweep --stall-timeout 0",
    ["sweep", "rate", "--url", dead, "--levels", "1", "--stall-timeout", "0"],
    /--stall-timeout must be longer than 0/,
  ],
  [
    "model predict --input-len 0 (accepted)",
    ["model", "predict", ...MODEL, "--input-len", "0"],
    /--input-len expects a whole number ≥ 1 \(got "0"\)/,
  ],
  [
    "model --cpu-bandwidth 0GB/s (named --gpu-bandwidth)",
    ["model", "predict", "--model", "glm-5", "--cpu-bandwidth", "0GB/s", "--cpu-cores", "8"],
    /--cpu-bandwidth must be more than 0, got "0GB\/s"/,
  ],
  [
    "metrics scrape --max-bytes 0 ('0.00 MiB limit')",
    ["metrics", "scrape", `${dead}/metrics`, "--max-bytes", "0"],
    /--max-bytes must be at least 1 byte/,
  ],
  [
    "metrics scrape of a malformed URL (exit 3)",
    ["metrics", "scrape", "http://127.0.0.1:99999/metrics"],
    /not a valid URL/,
  ],
  [
    "runs list --limit 0 ('no runs saved yet')",
    ["runs", "list", "--limit", "0"],
    /--limit expects an integer in \[1, 1000000\], got "0"/,
  ],
  [
    "sim --set into src/",
    ["sim", "--port", "0", "--set", "decode.x=1"],
    /^inferscope: error: --set decode\.x: .*Unrecognized key: "decode"/,
  ],
  [
    "sim --host nosuch.invalid ('not a loopback address')",
    ["sim", "--port", "0", "--host", "nosuch.invalid"],
    /--host nosuch\.invalid: could not be resolved/,
  ],
  [
    "bench --db a foreign SQLite file (tables added)",
    ["bench", "--base-url", dead, "--db", foreign],
    /--db .*photos\.db: an SQLite database that is not an inferscope run store/,
  ],
  [
    "ab --db a foreign SQLite file",
    ["ab", "--variant", `a=${dead}`, "--variant", `b=${dead}`, "--db", foreign],
    /not an inferscope run store/,
  ],
  [
    "tune --db a foreign SQLite file",
    ["tune", "--knob", "NCCL_PROTO=,LL", "--db", foreign],
    /not an inferscope run store/,
  ],
];

describe("refused up front, naming the flag", { concurrency: 3 }, () => {
  for (const [what, args, msg] of CASES)
    test(what, async () => {
      const r = await runCli(args, { limitMs: 30_000, cwd: dir, env: { HOME: dir } });
      const detail = `${what}\n--- stderr\n${r.stderr}\n--- stdout\n${r.stdout.slice(0, 400)}`;
      assertRefused(r, msg, detail);
      assert.doesNotMatch(r.stderr, /internal error|\/src\/|saved in run|listening on/, detail);
      assert.deepEqual(r.leftovers, [], detail);
    });
});

test("the foreign database is left as it was, and a real store or an empty SQLite file is still accepted", () => {
  assert.deepEqual(readFileSync(foreign), foreignBytes);
  const real = join(dir, "runs.db");
  const s = openStore(real);
  s.close();
  checkRunStore("--db", real);
  const empty = join(dir, "empty.db");
  execFileSync("python3", [
    "-c",
    `import sqlite3; c=sqlite3.connect(${JSON.stringify(empty)}); c.execute("pragma user_version=0"); c.commit()`,
  ]);
  checkRunStore("--db", empty);
});

test("whatif batch=0 says what a batch must be (was 'expected a whole number'), before the model runs", () => {
  const input = inputFromOptions({ model: "glm-5", gpu: "rtx-pro-6000", quant: "nvfp4", gpus: "8", tp: "8" });
  assert.throws(() => whatif(input, ["batch=0"]), /what-if "batch=0": expected a whole number ≥ 1/);
  assert.throws(() => whatif(input, ["batch=1e99"]), /expected a whole number ≥ 1/);
});

test("runs list --kind tune is a kind (was refused as unknown)", async () => {
  const db = join(dir, "kinds.db");
  openStore(db).close();
  const r = await runCli(["runs", "list", "--kind", "tune", "--db", db, "--json"], { limitMs: 30_000 });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), []);
});

test("trace F.json F.json is refused: one file is not two ranks", async () => {
  const t = join(dir, "rank.pt.trace.json");
  writeFileSync(t, '{"traceEvents": []}');
  mkdirSync(join(dir, "ln"), { recursive: true });
  const r = await runCli(["trace", t, t], { limitMs: 30_000 });
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /rank\.pt\.trace\.json: given twice; each rank's trace is read once/);
  // The same file under another name (a relative path) too.
  const r2 = await runCli(["trace", t, "rank.pt.trace.json"], { limitMs: 30_000, cwd: dir });
  assert.equal(r2.code, 2, r2.stderr);
  assert.match(r2.stderr, /the same file as/);
});

test("a cut plain .json trace is called what it is, not .json.gz", async () => {
  // Kineto writes CPU events first: a file cut among them holds no GPU activity.
  const events = Array.from(
    { length: 200 },
    (_, i) => `{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ${i * 10}, "dur": 5}`,
  );
  const whole = `{"traceEvents": [${events.join(",\n")}]}`;
  const cut = join(dir, "cut.pt.trace.json");
  writeFileSync(cut, whole.slice(0, Math.floor(whole.length / 2)));
  const r = await runCli(["trace", cut], { limitMs: 60_000 });
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /truncated/);
  assert.doesNotMatch(r.stderr, /\.json\.gz/);
  assert.match(r.stderr, /this one ends early/);
});

test("metrics diff of two files written together: the window is unknown and says why (was 'window 0.0 s')", async () => {
  const text = "# TYPE x_total counter\nx_total 1\n";
  const a = join(dir, "a.prom");
  const b = join(dir, "b.prom");
  writeFileSync(a, text);
  writeFileSync(b, text.replace(" 1", " 5"));
  const { utimesSync } = await import("node:fs");
  utimesSync(a, 1_700_000_000, 1_700_000_000);
  utimesSync(b, 1_700_000_000, 1_700_000_000);
  const r = await runCli(["metrics", "diff", a, b], { limitMs: 30_000 });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^window unknown: both expositions carry the same time/m);
  assert.doesNotMatch(r.stdout, /window 0\.0 s/);
  // The library: NaN and a reason, rates NaN; a positive span is still a window.
  const snap = (atMs: number, v: number) => ({
    atMs,
    source: "x",
    exposition: {
      families: [
        {
          name: "x",
          type: "counter" as const,
          help: null,
          unit: null,
          samples: [{ name: "x_total", labels: {}, value: v }],
        },
      ],
    },
  });
  const d = diffSnapshots(snap(5000, 1) as any, snap(5000, 5) as any);
  assert.ok(Number.isNaN(d.windowSeconds));
  assert.match(d.windowUnknown ?? "", /same time/);
  const d2 = diffSnapshots(snap(5000, 1) as any, snap(15_000, 5) as any);
  assert.equal(d2.windowSeconds, 10);
  assert.equal(d2.windowUnknown, null);
});

test("a bench sweep level where every request failed shows n/a latencies, not 0.00", () => {
  const none = { mean: 0, median: 0, std: 0, min: 0, max: 0, count: 0, percentiles: { p99: 0 } };
  const some = { ...none, mean: 12.5, median: 12, count: 4, percentiles: { p99: 20 } };
  const point = (kind: string, value: number, stats: typeof none, completed: number) => ({
    kind,
    value,
    result: {
      summary: {
        completed,
        failed: 4 - completed,
        request_throughput: 0,
        output_throughput: 0,
        inferscope: { ttft_ms: stats, tpot_ms: stats, itl_ms: stats },
      },
      client: { saturated: false },
    },
  });
  const text = sweepTable({ points: [point("concurrency", 1, some, 4), point("concurrency", 2, none, 0)] } as any);
  const rows = text.split("\n").filter((l) => /concurrency [12]/.test(l));
  assert.equal(rows.length, 2, text);
  assert.match(rows[0]!, /12\.50/);
  assert.doesNotMatch(rows[1]!, /0\.00 *│ *0\.00/, text);
  assert.equal((rows[1]!.match(/n\/a/g) ?? []).length, 4, text);
});

describe("against loopback fault servers", () => {
  let s401: FaultServer;
  let s500: FaultServer;
  before(async () => {
    s401 = await startFaultServer("http401");
    s500 = await startFaultServer("http500");
  });
  after(async () => {
    await s401?.close();
    await s500?.close();
  });

  test("a 401 with a key given says the key was rejected; without one, that a key is wanted", async () => {
    const withKey = await runCli(["bench", "--base-url", s401.url, "--num-prompts", "1", "--api-key", "sk-wrong"], {
      limitMs: 30_000,
      env: { OPENAI_API_KEY: "" },
    });
    assert.equal(withKey.code, 3, withKey.stderr);
    assert.match(withKey.stderr, /the server rejected the key given/);
    assert.doesNotMatch(withKey.stderr, /wants a key/);
    const without = await runCli(["bench", "--base-url", s401.url, "--num-prompts", "1"], {
      limitMs: 30_000,
      env: { OPENAI_API_KEY: "" },
    });
    assert.equal(without.code, 3, without.stderr);
    assert.match(without.stderr, /the server wants a key/);
    // Issue 42: naming the model does not get past a refused key (was: "…; pass --model").
    for (const r of [withKey, without]) {
      assert.match(r.stderr, /GET \/v1\/models answered HTTP 401: invalid API key\n/);
      assert.doesNotMatch(r.stderr, /pass --model/);
    }
  });

  test("bench where every request failed prints n/a for latencies, not 0.00 ms; its hint names --base-url", async () => {
    const r = await runCli(["bench", "--base-url", s500.url, "--model", "m", "--num-prompts", "2"], {
      limitMs: 30_000,
    });
    assert.equal(r.code, 3, r.stderr);
    assert.match(r.stdout, /^Mean TTFT \(ms\):\s+n\/a$/m);
    assert.match(r.stdout, /^Median TPOT \(ms\):\s+n\/a$/m);
    assert.doesNotMatch(r.stdout, /\(ms\):\s+0\.00$/m);
    assert.doesNotMatch(r.stderr, /--url\b/);
    // Issue 42: the warning gives the first error itself; the errors are printed above it, not "below".
    const errors = r.stdout.indexOf("Errors (first 10):");
    const warning = r.stdout.indexOf("warning: all 2 requests failed; the first: http: HTTP 500");
    assert.ok(errors >= 0 && warning > errors, r.stdout);
    assert.match(
      r.stdout,
      /^warning: all 2 requests failed; the first: http: HTTP 500 .*engine crashed: CUDA error: out of memory$/m,
    );
    assert.doesNotMatch(r.stdout, /below/);
  });
});

describe("issue 42: the round-two Lows that were only partly fixed", () => {
  let esc: FaultServer;
  before(async () => {
    esc = await startFaultServer("escapes");
  });
  after(() => esc?.close());

  test("--max-bytes 100 names its limit in bytes (was: 'larger than the 0.00 MiB limit')", async () => {
    assert.deepEqual([1, 100, 1023, 1024, 32_400, 1_048_576, 64 * 1_048_576].map(byteSize), [
      "1 byte",
      "100 bytes",
      "1023 bytes",
      "1 KiB",
      "31.6 KiB",
      "1 MiB",
      "64 MiB",
    ]);
    const r = await runCli(["metrics", "scrape", `${esc.url}/metrics`, "--max-bytes", "100"], { limitMs: 30_000 });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /the body is larger than the 100 bytes limit \(stopped reading at \d+ bytes\)/);
    assert.doesNotMatch(r.stderr, /0\.00 MiB/);
  });

  test("tune --budget 1ms chooses nothing, says it is inconclusive and exits 2 (was: exit 0, 'complete')", async () => {
    const db = join(dir, "tune-budget.db");
    const r = await runCli(
      [
        "tune",
        "--knob",
        "NCCL_PROTO=,LL",
        "--budget",
        "1ms",
        "--time-scale",
        "20",
        "--num-prompts",
        "2",
        "--random-output-len",
        "8",
        "--db",
        db,
      ],
      { limitMs: 120_000, cwd: dir, env: { HOME: dir } },
    );
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stdout, /^tune run tune-\S+ \(inconclusive\)/m);
    assert.doesNotMatch(r.stdout, /\(complete\)|^Best:/m);
    assert.match(r.stderr, /^inferscope: error: tune run tune-\S+ chose nothing: the budget .* so none is chosen/m);
    assert.match(r.stderr, /hint: allow more server starts or time \(--budget/);
    assert.deepEqual(r.leftovers, []);
  });
});

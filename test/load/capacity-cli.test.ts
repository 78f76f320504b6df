// `bench --slice` and `bench --find-capacity` end to end (real CLI process, real sim on 127.0.0.1), and the
// SLO / goodput flag grammar: --slo takes `:` or `=`, --goodput a vLLM SLO list or one bare share.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { parseGoodputFlag, parseSlo } from "../../src/cli/commands/bench.ts";
import { type SimProcess, spawnSimProcess } from "../../src/load/selftest.ts";

/** The CLI as a child process, without blocking the event loop the sim's stdout pipe needs. */
function cli(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, ["bin/inferscope.mjs", "bench", "--telemetry", "none", ...args]);
    let stdout = "";
    let stderr = "";
    c.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
    });
    c.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    c.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

test("--slo takes NAME:MS or NAME=MS, split by commas or spaces; --goodput a list or a share", () => {
  assert.deepEqual(parseSlo("ttft:200,tpot:50"), { ttft: 200, tpot: 50 });
  assert.deepEqual(parseSlo("ttft=200, e2el=900"), { ttft: 200, e2el: 900 });
  assert.deepEqual(parseSlo("ttft:200 tpot=5"), { ttft: 200, tpot: 5 });
  assert.throws(() => parseSlo("ttft"), /NAME:MS or NAME=MS/);
  assert.throws(() => parseSlo("ttft:"), /NAME:MS or NAME=MS/);
  assert.throws(() => parseSlo("foo:1"), /one of ttft, tpot, e2el, itl/);
  assert.throws(() => parseSlo(" "), /empty/);
  assert.deepEqual(parseGoodputFlag(["0.99"]), { target: 0.99 });
  assert.deepEqual(parseGoodputFlag(["99%"]), { target: 0.99 });
  assert.deepEqual(parseGoodputFlag(["1"]), { target: 1 });
  assert.deepEqual(parseGoodputFlag(["ttft:200", "tpot:50"]), { slo: { ttft: 200, tpot: 50 } });
  assert.throws(() => parseGoodputFlag(["0"]), /target share must be in \(0, 1\]/);
  assert.throws(() => parseGoodputFlag(["150%"]), /target share/);
  assert.throws(() => parseGoodputFlag(["ttft=5"]), /bad SLO/);
});

test("flag combinations are refused before anything is sent (exit 2)", async () => {
  // Port 9 on loopback: nothing listens, and nothing is sent before the refusal.
  const url = "http://127.0.0.1:9";
  for (const [args, re] of [
    [["--goodput", "0.99"], /is a target share: give the SLOs with --slo/],
    [["--goodput", "0.9", "--slo", "ttft:1"], /applies to --find-capacity/],
    [["--goodput", "ttft:1", "--slo", "ttft:1"], /give the SLOs once/],
    [["--find-capacity"], /--find-capacity needs the SLOs/],
    [["--find-capacity", "--slo", "ttft:1", "--concurrency", "2"], /searches the request rate itself/],
    [["--capacity-start", "3"], /--capacity-start applies to --find-capacity/],
    [["--slice", "0s"], /--slice/],
  ] as Array<[string[], RegExp]>) {
    const r = await cli(["--base-url", url, ...args]);
    assert.equal(r.status, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, re);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
  }
});

describe("against the sim", { timeout: 120_000 }, () => {
  let sim: SimProcess;
  before(async () => {
    sim = await spawnSimProcess(["--time-scale", "10", "--max-num-seqs", "4"]);
  });
  after(() => sim?.stop());
  const common = ["--random-input-len", "32", "--random-output-len", "16", "--ignore-eos", "--no-server-metrics"];

  test("--slice prints a table after the run and puts slices[] in --json", async () => {
    // The same run twice: the table (with an SLO, so good % shows), then --json.
    const run = ["--base-url", sim.url, ...common, "--request-rate", "20", "--num-prompts", "30", "--slice", "500ms"];
    const text = await cli([...run, "--slo", "ttft=5000"]);
    assert.equal(text.status, 0, text.stderr);
    assert.match(text.stdout, /Time slices of 500 ms/);
    assert.match(text.stdout, /good %/);
    const js = await cli([...run, "--json"]);
    assert.equal(js.status, 0, js.stderr);
    const d = JSON.parse(js.stdout);
    assert.equal(d.slice_width_ms, 500);
    assert.ok(d.slices.length >= 3);
    assert.equal(
      d.slices.reduce((a: number, s: { arrivals: number }) => a + s.arrivals, 0),
      30,
    );
    assert.equal(
      d.slices.reduce((a: number, s: { completed: number }) => a + s.completed, 0),
      d.completed,
    );
    assert.equal(d.slices[0].good, null);
  });

  test("--slice with the server's gauges: each slice that saturated names its binding limit (4 at a time, pushed hard)", async () => {
    const r = await cli([
      "--base-url",
      sim.url,
      ...common.filter((a) => a !== "--no-server-metrics"),
      "--request-rate",
      "400",
      "--num-prompts",
      "300",
      "--slice",
      "250ms",
      "--json",
    ]);
    assert.equal(r.status, 0, r.stderr);
    const d = JSON.parse(r.stdout);
    assert.equal(d.slice_diagnosis.length, d.slices.length);
    const named = d.slice_diagnosis.filter((x: { binding: Array<{ limit: string }> }) =>
      x.binding.some((b) => b.limit === "max-num-seqs"),
    );
    assert.ok(named.length > 0, JSON.stringify(d.slice_diagnosis.map((x: { binding: unknown[] }) => x.binding)));
    assert.deepEqual(d.slice_knee.limits, ["max-num-seqs"]);
    // Without the gauges (--no-server-metrics) the slices are printed and nothing is diagnosed.
    const off = await cli([
      "--base-url",
      sim.url,
      ...common,
      "--request-rate",
      "400",
      "--num-prompts",
      "40",
      "--slice",
      "250ms",
      "--json",
    ]);
    assert.equal(JSON.parse(off.stdout).slice_diagnosis, undefined);
  });

  test("--find-capacity --json holds the search's runs and its result", async () => {
    const r = await cli([
      "--base-url",
      sim.url,
      // The server's gauges are read here: each run names its binding limit.
      ...common.filter((a) => a !== "--no-server-metrics"),
      "--find-capacity",
      "--slo",
      "ttft:100",
      "--goodput",
      "0.9",
      "--capacity-start",
      "20",
      "--capacity-max-runs",
      "5",
      "--capacity-replicates",
      "2",
      // The fewest a run may hold to judge a 0.9 share (minRunRequests: 35).
      "--num-prompts",
      "40",
      "--warmup",
      "1",
      "--json",
    ]);
    assert.equal(r.status, 0, r.stderr);
    const c = JSON.parse(r.stdout).capacity;
    assert.equal(c.knob, "request_rate");
    assert.equal(c.target, 0.9);
    assert.deepEqual(c.slo, { ttft: 100 });
    assert.equal(c.runs.length, 5);
    assert.equal(c.stopped, "max-runs");
    assert.equal(c.runs[0].load, 20);
    assert.equal(c.minRunRequests, 35);
    for (const run of c.runs) assert.ok(run.total === 40 && run.detail.completed <= 40);
    assert.match(c.method, /bootstrap/);
    // Each run says which limit bound it, from the sim's gauges through it: a server running 4 at a time, pushed past
    // its SLO, is held by its batch ceiling; the knee is the lowest such load.
    for (const run of c.runs) assert.ok(Array.isArray(run.detail.limits), JSON.stringify(run.detail));
    const failing = c.runs.filter((x: { share: number }) => x.share < 0.9);
    assert.ok(failing.length > 0, "no run failed the SLO: the search never crossed the knee");
    assert.ok(
      failing.some((x: { detail: { limits: string[] } }) => x.detail.limits.includes("max-num-seqs")),
      JSON.stringify(
        c.runs.map((x: { load: number; share: number; detail: { limits: string[] } }) => [
          x.load,
          x.share,
          x.detail.limits,
        ]),
      ),
    );
    assert.ok(c.knee?.limits.includes("max-num-seqs"), JSON.stringify(c.knee));
    // Every run is a frontier point (output tok/s against 1000 ÷ TPOT p50), labelled with its limit.
    assert.equal(c.frontier.length, c.runs.length);
    assert.ok(c.frontier.some((p: { pareto: boolean }) => p.pareto));
    assert.ok(c.frontier.some((p: { limit: string | null }) => p.limit === "max-num-seqs"));
  });
});

// Bounds on threads, streams and memory-sizing flags (issue 34 item 3): `--workers 999` once spawned
// 634 threads and 2.4 GB, `--workers 64` took 33 s for 2 requests, `--num-prompts 1e99` was an internal
// error. Each is now a usage error before anything is sent, or a run that starts only the threads it uses.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { UsageError } from "../../src/errors.ts";
import { checkStreams, checkWorkers, MAX_REQUESTS, MAX_STREAMS_PER_WORKER } from "../../src/load/limits.ts";
import { resolveOptions, runBench, workerCount } from "../../src/load/runner.ts";
import { type SimProcess, spawnSimProcess } from "../../src/load/selftest.ts";
import type { BenchOptions } from "../../src/load/types.ts";
import { createWorkload } from "../../src/load/workload.ts";
import { runCli, STACK } from "../helpers/cli.ts";

const usage = (re: RegExp) => (e: unknown) => e instanceof UsageError && re.test((e as Error).message);
const R = (o: Omit<BenchOptions, "baseUrl">) => resolveOptions({ baseUrl: "http://10.0.0.5:8000", ...o });

test("--workers is capped at the cores, with the count in the message", () => {
  assert.equal(checkWorkers(16, 16), 16);
  assert.throws(() => checkWorkers(17, 16), usage(/--workers 17: this host has 16 core\(s\), so at most 16/));
  assert.throws(() => checkWorkers(999, 2), usage(/--workers 999: this host has 2 core/));
  assert.throws(() => checkWorkers(0, 2), usage(/--workers must be an integer ≥ 1/));
});

test("never more worker threads than streams or requests to give them", () => {
  // The 33 s case: 64 threads booted for 2 requests.
  assert.equal(workerCount(R({ numPrompts: 2 }), 64, 64), 2);
  assert.equal(workerCount(R({ numPrompts: 2, concurrency: 8 }), 8, 64), 2);
  assert.equal(workerCount(R({ numPrompts: 100, concurrency: 3 }), 8, 64), 3);
  assert.equal(workerCount(R({ numPrompts: 100, concurrency: 8 }), 8, 64), 8);
  // A duration run has no count: the users bound it.
  assert.equal(workerCount(R({ durationMs: 1000, concurrency: 5 }), 16, 64), 5);
  // auto: one per 256 streams, within the cores.
  assert.equal(workerCount(R({ numPrompts: 10_000, concurrency: 1000 }), "auto", 16), 4);
  assert.throws(() => workerCount(R({ numPrompts: 2 }), 65, 64), usage(/--workers 65/));
});

test("streams per worker thread are bounded, naming the flag that asked for them", () => {
  const max = MAX_STREAMS_PER_WORKER;
  checkStreams(2 * max, 2, "--concurrency", 2);
  assert.throws(
    () => checkStreams(2 * max + 1, 2, "--concurrency", 2),
    (e: unknown) =>
      usage(new RegExp(`--concurrency: ${2 * max + 1} streams at once on 2 worker thread\\(s\\) is more than ${max}`))(
        e,
      ) && /this host allows 2 worker thread\(s\); use --concurrency 8192 or less/.test((e as UsageError).hint ?? ""),
  );
  // The hint offers --workers only when the host has enough cores for it.
  assert.throws(
    () => checkStreams(max + 1, 1, "--max-concurrency", 4),
    (e: unknown) => /use --workers 2, or --max-concurrency/.test((e as UsageError).hint ?? ""),
  );
  // Every request at once (infinite rate, no cap) is that many streams.
  assert.throws(
    () => workerCount(R({ numPrompts: 3 * max }), 2, 2),
    (e: unknown) => usage(/--num-prompts: 12288 streams/)(e) && /--max-concurrency/.test((e as UsageError).hint ?? ""),
  );
  assert.equal(workerCount(R({ numPrompts: 3 * max, maxConcurrency: 100 }), 2, 2), 2);
  assert.equal(workerCount(R({ numPrompts: 3 * max, requestRate: 100 }), 2, 2), 2);
});

test("counts that size memory have a range: requests, warm-ups, lengths, prefixes", () => {
  assert.throws(() => R({ numPrompts: 1e99 }), usage(/--num-prompts expects an integer in \[1, 1000000\]/));
  assert.throws(() => R({ numPrompts: MAX_REQUESTS + 1 }), usage(/--num-prompts/));
  R({ numPrompts: MAX_REQUESTS });
  assert.throws(() => R({ warmup: 1e9 }), usage(/--warmup expects an integer in \[0, 1000000\]/));
  assert.throws(() => R({ concurrency: 1e7 }), usage(/--concurrency expects an integer in \[1, 1000000\]/));
  // Arrivals are drawn up front: a long duration at a high rate is a request count too.
  assert.throws(
    () => R({ durationMs: 3_600_000, requestRate: 1000 }),
    usage(/--duration × --request-rate is 3600000 requests, more than the 1000000/),
  );
  assert.throws(
    () => createWorkload({ randomInputLen: 2 ** 21 }),
    usage(/--random-input-len expects an integer in \[1, 1048576\]/),
  );
  assert.throws(() => createWorkload({ randomOutputLen: 0 }), usage(/--random-output-len/));
  assert.throws(
    () => createWorkload({ dataset: "shared-prefix", prefixGroups: 100_000, prefixLen: 1 << 20 }),
    usage(/--prefix-groups 100000 × --prefix-len 1048576 is 104857600000 prefix tokens/),
  );
  assert.throws(() => createWorkload({ dataset: "shared-prefix", prefixGroups: 0 }), usage(/--prefix-groups expects/));
});

// The CLI: exit 2 at once, one error line, no stack trace, nothing started.
const CASES: Array<[string[], RegExp]> = [
  [["--workers", "999"], /--workers 999: this host has \d+ core\(s\)/],
  [["--num-prompts", "1e99"], /--num-prompts expects an integer in \[1, 1000000\], got "1e99"/],
  [["--stall-timeout", "0"], /--stall-timeout must be longer than 0, got "0"/],
  [["--connect-timeout", "1000000h"], /--connect-timeout must be at most 596h/],
  [["--seed", "1e99"], /--seed expects an integer, got "1e99"/],
  [["--random-output-len", "0"], /--random-output-len expects an integer in \[1, 1048576\]/],
  [["--concurrency", "99999", "--num-prompts", "10"], /--concurrency: 99999 streams at once/],
  [["--metric-percentiles", "0,50"], /--metric-percentiles expects a number > 0/],
];
for (const [args, msg] of CASES)
  test(`bench ${args.join(" ")} is refused up front`, async () => {
    const r = await runCli(["bench", "--base-url", "http://127.0.0.1:1", ...args], { limitMs: 20_000 });
    const detail = `${r.stderr}\n${r.stdout.slice(0, 300)}`;
    assert.equal(r.code, 2, detail);
    assert.match(r.stderr, msg, detail);
    assert.doesNotMatch(r.stderr, STACK, detail);
    assert.doesNotMatch(r.stderr, /internal error|cannot reach/, detail);
    assert.deepEqual(r.leftovers, []);
  });

let sim: SimProcess;
before(async () => {
  sim = await spawnSimProcess(["--time-scale", "20"]);
});
after(() => sim?.stop());

test("a run asked for more worker threads than requests starts only as many as it sends", async () => {
  const res = await runBench({ baseUrl: sim.url, numPrompts: 1, workers: 2, randomOutputLen: 4, randomInputLen: 8 });
  assert.equal(res.summary.completed, 1);
  assert.equal(res.client.workers, 1);
});

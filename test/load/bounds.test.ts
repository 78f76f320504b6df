// Issue 42: every timer a schedule sets is bounded. A trace row dated 2^53 ms or 2099, a 25-day gap, or
// --request-rate 1e-9 once sent Node's TimeoutOverflowWarning in a 1-ms loop; now such a schedule is refused
// before anything is sent (naming the row's line), and a wait past Node's limit is chunked where one is set.
import assert from "node:assert/strict";
import { test } from "node:test";
import { InputError, UsageError } from "../../src/errors.ts";
import { readAzure } from "../../src/load/datasets/azure.ts";
import { readMooncake } from "../../src/load/datasets/mooncake.ts";
import { MAX_RUN_MS } from "../../src/load/limits.ts";
import { pace } from "../../src/load/pacer.ts";
import { planReplay } from "../../src/load/replay.ts";
import { resolveOptions } from "../../src/load/runner.ts";
import { checkSessionSpan } from "../../src/load/sessions.ts";
import { abortableSleep, MAX_TIMER_MS } from "../../src/sleep.ts";

/** The delays `fn` asks setTimeout for, synchronously (the real timers are set unref'd: a failed check cannot hang the file). */
function timerDelays(fn: () => void): number[] {
  const real = globalThis.setTimeout;
  const seen: number[] = [];
  globalThis.setTimeout = ((cb: () => void, ms?: number) => {
    seen.push(ms ?? 0);
    return real(cb, Math.min(ms ?? 0, MAX_TIMER_MS)).unref();
  }) as typeof setTimeout;
  try {
    fn();
  } finally {
    globalThis.setTimeout = real;
  }
  return seen;
}

const row = (ts: number) =>
  JSON.stringify({ timestamp: ts, input_length: 10, output_length: 5, hash_ids: [ts % 1000] });

test("the pacer never asks for a timer past Node's limit: a far entry is waited for in chunks", async () => {
  let sent = 0;
  let p: ReturnType<typeof pace> | null = null;
  const delays = timerDelays(() => {
    p = pace(Float64Array.of(0, 2 ** 53 - 1), performance.now(), () => sent++);
  });
  p!.stop();
  await p!.done;
  assert.equal(sent, 1);
  assert.equal(delays.length, 1);
  assert.ok(delays[0]! <= MAX_TIMER_MS && delays[0]! > MAX_TIMER_MS - 10, `${delays}`);
});

test("abortableSleep chunks a wait past Node's limit and still ends on abort", async () => {
  const ac = new AbortController();
  let slept: Promise<void> | null = null;
  const delays = timerDelays(() => {
    slept = abortableSleep(3 * MAX_TIMER_MS, ac.signal);
  });
  assert.deepEqual(delays, [MAX_TIMER_MS]);
  ac.abort();
  await slept;
});

test("a replay row past one run's bound is refused at its line: 2^53 − 1 ms, 2099, a 25-day gap", () => {
  const at = (fn: () => unknown) => {
    try {
      fn();
    } catch (e) {
      assert.ok(e instanceof InputError, String(e));
      return e;
    }
    assert.fail("not refused");
  };
  const big = at(() => planReplay(readMooncake("big.jsonl", [row(0), row(2 ** 53 - 1)].join("\n")), {}));
  assert.equal(big.position?.line, 2);
  assert.match(big.message, /big\.jsonl:2:1: this row is due 285,421 years after the replay starts/);
  assert.match(big.message, /past the 24\.9 days one run may last/);
  assert.match(big.hint ?? "", /--replay-speed/);
  const az = at(() =>
    planReplay(
      readAzure(
        "az.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.6805900,374,44\r\n2023-11-16 18:15:47.0,10,4\r\n2099-11-16 18:15:50.5281430,396,109",
      ),
      {},
    ),
  );
  assert.equal(az.position?.line, 4);
  assert.match(az.message, /76 years/);
  const gapMs = 25 * 86_400_000;
  const gap = [row(0), row(1000), row(1000 + gapMs)].join("\n");
  assert.equal(at(() => planReplay(readMooncake("gap.jsonl", gap), {})).position?.line, 3);
  // The same gap at 2× fits (12.5 days), and so does the window before it.
  assert.equal(planReplay(readMooncake("gap.jsonl", gap), { replaySpeed: 2 }).timesMs[2], (1000 + gapMs) / 2);
  assert.equal(planReplay(readMooncake("gap.jsonl", gap), { maxRequests: 2 }).rows.length, 2);
  // A tiny speed stretches an ordinary trace past it too.
  assert.equal(at(() => planReplay(readMooncake("a.jsonl", gap), { replaySpeed: 1e-9 })).position?.line, 2);
});

test("an open loop whose last arrival is past the bound is refused naming --request-rate", () => {
  const base = { baseUrl: "http://127.0.0.1:1" };
  assert.throws(
    () => resolveOptions({ ...base, requestRate: 1e-9 }),
    (e: unknown) =>
      e instanceof UsageError && /--request-rate 1e-9 spreads 100 requests over 3,169 years, past/.test(e.message),
  );
  // --duration sends at least one request, at 1/rate.
  assert.throws(() => resolveOptions({ ...base, requestRate: 1e-9, durationMs: 10_000 }), /1 request over 32 years/);
  // Exactly at the bound is allowed; just past it is not.
  const r = MAX_RUN_MS / 1000;
  assert.equal(resolveOptions({ ...base, requestRate: 1 / r, numPrompts: 1 }).numPrompts, 1);
  assert.throws(() => resolveOptions({ ...base, requestRate: 1 / r, numPrompts: 2 }), /past the 24\.9 days/);
  assert.throws(
    () => resolveOptions({ ...base, arrivalsMs: [0, MAX_RUN_MS + 1] }),
    /arrival schedule: its last time \(24\.9 days after the start\) is past/,
  );
});

test("sessions: a trace turn past the bound is named by its line; think time × turns past it is refused", () => {
  const trace = readMooncake("s.jsonl", [row(0), row(2 ** 40)].join("\n"));
  assert.throws(
    () => checkSessionSpan({ trace }),
    (e: unknown) => e instanceof InputError && e.position?.line === 2 && /this turn is due/.test(e.message),
  );
  checkSessionSpan({ trace, speed: 1e3 });
  assert.throws(
    () => checkSessionSpan({ thinkMs: 86_400_000, maxTurns: 26 }),
    /--think-time 24\.0 h between 26 turns is 25\.0 days of thinking alone/,
  );
  checkSessionSpan({ thinkMs: 86_400_000, maxTurns: 24 });
});

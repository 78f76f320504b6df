// The closed loop sends each user's next request from the last one's callback (no promise per request).
// A request that fails inside the send (a closed client fails at once) must loop, not recurse: 20,000
// synchronous failures through 3 users would overflow the stack if each called the next send.
import assert from "node:assert/strict";
import { test } from "node:test";
import { StreamClient } from "../../src/load/client.ts";
import { closedLoop, type RunCtx } from "../../src/load/runner.ts";
import { createWorkload } from "../../src/load/workload.ts";

test("a closed loop whose every request fails synchronously sends them all, in order, without recursing", async () => {
  const client = new StreamClient("http://127.0.0.1:9", { transport: "h1" });
  await client.close();
  const seen: number[] = [];
  const ctx: RunCtx = {
    client,
    workload: createWorkload({ randomInputLen: 4, randomOutputLen: 4 }),
    bodyOpts: { model: "m", endpoint: "/v1/completions" },
    endpoint: "/v1/completions",
    graceMs: 0,
    onRecord: (r) => seen.push(r.index),
  };
  const n = 20_000;
  const ph = await closedLoop(ctx, { users: 3, count: n, durationMs: null, warmup: false, indexBase: 0 });
  assert.equal(ph.records.length, n);
  assert.deepEqual(
    seen,
    Array.from({ length: n }, (_, i) => i),
  );
  assert.ok(ph.records.every((r) => r.errorClass === "aborted" && /closed/.test(r.errorMessage ?? "")));
});

test("an error thrown while sending fails the run with that error", async () => {
  const client = new StreamClient("http://127.0.0.1:9", { transport: "h1" });
  await client.close();
  const ctx: RunCtx = {
    client,
    workload: {
      name: "random",
      size: 10,
      get: (i) => {
        if (i === 5) throw new Error("prompt 5 cannot be built");
        return { prompt: "x", inputLen: 1, outputLen: 1 };
      },
    },
    bodyOpts: { model: "m", endpoint: "/v1/completions" },
    endpoint: "/v1/completions",
    graceMs: 0,
    onRecord: () => {},
  };
  await assert.rejects(
    closedLoop(ctx, { users: 2, count: null, durationMs: 60_000, warmup: false, indexBase: 0 }),
    /prompt 5 cannot be built/,
  );
});

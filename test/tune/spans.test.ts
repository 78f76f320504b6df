// The winner's split against the baseline's, part by part (pure): which part moved, which did not.
import assert from "node:assert/strict";
import { test } from "node:test";
import { type CandidateSpans, candidateSpans, compareSpans } from "../../src/tune/spans.ts";

/** A candidate whose every request has these parts (ms). */
function cand(parts: Record<string, number>, n = 5): CandidateSpans {
  return candidateSpans([
    {
      requests: n,
      joined: n,
      spansReceived: n,
      complete: true,
      waitedMs: 0,
      findings: [],
      parts: Object.fromEntries(Object.entries(parts).map(([k, v]) => [k, Array(n).fill(v)])),
    },
  ])!;
}

const base = { clientTpotMs: 20.9, serverTpotMs: 20.88, deliveryTpotMs: 0.02, queueMs: 0.1, clientTtftMs: 62 };

test("a decode change: all of it in server decode, delivery and queue unchanged", () => {
  // Delivery moved 0.03 ms/token (150 % of its own): nothing beside a 3.8 ms change.
  const best = cand({ ...base, clientTpotMs: 17.1, serverTpotMs: 17.05, deliveryTpotMs: 0.05 });
  assert.equal(
    compareSpans(cand(base), best, "NCCL_PROTO=LL", "tpot"),
    "NCCL_PROTO=LL: −3.80 ms/token TPOT (client, median), all of it in server decode; delivery unchanged; queue unchanged",
  );
});

test("a change on the way back and a queue that moved are named with their figures", () => {
  const best = cand({ ...base, clientTpotMs: 19.9, serverTpotMs: 20.4, deliveryTpotMs: -0.5, queueMs: 9 });
  assert.equal(
    compareSpans(cand(base), best, "X", "tpot"),
    "X: −1.00 ms/token TPOT (client, median), server decode −0.48, delivery −0.52; queue +8.90 ms",
  );
});

test("TTFT: the parts of the first token; pooled over blocks, the join rate over every request", () => {
  const t = { networkMs: 1, intakeMs: 2, queueMs: 50, prefillMs: 40, deliveryMs: 1, clientTtftMs: 94 };
  const best = cand({ ...t, queueMs: 20, clientTtftMs: 64 });
  assert.equal(
    compareSpans(cand(t), best, "Y", "ttft"),
    "Y: −30.00 ms TTFT (client, median), all of it in queue; network, intake, prefill, delivery unchanged",
  );
  const two = candidateSpans([
    {
      requests: 4,
      joined: 4,
      spansReceived: 4,
      complete: true,
      waitedMs: 0,
      findings: [],
      parts: { queueMs: [1, 1, 1, 1] },
    },
    { requests: 4, joined: 0, spansReceived: 0, complete: false, waitedMs: 300, findings: [], parts: {} },
  ])!;
  assert.equal(two.joinRate, 0.5);
  assert.equal(two.split.queueMs?.n, 4);
});

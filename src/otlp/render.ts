// The span join as text (the bench console's banner layout) and as JSON. Pure.
import { center } from "../load/console.ts";
import type { RequestSplitSection } from "../report/types.ts";
import type { SpanJoinReport } from "./bench.ts";
import type { Distribution } from "./join.ts";

const f2 = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? "n/a" : x.toFixed(2));

const ROWS: Array<[keyof SpanJoinReport["join"]["split"], string]> = [
  ["networkMs", "network + HTTP (client → server)"],
  ["intakeMs", "server intake (arrival → queued)"],
  ["queueMs", "queue"],
  ["prefillMs", "prefill"],
  ["deliveryMs", "first-token delivery"],
  ["clientTtftMs", "= client TTFT"],
  ["serverTtftMs", "server TTFT (its own)"],
  ["serverTpotMs", "server decode per output token"],
  ["clientTpotMs", "client TPOT (same requests)"],
  ["forwardMs", "model forward, whole request (detailed traces)"],
  ["executeMs", "model execute: forward + sampling, sync"],
  ["schedulerMs", "scheduler, whole request"],
  ["outsideModelMs", "inference outside the model (scheduler, output processing, waits)"],
];

export function formatSpanJoin(r: SpanJoinReport): string {
  const j = r.join;
  const L: string[] = [];
  L.push(center(" Engine spans (OTLP) ", "="));
  L.push(`${"Receiver:".padEnd(40)} ${r.endpoint}${r.grpcEndpoint ? ` (gRPC ${r.grpcEndpoint})` : ""}`);
  L.push(`${"Spans received:".padEnd(40)} ${r.spansReceived} in ${r.exportRequests} exports`);
  L.push(`${"Requests joined:".padEnd(40)} ${j.joined} of ${j.requests} (${(100 * j.joinRate).toFixed(1)}%)`);
  L.push(`${"Joined by:".padEnd(40)} ${j.key}`);
  if (j.clock)
    L.push(
      `${"Server clock − client clock (ms):".padEnd(40)} ${j.clock.offsetMs.toFixed(3)} (drift ${j.clock.skewPpm.toFixed(1)} ppm, ${j.clock.pairs} pairs)`,
    );
  if (j.perRequest.length) {
    L.push(center(" Where each TTFT went (ms) ", "-"));
    L.push(`${"".padEnd(36)}${"mean".padStart(10)}${"p50".padStart(10)}${"p99".padStart(10)}`);
    for (const [k, label] of ROWS) {
      const d: Distribution | null = j.split[k];
      if (k === "serverTtftMs") L.push(center(" The server's own figures (ms) ", "-"));
      if (!d) continue;
      if (k === "forwardMs" || (k === "executeMs" && !j.split.forwardMs))
        L.push(center(" Inside the engine, per request (ms; detailed traces) ", "-"));
      L.push(`${label.padEnd(36)}${f2(d.mean).padStart(10)}${f2(d.p50).padStart(10)}${f2(d.p99).padStart(10)}`);
    }
  }
  for (const n of j.notes) L.push(`note: ${n}`);
  for (const n of j.notSent) L.push(n);
  for (const f of [
    ...r.receiverFindings.map((x) => ({ kind: x.kind, detail: `${x.status}: ${x.detail}` })),
    ...j.findings,
  ])
    L.push(`finding (${f.kind}): ${f.detail}`);
  if (j.unmatchedRequests.length) L.push(`unmatched requests: ${j.unmatchedRequests.join(", ")}`);
  if (j.unmatchedSpans.length) L.push(`unmatched spans: ${j.unmatchedSpans.join(", ")}`);
  if (!r.complete && j.requests > 0)
    L.push(
      `(waited ${(r.waitedMs / 1000).toFixed(1)} s after the run for spans; raise --otlp-wait if the engine batches longer)`,
    );
  L.push("=".repeat(50));
  return L.join("\n");
}

/** The `otlp` key of bench's --json: the join with snake_case names, per-request rows included. */
export function spanJoinJson(r: SpanJoinReport) {
  const j = r.join;
  return {
    endpoint: r.endpoint,
    grpc_endpoint: r.grpcEndpoint,
    export_requests: r.exportRequests,
    spans_received: r.spansReceived,
    waited_ms: r.waitedMs,
    complete: r.complete,
    key: j.key,
    layouts: j.layouts,
    not_sent: j.notSent,
    notes: j.notes,
    requests: j.requests,
    joined: j.joined,
    join_rate: j.joinRate,
    clock: j.clock && { offset_ms: j.clock.offsetMs, skew_ppm: j.clock.skewPpm, pairs: j.clock.pairs },
    split_ms: {
      network: j.split.networkMs,
      intake: j.split.intakeMs,
      queue: j.split.queueMs,
      prefill: j.split.prefillMs,
      delivery: j.split.deliveryMs,
      client_ttft: j.split.clientTtftMs,
      server_ttft: j.split.serverTtftMs,
      server_tpot: j.split.serverTpotMs,
      client_tpot: j.split.clientTpotMs,
      model_forward: j.split.forwardMs,
      model_execute: j.split.executeMs,
      scheduler: j.split.schedulerMs,
      outside_model: j.split.outsideModelMs,
    },
    unmatched_requests: j.unmatchedRequests,
    unmatched_spans: j.unmatchedSpans,
    duplicate_spans: j.duplicateSpans,
    findings: [...r.receiverFindings.map((f) => ({ kind: f.kind, detail: `${f.status}: ${f.detail}` })), ...j.findings],
    per_request: j.perRequest,
  };
}

const PER_REQUEST_LISTED = 200;

/** The join as a study report section: distributions in ROWS order, per-request parts, findings in words. */
export function requestSplitSection(r: SpanJoinReport, source: string): RequestSplitSection {
  const j = r.join;
  const rows: RequestSplitSection["rows"] = [];
  for (const [k, label] of ROWS) {
    const d = j.split[k];
    if (d) rows.push({ key: k, label, mean: d.mean, p50: d.p50, p90: d.p90, p99: d.p99, n: d.n });
  }
  const findings = [
    ...r.receiverFindings.map((x) => `${x.kind} (${x.status}): ${x.detail}`),
    ...j.findings.map((f) => `${f.kind}: ${f.detail}`),
    ...j.notes,
    ...j.notSent,
  ];
  if (j.unmatchedRequests.length) findings.push(`unmatched requests: ${j.unmatchedRequests.join(", ")}`);
  if (!r.complete && j.requests > 0)
    findings.push(`waited ${(r.waitedMs / 1000).toFixed(1)} s after the bench for spans; some never came`);
  return {
    source,
    requests: j.requests,
    joined: j.joined,
    joinRate: j.joinRate,
    clock: j.clock && { offsetMs: j.clock.offsetMs, skewPpm: j.clock.skewPpm, pairs: j.clock.pairs },
    rows,
    perRequest: [...j.perRequest]
      .sort((a, b) => a.index - b.index)
      .slice(0, PER_REQUEST_LISTED)
      .map((q) => ({
        index: q.index,
        networkMs: q.networkMs,
        intakeMs: q.intakeMs,
        queueMs: q.queueMs,
        prefillMs: q.prefillMs,
        deliveryMs: q.deliveryMs,
        clientTtftMs: q.clientTtftMs,
      })),
    findings,
  };
}

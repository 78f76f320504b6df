// bench with an OTLP receiver beside it: each request carries an id the engine names its span
// after, the engine's spans are collected while the run goes, and afterwards joined to the records.
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import { type BenchDeps, type BenchResult, runBench } from "../load/runner.ts";
import type { BenchOptions } from "../load/types.ts";
import { isProbeSpanId } from "./attributes.ts";
import { clientIdOf, type JoinRecord, type JoinResult, joinSpans, vllmRequestId } from "./join.ts";
import { engineFlagHint, type OtlpFinding, type OtlpReceiver, startOtlpReceiver } from "./receiver.ts";
import { SglangProgress } from "./sglang.ts";
import type { OtlpSpan } from "./spans.ts";

export interface SpanJoinReport {
  endpoint: string;
  grpcEndpoint: string | null;
  /** OTLP export requests accepted, and spans in them. */
  exportRequests: number;
  spansReceived: number;
  /** How long the run's end waited for the last spans (ms), and whether every successful request got one. */
  waitedMs: number;
  complete: boolean;
  receiverFindings: OtlpFinding[];
  join: JoinResult;
}

export interface BenchSpansOptions {
  host?: string;
  port?: number;
  /** Also OTLP/gRPC on this host:port (vLLM's and SGLang's default protocol). */
  grpc?: { host: string; port: number };
  /** A receiver already listening (kept open); otherwise one is started on host:port and closed after. */
  receiver?: OtlpReceiver;
  /** After the run, how long to wait for spans still unsent (engines batch them: vLLM every 5 s). */
  waitMs?: number;
  maxBodyBytes?: number;
  /** With a receiver kept open: only spans it takes from now on are this run's (earlier ones were other work's). */
  onlyLater?: boolean;
  /** Told once the receiver listens: the endpoint and the flags for the engine. */
  onListening?: (endpoint: string, hint: string) => void | Promise<void>;
}

export const DEFAULT_SPAN_WAIT_MS = 10_000;

/** The records as the join takes them: epoch send times from the run's origin; warm-up left out. */
export function joinRecords(res: BenchResult, prefix: string, originUnixMs: number): JoinRecord[] {
  return res.requests
    .filter((r) => !r.warmup)
    .map((r) => ({
      id: `${prefix}${r.index}`,
      index: r.index,
      ok: r.errorClass === null,
      sendUnixMs: originUnixMs + r.sendMs,
      ttftMs: r.ttftMs,
      lastChunkMs: r.lastChunkMs,
      outputTokens: r.outputTokens,
    }));
}

export async function benchWithSpans(
  opts: BenchOptions,
  deps: BenchDeps,
  o: BenchSpansOptions,
): Promise<{ result: BenchResult; spans: SpanJoinReport }> {
  let notify: (() => void) | null = null;
  const own = !o.receiver;
  const rx =
    o.receiver ??
    (await startOtlpReceiver({
      host: o.host,
      port: o.port ?? 0,
      maxBodyBytes: o.maxBodyBytes,
      grpcHost: o.grpc?.host,
      grpcPort: o.grpc?.port,
    }));
  const unlisten = rx.listen(() => notify?.());
  const from = o.onlyLater ? rx.spans.length : 0;
  try {
    await o.onListening?.(rx.endpoint, engineFlagHint(rx.endpoint, rx.grpcEndpoint));
    // A run tag keeps another client's (or an earlier run's) requests out of this join.
    const prefix = `isc-${randomBytes(4).toString("hex")}-`;
    let originPerf = Number.NaN;
    const result = await runBench(
      { ...opts, requestIdPrefix: prefix },
      {
        ...deps,
        onOrigin: (p) => {
          originPerf = p;
          deps.onOrigin?.(p);
        },
      },
    );
    const records = joinRecords(result, prefix, performance.timeOrigin + originPerf);
    const known = new Map(records.map((r) => [r.id, r]));
    const outstanding = new Set(records.filter((r) => r.ok).map((r) => r.id));
    // SGLang's request is whole once its root and rank-0 scheduler thread came (they come from different processes).
    const sglang = new SglangProgress();
    const done = (sid: string) => {
      const cid = clientIdOf(sid, known);
      if (cid !== null) outstanding.delete(cid);
    };
    const seen = (spans: readonly OtlpSpan[]) => {
      for (const s of spans) {
        const sid = vllmRequestId(s);
        if (sid !== null) done(sid);
      }
      for (const rid of sglang.feed(spans)) done(rid);
    };
    seen(rx.spans.slice(from));
    const t0 = performance.now();
    if (outstanding.size > 0 && !deps.signal?.aborted) {
      let upTo = rx.spans.length;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          notify = null;
          deps.signal?.removeEventListener("abort", done);
          resolve();
        };
        const timer = setTimeout(done, o.waitMs ?? DEFAULT_SPAN_WAIT_MS);
        deps.signal?.addEventListener("abort", done, { once: true });
        notify = () => {
          seen(rx.spans.slice(upTo));
          upTo = rx.spans.length;
          if (outstanding.size === 0) done();
        };
      });
    }
    const waitedMs = performance.now() - t0;
    // Warm-up requests' spans are this run's too, and a started server's probe is inferscope's own: not strangers.
    const warm = new Set(result.requests.filter((r) => r.warmup).map((r) => `${prefix}${r.index}`));
    const mine = from > 0 ? rx.spans.slice(from) : rx.spans;
    const spans = mine.filter((s) => {
      const sid = vllmRequestId(s);
      return sid === null || !isProbeSpanId(sid);
    });
    return {
      result,
      spans: {
        endpoint: rx.endpoint,
        grpcEndpoint: rx.grpcEndpoint,
        exportRequests: rx.requests,
        spansReceived: rx.spans.length - from,
        waitedMs,
        complete: outstanding.size === 0,
        receiverFindings: rx.findings,
        join: joinSpans(records, spans, warm),
      },
    };
  } finally {
    unlisten();
    if (own) await rx.close();
  }
}

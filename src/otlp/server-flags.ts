// What a server that inferscope starts needs to send its request spans to a receiver: the engine's
// catalog entry says (vLLM, SGLang); the embedded sim takes vLLM's flags, with detailed traces.
import { commandFacts } from "../discover/index.ts";
import type { EngineCatalog } from "../metrics/engines/catalog.ts";
import { engineById } from "../metrics/engines/index.ts";

export type RequestSpanFlags = NonNullable<EngineCatalog["requestSpans"]>;

/**
 * The flags that make a started server send its request spans, or null: the embedded sim at time-scale 1 (its spans
 * are on another clock otherwise; with detailed traces), or a --server-cmd whose engine's catalog entry says how (vLLM,
 * SGLang; detailed traces only if the command asks for them, vLLM).
 */
export function requestSpanFlags(embedded: boolean, serverCmd: string, timeScale: number): RequestSpanFlags | null {
  if (embedded) {
    const v = timeScale === 1 ? engineById("vllm")?.requestSpans : undefined;
    // The sim's detailed traces cost it nothing (vLLM's do): with them its spans measure the host part of each step.
    return v ? { ...v, args: (e) => [...v.args(e), "--collect-detailed-traces", "all"] } : null;
  }
  const engine = commandFacts(serverCmd).engine;
  return (engine ? engineById(engine)?.requestSpans : undefined) ?? null;
}

// What a server that inferscope starts needs to send its request spans to a receiver: the engine's
// catalog entry says (vLLM); the embedded sim takes vLLM's flags.
import { commandFacts } from "../discover/index.ts";
import type { EngineCatalog } from "../metrics/engines/catalog.ts";
import { engineById } from "../metrics/engines/index.ts";

export type RequestSpanFlags = NonNullable<EngineCatalog["requestSpans"]>;

/**
 * The flags that make a started server send its request spans, or null: the embedded sim at time-scale 1 (its spans
 * are on another clock otherwise), or a --server-cmd whose engine's catalog entry says how (vLLM).
 */
export function requestSpanFlags(embedded: boolean, serverCmd: string, timeScale: number): RequestSpanFlags | null {
  if (embedded) return timeScale === 1 ? (engineById("vllm")?.requestSpans ?? null) : null;
  const engine = commandFacts(serverCmd).engine;
  return (engine ? engineById(engine)?.requestSpans : undefined) ?? null;
}

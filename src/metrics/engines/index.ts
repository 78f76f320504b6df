// The engine registry (a plain object) and detection over it.
import type { FamilyLike } from "../concepts.ts";
import type { EngineCatalog, EngineId } from "./catalog.ts";
import { dynamo } from "./dynamo.ts";
import { llamacpp } from "./llamacpp.ts";
import { sglang } from "./sglang.ts";
import { tgi } from "./tgi.ts";
import { triton, trtllm } from "./trtllm.ts";
import { vllm } from "./vllm.ts";

export type {
  EngineCatalog,
  EngineHint,
  EngineId,
  InfoEndpoint,
  Knob,
  KnobNeed,
  Quirk,
  ServerTimingSpec,
} from "./catalog.ts";
export { NameIndex } from "./catalog.ts";

export const engines: Record<EngineId, EngineCatalog> = { vllm, sglang, tgi, llamacpp, trtllm, triton, dynamo };

export interface Detection {
  engine: EngineCatalog;
  confidence: number;
}

/** Every engine with non-zero confidence, most likely first (registry order breaks ties). */
export function detectEngines(families: FamilyLike[]): Detection[] {
  return Object.values(engines)
    .map((engine) => ({ engine, confidence: engine.detect(families) }))
    .filter((d) => d.confidence > 0)
    .sort((a, b) => b.confidence - a.confidence);
}

export function engineById(id: string): EngineCatalog | undefined {
  return (engines as Record<string, EngineCatalog>)[id];
}

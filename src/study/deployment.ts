// The study's Deployment record (names only, as the report shows them) from a model input.
import type { ModelInput } from "../model/resolve.ts";
import type { Deployment } from "../report/types.ts";

/** Names of a model input as a Deployment; the input must name its model/GPU/interconnect (not objects). */
export function deploymentOf(input: Readonly<ModelInput>): Deployment {
  const name = (v: unknown, key: string, fallback?: string): string => {
    if (typeof v === "string" && v) return v;
    if (v === undefined && fallback !== undefined) return fallback;
    throw new TypeError(`deploymentOf: "${key}" must be a catalog name, got ${typeof v}`);
  };
  const tp = input.tp ?? 1;
  return {
    model: name(input.model, "model"),
    quant: name(input.quant, "quant", "bf16"),
    gpu: name(input.gpu, "gpu"),
    gpus: input.gpus ?? tp,
    tp,
    interconnect: name(input.interconnect, "interconnect", "pcie5"),
    engine: name(input.engine, "engine", "vllm"),
  };
}

// Catalog listings and "did you mean" across GPUs, models, quantizations and interconnects. Pure.
import { listModels, modelNames, paramSummary } from "./architecture.ts";
import { gpuNames, INTERCONNECT_NAMES, listGpus, suggestFrom } from "./hardware.ts";
import { RECIPE_NAMES } from "./quantization.ts";

export interface CatalogListing {
  gpus: {
    id: string;
    name: string;
    kind: string;
    memoryGB: number;
    bandwidthGBs: number;
    tflopsBf16: number;
    tflopsFp8: number | null;
    tflopsFp4: number | null;
    scaleUp: string;
    source: string;
  }[];
  models: {
    name: string;
    layers: number;
    hidden: number;
    attention: string;
    moe: string;
    totalParamsB: number;
    activeParamsB: number;
    source: string;
  }[];
  quantizations: string[];
  interconnects: string[];
}

export function catalog(): CatalogListing {
  return {
    gpus: listGpus().map((g) => ({
      id: g.id,
      name: g.name,
      kind: g.kind,
      memoryGB: g.memoryGB,
      bandwidthGBs: g.bandwidthGBs,
      tflopsBf16: g.tflops.bf16,
      tflopsFp8: g.tflops.fp8,
      tflopsFp4: g.tflops.fp4,
      scaleUp: g.scaleUp
        ? `${g.scaleUp.kind}${g.scaleUp.gen ? g.scaleUp.gen : ""} ${g.scaleUp.bidirGBs} GB/s bidir`
        : "none (PCIe)",
      source: g.source,
    })),
    models: listModels().map((m) => {
      const p = paramSummary(m);
      return {
        name: m.name,
        layers: m.layers,
        hidden: m.hidden,
        attention: m.attention + (m.indexer ? "+DSA" : "") + (m.slidingWindow ? "+SWA" : ""),
        moe: m.moe
          ? `${m.moe.experts} experts top-${m.moe.topk}${m.moe.shared ? ` +${m.moe.shared} shared` : ""}${m.moe.denseLayers ? `, first ${m.moe.denseLayers} dense` : ""}`
          : "dense",
        totalParamsB: Math.round(p.totalB * 100) / 100,
        activeParamsB: Math.round(p.activeB * 100) / 100,
        source: m.source,
      };
    }),
    quantizations: RECIPE_NAMES,
    interconnects: INTERCONNECT_NAMES,
  };
}

/** Closest catalog names (GPUs, models, quantizations, interconnects) to a misspelt one. */
export function suggest(name: string): string[] {
  return suggestFrom(name, [...gpuNames(), ...modelNames(), ...RECIPE_NAMES, ...INTERCONNECT_NAMES]);
}

// Layers and roofline as the study report's trace section carries them (pure; no table renderer,
// so the study can import it without the CLI's).
import type { TraceLayers, TraceRoofline } from "../report/types.ts";
import type { LayerAnalysis } from "./layers.ts";
import { type RooflineAnalysis, rooflineLine } from "./roofline.ts";

export function layersSection(l: LayerAnalysis): TraceLayers {
  return {
    layers: l.layers,
    kernelsPerLayer: l.kernelsPerLayer,
    layerUs: l.layerKernelUs,
    ops: l.ops.map((o) => ({
      index: o.index,
      name: o.name,
      cls: o.class,
      meanUs: o.us.mean,
      minUs: o.us.min,
      maxUs: o.us.max,
      cv: o.us.cv,
    })),
    head: { kernels: l.head.kernels, us: l.head.kernelUs },
    tail: { kernels: l.tail.kernels, us: l.tail.kernelUs },
  };
}

export function rooflineSection(r: RooflineAnalysis): TraceRoofline {
  return {
    model: r.model,
    gpu: r.gpu,
    ceilingGBs: r.ceilingGBs,
    ceilingIs: r.ceilingIs,
    gemms: r.gemms.map((g) => ({
      name: g.name,
      mb: g.bytes / 1e6,
      us: g.us.mean,
      achievedGBs: g.achievedGBs,
      share: g.ceilingShare,
      line: rooflineLine(g, r.ceilingGBs),
    })),
    terms: r.terms.map((t) => ({
      label: t.label,
      predictedMs: t.predictedMs,
      measuredMs: t.measuredMs,
      measuredIs: t.measuredIs,
    })),
    predictedStepMs: r.predictedStepMs,
    measuredStepMs: r.measuredStepMs,
    notes: r.notes,
  };
}

import { fit } from "./src/model/fit.ts";
import { measurementsFromDoc } from "./src/model/measurements.ts";
import { predict } from "./src/model/predict.ts";
const input: any = { model: "mixtral-8x7b", quant: "bf16", gpu: "l40s", gpus: 4, tp: 4, engine: "vllm", interconnect: "pcie4" };
const truth = (b: number) => predict({ ...input, batch: b, measuredBandwidthGBs: 864 * 0.72 }).decode.stepMs.mid;
const ms = [1, 2, 4, 8, 16].map((b) => ({ kind: "itl", batch: b, ms: truth(b), sd: 0.02 }));
const nccl = { kind: "nccl-tests", rows: [ { bytes: 8192, us: 13.0 }, { bytes: 131072, us: 57.7 }, { bytes: 2097152, us: 622.1 } ] };
const f = fit(input, measurementsFromDoc([...ms, nccl]));
for (const r of f.residuals) console.log(r.label, r.measured, r.fitted.toFixed(3), r.prior.toFixed(3), ((r.fitted - r.measured) / r.measured * 100).toFixed(2) + " %");
for (const p of f.parameters) console.log(p.name, p.prior, p.posterior, p.pinned);
for (const b of [1,2,4,8,16]) { const p = predict({ ...input, batch: b, measuredBandwidthGBs: 864 * 0.72 }); console.log(b, p.decode.terms.map(t=>`${t.name}:${t.ms.mid.toFixed(2)}`).join(" ")); }

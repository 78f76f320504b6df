import { predict } from "./src/model/predict.ts";
import { SEED_DEPLOYMENT } from "./src/model/examples.ts";
let t = performance.now();
const p = predict(SEED_DEPLOYMENT);
console.log(performance.now()-t, p.decode.stepMs, JSON.stringify(p.extrapolations), p.interval?.notes, p.interval?.maturity);
for (const b of [1, 64]) { const q = predict({ model: "llama-3.1-8b", quant: "bf16", gpu: "h200", engine: "gptfast", batch: b } as any); console.log(b, q.decode.stepMs, q.interval?.notes); }
for (const v of [undefined, "v0.4.1", "2025-01", "v0.5.1.post3", "v0.5.4"]) { const q = predict({ model: "gpt-oss-120b", quant: "mxfp4", gpu: "h100-sxm", gpus: 8, tp: 8, engine: "sglang", engineVersion: v } as any); console.log(v, q.decode.stepMs, q.interval?.widening, q.interval?.maturity); }
for (const v of [undefined, "2023-12", "2024-06", "b6918"]) { const q = predict({ model: "mixtral-8x7b", quant: "q4_k_m", gpu: "rtx-4090", engine: "llamacpp", engineVersion: v } as any); console.log(v, q.decode.stepMs, q.interval?.widening, q.interval?.maturity); }

// The worked example's deployment (seed-scenario.md): GLM-5 NVFP4 on 8× RTX PRO 6000 over PCIe Gen5,
// TP 8, vLLM. One definition for benches, tests and the study's default run.
import type { ModelInput } from "./resolve.ts";

export const SEED_DEPLOYMENT: Readonly<ModelInput> = Object.freeze({
  model: "glm-5",
  quant: "nvfp4",
  gpu: "rtx-pro-6000",
  gpus: 8,
  tp: 8,
  interconnect: "pcie5",
  engine: "vllm",
});

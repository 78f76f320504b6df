// The sim profile's own helpers (src/sim/profile.ts), which the study and tune both start the embedded sim
// with: a profile's deployment, its model flags and the server command, and the public names they keep.
import assert from "node:assert/strict";
import { test } from "node:test";
import { sim, study } from "../../src/index.ts";
import { DEFAULT_PROFILE, embeddedSimCommand, profileDeployment, profileModelOptions } from "../../src/sim/profile.ts";
import { SEED_DEPLOYMENT } from "../../src/study/index.ts";

test("profileDeployment: the default profile is the worked example's deployment; others by catalog name", () => {
  assert.deepEqual(profileDeployment(DEFAULT_PROFILE), { name: DEFAULT_PROFILE, ...SEED_DEPLOYMENT });
  assert.deepEqual(profileDeployment("mixtral-8x7b-2xa100"), {
    name: "mixtral-8x7b-2xa100",
    model: undefined,
    gpu: "a100-80gb-sxm",
    gpus: 2,
    tp: 2,
    interconnect: "nvlink3",
    engine: "vllm",
  });
  assert.deepEqual(profileModelOptions(profileDeployment("llama3-70b-4xh100-nvlink")), {
    model: undefined,
    quant: undefined,
    gpu: "h100-sxm",
    gpus: "4",
    tp: "4",
    interconnect: "nvlink4",
    engine: "vllm",
  });
});

test("embeddedSimCommand: this Node and the CLI entry, {port} left for the server-command path, --set quoted", () => {
  const cmd = embeddedSimCommand("llama3-8b-1xh100", 10, 7, { "model.maxModelLen": 4096, "engine.name": "a b" });
  assert.ok(cmd.startsWith(`${process.execPath} `), cmd);
  assert.match(cmd, /bin\/inferscope\.mjs sim --profile llama3-8b-1xh100 --port \{port\} --time-scale 10 --seed 7 /);
  assert.match(cmd, / --set model\.maxModelLen=4096 --set 'engine\.name=a b'$/);
});

test("the public surface: study and sim name the same helpers", () => {
  assert.equal(study.embeddedSimCommand, embeddedSimCommand);
  assert.equal(study.DEFAULT_PROFILE, DEFAULT_PROFILE);
  assert.equal(sim.embeddedSimCommand, embeddedSimCommand);
  assert.equal(sim.profileDeployment, profileDeployment);
});

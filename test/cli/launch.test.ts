// The launcher's one re-execution (src/cli/launch.mjs): a command that runs a load loop starts again with
// --no-memory-reducer where Node can replace its process (process.execve, Node ≥ 22.15), and says so in
// the run's --json (client.nodeFlags); a flag the user gave either way, or an inspector, is left alone.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { after, before, test } from "node:test";
import { LOAD_LOOP_FLAGS, relaunchArgv, runsLoadLoop } from "../../src/cli/launch.mjs";
import { type SpawnedSim, spawnSim } from "../helpers/sim.ts";

const canExec = typeof (process as { execve?: unknown }).execve === "function";

test("runsLoadLoop: the command word decides; help does not relaunch", () => {
  for (const c of ["bench", "ab", "sweep", "study", "tune"]) assert.equal(runsLoadLoop([c, "--json"]), true, c);
  assert.equal(runsLoadLoop(["--debug", "bench"]), true);
  for (const args of [["model", "predict"], ["sim"], ["--version"], [], ["bench", "--help"], ["ab", "-h"]])
    assert.equal(runsLoadLoop(args), false, args.join(" "));
});

test("relaunchArgv: the flags before the script, the rest as given; null where the process stays", () => {
  const p = { canExec: true, execPath: "/n", execArgv: ["--import", "tsx"], argv: ["/n", "/s.js", "bench", "-x"] };
  assert.deepEqual(relaunchArgv(p), ["/n", "--import", "tsx", ...LOAD_LOOP_FLAGS, "/s.js", "bench", "-x"]);
  assert.equal(relaunchArgv({ ...p, canExec: false }), null);
  assert.equal(relaunchArgv({ ...p, argv: ["/n"] }), null);
  for (const given of ["--no-memory-reducer", "--memory-reducer", "--no_memory_reducer"])
    assert.equal(relaunchArgv({ ...p, execArgv: [given] }), null, given);
  assert.equal(relaunchArgv({ ...p, execArgv: ["--inspect-brk=0"] }), null);
  assert.equal(relaunchArgv({ ...p, nodeOptions: "--max-old-space-size=4096 --inspect" }), null);
  // Other NODE_OPTIONS travel in the environment, unchanged.
  assert.ok(relaunchArgv({ ...p, nodeOptions: "--max-old-space-size=4096" }));
});

let sim: SpawnedSim;
before(async () => {
  sim = await spawnSim(["--speed", "zero"]);
});
after(() => sim?.stop());

const bench = (nodeArgs: string[]) =>
  spawnSync(
    process.execPath,
    [...nodeArgs, "bin/inferscope.mjs", "bench", "--base-url", sim.url, "--num-prompts", "2"].concat([
      "--random-input-len",
      "8",
      "--random-output-len",
      "8",
      "--no-server-metrics",
      "--json",
    ]),
    { encoding: "utf8", timeout: 60_000 },
  );

test("bench runs with --no-memory-reducer where Node can re-execute, and says which flags it ran with", {
  timeout: 120_000,
}, () => {
  const r = bench([]);
  assert.equal(r.status, 0, r.stderr);
  const flags = JSON.parse(r.stdout).inferscope.client.nodeFlags as string[];
  assert.deepEqual(flags, canExec ? [...LOAD_LOOP_FLAGS] : [], `Node ${process.version}`);
  // A say the user gave on the reducer stands.
  const kept = bench(["--memory-reducer"]);
  assert.equal(kept.status, 0, kept.stderr);
  assert.deepEqual(JSON.parse(kept.stdout).inferscope.client.nodeFlags, ["--memory-reducer"]);
});

// npm run bench:tune — tune's statistical checks, too slow for the test suite (~2.5 min on a quiet 2-core
// host; test/tune/sim.test.ts and test/tune/llamacpp.e2e.test.ts keep a fast check of each):
// 1. On the simulator with hidden parameters drawn at random (10 draws: the acceptance rate, the protocol
//    costs, NCCL's default protocol and the eager penalty decide which of 12 candidates is best): the chosen
//    candidate within 2 % of the sim's true best in ≥ 90 % of draws, with ≤ half the server starts of grids
//    at the same precision.
// 2. On llama.cpp's CPU llama-server over threads × --ubatch-size × --flash-attn, restarted per block: an
//    independent A/B (other server starts, other prompts) of the chosen configuration (or, when the baseline
//    won, the runner-up) against the baseline meets tune's measured gain, and a gain tune proved beyond the
//    A/B's minimum detectable effect is seen by the A/B too. Skipped, and said, where llama-server cannot run.
//   npm run bench:tune [-- --draws N] [--no-llama]
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { runAB } from "../src/experiment/ab.ts";
import { Rng } from "../src/sim/rng.ts";
import { openStore } from "../src/store/index.ts";
import { variantText } from "../src/tune/knobs.ts";
import { runTune } from "../src/tune/run.ts";
import { LLAMA_SERVER, LLAMA_SMALL, llamaSkipReason } from "../test/helpers/llamacpp.ts";
import { drawHidden, TUNE_DRAW_SEED, tuneOnDraw } from "../test/helpers/tune-sim.ts";

const arg = (name: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const draws = Number(arg("--draws") ?? 10);
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(" / ");
const verdict = (ok: boolean | null) => (ok === null ? "n/a" : ok ? "met" : "NOT met");
const targets: Array<[string, string, string, boolean | null]> = [];

console.log(`bench:tune on ${cpus().length} CPU(s), load average ${load()} (1 / 5 / 15 min) at the start`);
const dir = mkdtempSync(join(tmpdir(), "inferscope-bench-tune-"));
try {
  // 1. Draws on the sim.
  const rng = new Rng(TUNE_DRAW_SEED);
  let within = 0;
  let starts = 0;
  let grid = 0;
  const store = openStore(join(dir, "tune.db"));
  try {
    for (let d = 0; d < draws; d++) {
      const hidden = drawHidden(rng);
      const s = await tuneOnDraw(hidden, d, store);
      if (s.gap <= 0.02) within++;
      starts += s.restarts;
      grid += s.gridStarts;
      console.log(
        `draw ${d}: acceptance ${hidden.acceptance.toFixed(2)}, best ${s.chosen} (${s.chosenName}) ${s.gap >= 0 ? "+" : ""}${(s.gap * 100).toFixed(1)} % from the true best (${s.trueBest}); ${s.restarts} starts vs grid ${s.gridStarts}; stop: ${s.stop}`,
      );
    }
  } finally {
    store.close();
  }
  targets.push([
    "draws within 2 % of the sim's true best",
    `${within}/${draws}`,
    "≥ 90 %",
    within >= Math.ceil(0.9 * draws),
  ]);
  targets.push([
    "server starts against grids at the same precision",
    `${starts} vs ${grid}`,
    "≤ ½",
    starts <= grid / 2,
  ]);

  // 2. llama.cpp, confirmed by an A/B.
  const skip = process.argv.includes("--no-llama") ? "--no-llama" : llamaSkipReason();
  if (skip) {
    console.log(`llama.cpp part skipped: ${skip}`);
    targets.push(["llama.cpp: the A/B meets tune's gain", "skipped", "intervals meet", null]);
  } else {
    const cmd = `${LLAMA_SERVER} -m ${LLAMA_SMALL} --alias small-random-llama --host 127.0.0.1 --port {port} -c 2048 -np 1`;
    const workload = { numPrompts: 3, randomInputLen: 32, randomOutputLen: 32, warmup: 1 };
    const threads = cpus().length >= 2 ? "1,2" : "1,1";
    const r = await runTune({
      serverCmd: cmd,
      knobs: [`--threads=${threads}`, "--ubatch-size=512,128", "--flash-attn"],
      workload,
      db: join(dir, "runs.db"),
      logDir: join(dir, "logs"),
      budget: { starts: 24 },
      seed: 3,
    });
    if (!r.best) throw new Error(`llama.cpp: tune chose no configuration (${r.stop.message})`);
    console.log(
      `llama.cpp tune: best ${r.best.id} (${r.best.name}) ${r.best.objective.estimate.toFixed(2)} ms/token; ${r.restarts} starts (grid ${r.gridStarts}); stop ${r.stop.reason}`,
    );
    // The chosen configuration, or the runner-up when the baseline won, in an ABBA A/B against the baseline.
    const other =
      r.best.id !== "c0"
        ? r.candidates.find((c) => c.id === r.best!.id)!
        : r.candidates
            .filter((c) => c.id !== "c0" && c.measured)
            .sort((a, b) => a.measured!.estimate - b.measured!.estimate)[0]!;
    const ab = await runAB({
      serverCmd: cmd,
      // The baseline is tune's c0 with its own flags (--threads 1 …), not the bare command.
      variants: [`base:${variantText(r.candidates[0]!)}`, `chosen:${variantText(other)}`],
      repeats: 2,
      workload: { ...workload, seed: 11 },
      db: join(dir, "runs.db"),
      logDir: join(dir, "logs-ab"),
    });
    const d = ab.diffs.find((x) => x.metric === "tpot_ms")!;
    const g = other.gain;
    console.log(
      `A/B ${other.id} vs c0: ${d.verdict}; tune's gain ${g ? `${g.absolute.estimate.toFixed(2)} [${g.absolute.low.toFixed(2)}, ${g.absolute.high.toFixed(2)}] ms/token` : "not measured"}`,
    );
    const meet = g !== null && d.improvement.lo <= g.absolute.high && g.absolute.low <= d.improvement.hi;
    targets.push([
      "llama.cpp: the A/B's 95 % interval meets tune's",
      g ? `A/B [${d.improvement.lo.toFixed(2)}, ${d.improvement.hi.toFixed(2)}] ms/token` : "no gain measured",
      "intervals meet",
      meet,
    ]);
    // A gain tune proved beyond what the A/B can detect (α 0.05, power 0.8) must be seen by the A/B.
    if (g && g.absolute.low > 0 && g.absolute.low >= d.comparison.mde)
      targets.push([
        "llama.cpp: a gain tune proved is seen by the A/B",
        `${d.improvement.estimate.toFixed(2)} ms/token (MDE ${d.comparison.mde.toFixed(2)})`,
        "> 0",
        d.improvement.estimate > 0,
      ]);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(`\ntargets, load average ${load()} at the end`);
for (const [what, fig, target, ok] of targets)
  console.log(`  ${verdict(ok).padEnd(7)} ${what}: ${fig} (target ${target})`);

// npm run test:stress [N] [filters…] — runs the test suite N times (default 3) while a CPU hog holds
// one core (a busy loop in a child process), printing pass/fail per run; exits 1 if any run failed.
import { spawn, spawnSync } from "node:child_process";

const args = process.argv.slice(2);
const n = /^\d+$/.test(args[0] ?? "") ? Number(args.shift()) : 3;
const hog = spawn(process.execPath, ["-e", "for(;;){}"], { stdio: "ignore" });
const stop = () => hog.kill("SIGKILL");
process.on("exit", stop);
for (const s of ["SIGINT", "SIGTERM"]) process.on(s, () => process.exit(130));
const results = [];
for (let i = 1; i <= n; i++) {
  const t0 = Date.now();
  const r = spawnSync(process.execPath, ["scripts/run-tests.mjs", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    encoding: "utf8",
    maxBuffer: 1 << 28,
  });
  const out = `${r.stdout}${r.stderr}`;
  const fails = out.split("\n").filter((l) => /^✖ /.test(l));
  const tally = /ℹ pass (\d+)[\s\S]*?ℹ fail (\d+)/.exec(out);
  const ok = r.status === 0;
  results.push(ok);
  console.log(
    `run ${i}/${n}: ${ok ? "pass" : "FAIL"} (${tally ? `${tally[1]} passed, ${tally[2]} failed` : `exit ${r.status}`}, ${((Date.now() - t0) / 1000).toFixed(0)} s)`,
  );
  for (const f of [...new Set(fails)]) console.log(`  ${f}`);
}
stop();
console.log(`${results.filter(Boolean).length}/${n} runs passed with a CPU hog on one core`);
process.exit(results.every(Boolean) ? 0 : 1);

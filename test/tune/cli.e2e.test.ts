// `inferscope tune` as a user runs it: the CLI, the embedded sim restarted as a real process per
// block, the run store; Ctrl-C keeps every finished block and --resume finishes the run.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, type TestContext, test } from "node:test";
import { pathToFileURL } from "node:url";
import { processGroupMembers } from "../../src/experiment/variants.ts";
import { openStore } from "../../src/store/index.ts";
import { CHROMIUM, launchChromium, reportPage } from "../helpers/chromium.ts";
import { runCli, STACK, waitFor } from "../helpers/cli.ts";
import { cannotRun } from "../helpers/skip.ts";
import { type Hidden, trueTpotMs } from "../helpers/tune-sim.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-tune-cli-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const ARGS = [
  "tune",
  "--knob",
  "NCCL_PROTO=,LL",
  "--knob",
  "--spec-tokens=0,2",
  "--time-scale",
  "10",
  "--num-prompts",
  "4",
  "--random-output-len",
  "48",
  "--seed",
  "1",
];
// The seed profile as shipped: its acceptance default (0.7) and protocol costs.
const SEED: Hidden = { overrides: {}, acceptance: 0.7 };

function serversLeft(db: string): number[] {
  const s = openStore(db);
  try {
    const runs = s.listRuns({ kind: "tune" });
    return runs.flatMap((r) =>
      s.getRun(r.id).blocks.flatMap((b) => {
        const pid = (b.server as { pid?: number } | null)?.pid;
        return pid ? (processGroupMembers(pid) ?? []) : [];
      }),
    );
  } finally {
    s.close();
  }
}

test("tune on the seed profile finds NCCL_PROTO=LL with speculative decoding, proves it with a CI, leaves no server", async (t) => {
  const db = join(dir, "a.db");
  const out_ = join(dir, "report");
  const r = await runCli([...ARGS, "--json", "--db", db, "--log-dir", join(dir, "logs"), "--out", out_], {
    limitMs: 180_000,
  });
  assert.equal(r.code, 0, r.stderr);
  assert.doesNotMatch(r.stderr, STACK);
  const out = JSON.parse(r.stdout);
  assert.equal(out.kind, "tune");
  assert.equal(out.candidates.length, 4);
  const truth = out.candidates.map((c: { id: string }) => {
    const s = openStore(db);
    try {
      const cfg = s.getRun(out.runId).run.config as {
        candidates: Array<{ id: string; env: Record<string, string>; args: string[] }>;
      };
      const cc = cfg.candidates.find((x) => x.id === c.id)!;
      return trueTpotMs(SEED, cc.args, cc.env, 32 + 24);
    } finally {
      s.close();
    }
  });
  const best = Math.min(...truth);
  const chosen = truth[Number(out.best.id.slice(1))];
  assert.ok(chosen / best - 1 <= 0.02, `chosen ${chosen} vs true best ${best}`);
  assert.equal(out.best.env.NCCL_PROTO, "LL");
  assert.deepEqual(out.best.args, ["--spec-tokens", "2"]);
  for (const k of ["estimate", "low", "high"]) assert.equal(typeof out.best.objective[k], "number");
  assert.ok(
    out.best.objective.low <= out.best.objective.estimate && out.best.objective.estimate <= out.best.objective.high,
  );
  assert.ok(out.best.gain.relative.low > 0, "the gain over the baseline is proven (CI above 0)");
  assert.ok(out.restarts >= 3 && out.restarts <= out.gridStarts * 3);
  assert.match(out.best.command, /^NCCL_PROTO=LL .* sim .* --spec-tokens 2$/);
  for (const c of out.candidates) assert.ok(c.status === "best" || c.status === "dropped" || c.status === "alive");
  assert.deepEqual(serversLeft(db), [], "every started server is gone");
  assert.equal(out.report.html, join(out_, "index.html"));
  await checkReportInChromium(t, out.report.html, out.candidates.length);
  // `inferscope report ID` rebuilds the same report from the store.
  const again = await runCli(["report", out.runId, "--db", db, "--out", join(dir, "again"), "--json"]);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(JSON.parse(again.stdout).result.best.id, out.best.id);
  assert.ok(existsSync(join(dir, "again", "index.html")) && existsSync(join(dir, "again", "report.md")));
});

/** The tune report in headless Chromium: no errors, no network, the chart drawn, one row per candidate. */
async function checkReportInChromium(t: TestContext, html: string, candidates: number): Promise<void> {
  if (!existsSync(CHROMIUM)) {
    // The rest passed; the browser check did not run, so the test reports a skip, not a pass.
    cannotRun(t, `the browser check: ${CHROMIUM} not installed`);
    return;
  }
  const browser = await launchChromium();
  try {
    const page = await reportPage(browser);
    const problems: string[] = [];
    const requests: string[] = [];
    page.on("console", (m) => {
      if (m.type() === "error" || m.type() === "warning") problems.push(`${m.type()}: ${m.text()}`);
    });
    page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
    page.on("request", (req) => {
      if (!req.url().startsWith("file:")) requests.push(req.url());
    });
    await page.goto(pathToFileURL(html).href, { waitUntil: "load" });
    assert.deepEqual(problems, []);
    assert.deepEqual(requests, []);
    assert.equal(await page.$$eval("#tune-candidates tbody tr", (rows) => rows.length), candidates);
    const marks = await page.$$eval(
      "#chart-tune svg g[class*='mark-'] path, #chart-tune svg g[class*='mark-'] line",
      (m) => m.length,
    );
    assert.ok(marks >= candidates, `${marks} marks in the chart`);
    assert.match((await page.textContent("#tune .cards"))!, /best configuration/);
  } finally {
    await browser.close();
  }
}

test("Ctrl-C keeps the finished blocks and names the run; --resume finishes it; no server is left", async () => {
  const db = join(dir, "b.db");
  const complete = () => {
    try {
      const s = openStore(db);
      try {
        const run = s.listRuns({ kind: "tune" })[0];
        return run && s.getRun(run.id).blocks.filter((b) => b.status === "complete").length >= 1 ? run.id : undefined;
      } finally {
        s.close();
      }
    } catch {
      return undefined;
    }
  };
  let id: string | undefined;
  const partial = join(dir, "partial");
  const first = await runCli([...ARGS, "--db", db, "--log-dir", join(dir, "logs2"), "--out", partial], {
    limitMs: 120_000,
    onStart: (pid) => {
      void waitFor(complete, 100_000, "a finished block").then((rid) => {
        id = rid;
        process.kill(pid, "SIGINT");
      });
    },
  });
  assert.equal(first.code, 130, first.stderr);
  assert.ok(id);
  assert.match(first.stderr, new RegExp(`run ${id}`));
  assert.match(first.stderr, new RegExp(`--resume ${id}`));
  assert.doesNotMatch(first.stderr, STACK);
  // The interrupted run's --out holds its partial report, not nothing.
  assert.match(first.stderr, new RegExp(`partial report in ${partial.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}`));
  const written = JSON.parse(readFileSync(join(partial, "results.json"), "utf8"));
  assert.equal(written.runId, id);
  assert.equal(written.status, "partial");
  assert.equal(written.stop.reason, "interrupted");
  assert.ok(existsSync(join(partial, "index.html")) && existsSync(join(partial, "report.md")));
  const kept = openStore(db);
  const before = kept.getRun(id!).blocks.filter((b) => b.status === "complete").length;
  kept.close();
  assert.ok(before >= 1);
  assert.deepEqual(serversLeft(db), []);

  const refused = await runCli(["tune", "--resume", id!, "--db", db, "--knob", "X=a,b"], { limitMs: 30_000 });
  assert.equal(refused.code, 2);
  assert.match(refused.stderr, /leave out --knobs?/);

  // Two resumes at once: the second is refused with the first's pid while the first holds the run.
  let pid2 = 0;
  const running = runCli(["tune", "--resume", id!, "--db", db, "--json"], {
    limitMs: 180_000,
    onStart: (p) => (pid2 = p),
  });
  const lock = join(dir, `.b.db.${id}.inferscope-lock`);
  await waitFor(() => (existsSync(lock) ? true : undefined), 60_000, "the first resume to claim the run");
  const twice = await runCli(["tune", "--resume", id!, "--db", db], { limitMs: 60_000 });
  assert.equal(twice.code, 2, twice.stderr);
  assert.match(twice.stderr, new RegExp(`run ${id} is being written by another inferscope process \\(pid ${pid2}\\)`));
  const second = await running;
  assert.equal(second.code, 0, second.stderr);
  assert.equal(existsSync(lock), false, "the run's lock is released");
  const out = JSON.parse(second.stdout);
  assert.equal(out.runId, id);
  assert.equal(out.status, "complete");
  const s = openStore(db);
  const blocks = s.getRun(id!).blocks.filter((b) => b.status === "complete").length;
  s.close();
  assert.ok(blocks > before, "the resumed run added blocks to the kept ones");
  assert.ok(out.best);
  assert.deepEqual(serversLeft(db), []);
});

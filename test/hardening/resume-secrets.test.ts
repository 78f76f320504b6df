// `ab --resume` of a run whose server command and variant held secrets: the store has only placeholders
// and keyed hashes, so the resume asks for each secret (exit 2, naming it), refuses a different one, and
// with the same flags given again restarts the servers with the real values — never the placeholder.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { InterruptedError } from "../../src/errors.ts";
import { runAB } from "../../src/experiment/ab.ts";
import { runLengthSweep } from "../../src/experiment/sweep.ts";
import { openStore } from "../../src/store/index.ts";
import { runTune } from "../../src/tune/run.ts";
import { BIN, runCli, STACK } from "../helpers/cli.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-resume-secrets-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const HF = "hf_RESUMEcmd9Lk3Zt8Rx5Pm";
const ENV_TOK = "RESUMEenv-77a1c0";
const ARG_KEY = "RESUMEarg-2b9f31";
const seen = join(dir, "seen.txt");
// Each start appends what the server was given (its HF_TOKEN and its arguments), then runs the sim.
const SERVER_CMD =
  `sh -c 'echo "env=$HF_TOKEN args=$*" >> ${seen}; exec ${process.execPath} ${BIN} sim --port "$PORT" --speed zero --seed 1' ` +
  `sim --hf-token ${HF}`;
const VARIANTS = ["base:", `tok:HF_TOKEN=${ENV_TOK} --api-key ${ARG_KEY}`];
const db = join(dir, "runs.db");

test("ab --resume with stored secrets: asks for each (exit 2), refuses a different one, restarts with the real ones", async () => {
  // Session 1: interrupted after its first block, as a Ctrl-C would.
  const ac = new AbortController();
  await assert.rejects(
    runAB({
      serverCmd: SERVER_CMD,
      variants: VARIANTS,
      repeats: 2,
      workload: { numPrompts: 2, randomOutputLen: 4, warmup: 0 },
      db,
      logDir: join(dir, "logs"),
      readyTimeoutMs: 60_000,
      signal: ac.signal,
      onProgress: (e) => {
        if (e.phase === "block-done") ac.abort(new InterruptedError("interrupted by test"));
      },
    }),
    InterruptedError,
  );
  const s = openStore(db);
  const [run] = s.listRuns({ kind: "ab" });
  s.close();
  assert.ok(run, "no run stored");
  const id = run.id;
  const env = { HF_TOKEN: "", API_KEY: "" };

  // Nothing given again: exit 2, each missing secret named with where to give it.
  const bare = await runCli(["ab", "--resume", id, "--db", db], { env, limitMs: 30_000 });
  assert.equal(bare.code, 2, bare.stderr);
  assert.doesNotMatch(bare.stderr, STACK);
  assert.match(
    bare.stderr,
    /--server-cmd's --hf-token \(set HF_TOKEN in the environment or pass the same --server-cmd/,
  );
  assert.match(bare.stderr, /variant "tok": HF_TOKEN/);
  assert.match(bare.stderr, /variant "tok": --api-key \(set API_KEY/);

  // The same flags with a different token: refused by hash, and the wrong value is not echoed.
  const wrongVariant = `tok:HF_TOKEN=RESUMEwrong-000 --api-key ${ARG_KEY}`;
  const wrong = await runCli(
    ["ab", "--resume", id, "--db", db, "--server-cmd", SERVER_CMD, "--variant", "base:", "--variant", wrongVariant],
    { env, limitMs: 30_000 },
  );
  assert.equal(wrong.code, 2, wrong.stderr);
  assert.match(wrong.stderr, /HF_TOKEN: the --variant tok:… given is not the secret the run started with/);
  assert.doesNotMatch(wrong.stderr, /RESUME/);

  // The same flags again: not "different", the run finishes.
  const before = existsSync(seen) ? readFileSync(seen, "utf8").split("\n").filter(Boolean).length : 0;
  const ok = await runCli(
    ["ab", "--resume", id, "--db", db, "--server-cmd", SERVER_CMD, ...VARIANTS.flatMap((v) => ["--variant", v])],
    { env, limitMs: 90_000 },
  );
  assert.equal(ok.code, 0, ok.stderr);
  assert.doesNotMatch(ok.stdout + ok.stderr, /RESUME/);
  const starts = readFileSync(seen, "utf8").split("\n").filter(Boolean);
  assert.equal(starts.length, before + 3, starts.join("\n"));
  // Every start, before and after the resume, got the real values; none got the placeholder.
  for (const line of starts) {
    assert.doesNotMatch(line, /redacted/, line);
    assert.match(line, new RegExp(`args=--hf-token ${HF}`), line);
  }
  const tokStarts = starts.filter((l) => l.includes("--api-key"));
  assert.ok(tokStarts.length >= 1, starts.join("\n"));
  for (const line of tokStarts) assert.equal(line, `env=${ENV_TOK} args=--hf-token ${HF} --api-key ${ARG_KEY}`);

  // The store still holds no value, only placeholders and hashes.
  for (const f of ["runs.db", "runs.db-wal"].map((n) => join(dir, n)).filter(existsSync))
    assert.doesNotMatch(readFileSync(f).toString("latin1"), /RESUME/, f);
});

test("tune --resume with a --hf-token in its command: exit 2 naming it, then from the environment, the real token", async () => {
  const tuneDb = join(dir, "tune.db");
  const tuneSeen = join(dir, "tune-seen.txt");
  const cmd =
    `sh -c 'echo "args=$*" >> ${tuneSeen}; exec ${process.execPath} ${BIN} sim --port "$PORT" --time-scale 20 --seed 1' ` +
    `sim --hf-token ${HF}`;
  const ac = new AbortController();
  await assert.rejects(
    runTune({
      serverCmd: cmd,
      knobs: ["NCCL_PROTO=,LL"],
      budget: { starts: 3 },
      minBlocks: 1,
      workload: { numPrompts: 2, randomOutputLen: 8, warmup: 0 },
      db: tuneDb,
      logDir: join(dir, "tune-logs"),
      readyTimeoutMs: 60_000,
      signal: ac.signal,
      onProgress: (e) => {
        if (e.phase === "block-done") ac.abort(new InterruptedError("interrupted by test"));
      },
    }),
    InterruptedError,
  );
  const s = openStore(tuneDb);
  const [run] = s.listRuns({ kind: "tune" });
  s.close();
  assert.ok(run, "no tune run stored");

  const bare = await runCli(["tune", "--resume", run.id, "--db", tuneDb], { env: { HF_TOKEN: "" }, limitMs: 30_000 });
  assert.equal(bare.code, 2, bare.stderr);
  assert.match(
    bare.stderr,
    /--server-cmd's --hf-token \(set HF_TOKEN in the environment or pass the same --server-cmd/,
  );

  const ok = await runCli(["tune", "--resume", run.id, "--db", tuneDb], { env: { HF_TOKEN: HF }, limitMs: 90_000 });
  assert.equal(ok.code, 0, ok.stderr);
  assert.doesNotMatch(ok.stdout + ok.stderr, /RESUME/);
  const starts = readFileSync(tuneSeen, "utf8").split("\n").filter(Boolean);
  assert.ok(starts.length >= 2, starts.join("\n"));
  for (const line of starts) assert.equal(line, `args=--hf-token ${HF}`);
  for (const f of ["tune.db", "tune.db-wal"].map((n) => join(dir, n)).filter(existsSync))
    assert.doesNotMatch(readFileSync(f).toString("latin1"), /RESUME/, f);
});

test("sweep --resume with a secret variant: refused without it, the same --variant again is no conflict", async () => {
  const sweepDb = join(dir, "sweep.db");
  const sweepSeen = join(dir, "sweep-seen.txt");
  const cmd = `sh -c 'echo "env=$HF_TOKEN args=$*" >> ${sweepSeen}; exec ${process.execPath} ${BIN} sim --port "$PORT" --speed zero --seed 1' sim`;
  const variant = `v:HF_TOKEN=${ENV_TOK} --api-key ${ARG_KEY}`;
  const ac = new AbortController();
  let levels = 0;
  await assert.rejects(
    runLengthSweep({
      serverCmd: cmd,
      variant,
      outLens: [4, 8, 12],
      requestsPerLength: 1,
      warmup: 0,
      db: sweepDb,
      readyTimeoutMs: 60_000,
      signal: ac.signal,
      onProgress: (e) => {
        if (e.phase === "level" && ++levels === 2) ac.abort(new InterruptedError("interrupted by test"));
      },
    }),
    InterruptedError,
  );
  const s = openStore(sweepDb);
  const [run] = s.listRuns({ kind: "sweep-lengths" });
  s.close();
  assert.ok(run, "no sweep run stored");
  const env = { HF_TOKEN: "", API_KEY: "" };
  const bare = await runCli(["sweep", "lengths", "--resume", run.id, "--db", sweepDb], { env, limitMs: 30_000 });
  assert.equal(bare.code, 2, bare.stderr);
  assert.match(bare.stderr, /variant "v": HF_TOKEN \(set HF_TOKEN in the environment or pass the same --variant/);
  assert.doesNotMatch(bare.stderr, /RESUME/);
  const ok = await runCli(["sweep", "lengths", "--resume", run.id, "--db", sweepDb, "--variant", variant], {
    env,
    limitMs: 60_000,
  });
  assert.equal(ok.code, 0, ok.stderr);
  assert.doesNotMatch(ok.stdout + ok.stderr, /RESUME/);
  const starts = readFileSync(sweepSeen, "utf8").split("\n").filter(Boolean);
  assert.equal(starts.length, 2, starts.join("\n"));
  for (const line of starts) assert.equal(line, `env=${ENV_TOK} args=--api-key ${ARG_KEY}`);
});

// A canary secret planted in every way a secret enters ab, sweep, tune and study — `--hf-token` and
// `--token` in `--server-cmd`, `--api-key KEY` and `HF_TOKEN=…` in a variant, `--api-key` itself — must
// be on no artefact: stdout, stderr, the run store's file, `runs export` (JSON and CSV), every report
// file and every server log. The servers are the embedded sim started through `sh -c`, which drops the
// secret flags before the sim sees them, so each run is real and takes seconds.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { openStore } from "../../src/store/index.ts";
import { BIN, type CliRun, runCli, STACK } from "../helpers/cli.ts";
import { ESC_PAYLOAD, startFaultServer } from "../helpers/faults.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-canary-"));
after(() => rmSync(dir, { recursive: true, force: true }));

// Each one different, so a leak says which path leaked; none but the first is token-shaped, so only
// structure can find them.
const C = {
  hfCmd: "hf_CANARYcmd7q2Wv9Lk3Zt8Rx",
  tokCmd: "CANARYtok-5d1f0e77",
  apiKey: "CANARYapi-0b9e4c21",
  argKey: "CANARYarg-83aa7d10",
  envTok: "CANARYenv-a8c3b2f4",
  hfArg: "hf_CANARYarg4Jk8Pq1Ws6Nx",
};
const CANARY = /CANARY/;

// The sim behind `sh -c`: the words after the script are its positional parameters, which it ignores,
// so the secret flags (and a variant's appended flags) stay in the command without reaching the sim.
const sim = (flags: string) => `sh -c 'exec ${process.execPath} ${BIN} sim --port "$PORT" ${flags}' sim`;
const SERVER_CMD = `${sim("--speed zero --seed 1")} --token ${C.tokCmd} --hf-token ${C.hfCmd}`;
// tune needs a decode time to rank (a zero-speed sim has none): the sim's own clock, 20× faster.
const TUNE_CMD = `${sim("--time-scale 20 --seed 1")} --token ${C.tokCmd} --hf-token ${C.hfCmd}`;
const SECRET_VARIANT = `tok:HF_TOKEN=${C.envTok} --api-key ${C.argKey} --hf-token=${C.hfArg}`;

function filesUnder(path: string): string[] {
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(path);
  } catch {
    return [];
  }
  if (!st.isDirectory()) return [path];
  return readdirSync(path).flatMap((n) => filesUnder(join(path, n)));
}

interface Case {
  name: string;
  args: (o: { db: string; out: string; logs: string }) => string[];
  limitMs: number;
}

const CASES: Case[] = [
  {
    name: "ab (text)",
    args: ({ db, logs }) => [
      "ab",
      ...["--server-cmd", SERVER_CMD, "--variant", "base:", "--variant", SECRET_VARIANT, "--api-key", C.apiKey],
      ...["--repeats", "1", "--num-prompts", "2", "--random-output-len", "4", "--warmup", "0"],
      ...["--db", db, "--log-dir", logs],
    ],
    limitMs: 60_000,
  },
  {
    name: "ab --json",
    args: ({ db, logs }) => [
      "ab",
      ...["--server-cmd", SERVER_CMD, "--variant", "base:", "--variant", SECRET_VARIANT, "--api-key", C.apiKey],
      ...["--repeats", "1", "--num-prompts", "2", "--random-output-len", "4", "--warmup", "0"],
      ...["--db", db, "--log-dir", logs, "--json"],
    ],
    limitMs: 60_000,
  },
  {
    name: "sweep concurrency",
    args: ({ db }) => [
      "sweep",
      "concurrency",
      ...["--server-cmd", SERVER_CMD, "--variant", SECRET_VARIANT, "--api-key", C.apiKey],
      ...["--levels", "1,2", "--num-prompts", "2", "--random-output-len", "4", "--warmup", "0", "--db", db],
    ],
    limitMs: 60_000,
  },
  {
    name: "sweep lengths --json",
    args: ({ db }) => [
      "sweep",
      "lengths",
      ...["--server-cmd", SERVER_CMD, "--variant", SECRET_VARIANT, "--api-key", C.apiKey],
      ...["--out", "4,8", "--requests", "1", "--warmup", "0", "--db", db, "--json"],
    ],
    limitMs: 60_000,
  },
  {
    name: "tune (its 'run it:' line)",
    args: ({ db, out, logs }) => [
      "tune",
      ...["--server-cmd", TUNE_CMD, "--knob", "NCCL_PROTO=,LL", "--api-key", C.apiKey],
      ...["--budget", "2", "--min-blocks", "1", "--num-prompts", "2", "--random-output-len", "8", "--warmup", "0"],
      ...["--db", db, "--log-dir", logs, "--out", out],
    ],
    limitMs: 90_000,
  },
  {
    name: "study --json",
    args: ({ db, out }) => [
      "study",
      "--quick",
      ...["--server-cmd", SERVER_CMD, "--variant", "base:", "--variant", SECRET_VARIANT, "--api-key", C.apiKey],
      ...["--db", db, "--out", out, "--json"],
    ],
    limitMs: 120_000,
  },
];

function assertNoCanary(where: string, text: string): void {
  const m = CANARY.exec(text);
  assert.equal(m, null, `canary in ${where}: …${m ? text.slice(Math.max(0, m.index - 120), m.index + 40) : ""}…`);
}

for (const [i, c] of CASES.entries())
  test(`canary secrets: ${c.name} leaves them on no output, in no store row, export or report`, async () => {
    const base = join(dir, String(i));
    const db = join(base, "runs.db");
    const out = join(base, "report");
    const logs = join(base, "logs");
    const r: CliRun = await runCli(c.args({ db, out, logs }), { limitMs: c.limitMs });
    assert.equal(r.killed, false, `ran past ${c.limitMs} ms\n${r.stderr}`);
    assert.ok(r.code === 0 || r.code === 1, `exit ${r.code}\n${r.stderr}`);
    assert.doesNotMatch(r.stderr, STACK);
    assertNoCanary("stdout", r.stdout);
    assertNoCanary("stderr", r.stderr);
    if (r.stdout.trimStart().startsWith("{")) JSON.parse(r.stdout);
    // The secrets are still shown as present, only their values hidden.
    assert.match(r.stdout + r.stderr, /\[redacted\]/);

    // The store, as bytes (the database and its WAL), and as `runs export` prints it.
    const s = openStore(db);
    const ids = s.listRuns({}).map((x) => x.id);
    s.close();
    assert.ok(ids.length >= 1, "no run stored");
    for (const f of filesUnder(base).filter((p) => p.includes("runs.db")))
      assertNoCanary(f, readFileSync(f).toString("latin1"));
    for (const id of ids)
      for (const format of ["json", "csv"]) {
        const e = await runCli(["runs", "export", id, "--format", format, "--db", db]);
        assert.equal(e.code, 0, e.stderr);
        assertNoCanary(`runs export ${format}`, e.stdout + e.stderr);
      }
    // Every report file and server log.
    const files = [...filesUnder(out), ...filesUnder(logs)];
    if (c.args({ db, out, logs }).includes("--out") && !c.name.startsWith("sweep lengths"))
      assert.ok(
        files.some((f) => f.endsWith("report.md")),
        "no report written",
      );
    for (const f of files) assertNoCanary(f, readFileSync(f).toString("latin1"));
  });

const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

test("a server's ESC/BEL in its model id and errors: no raw control byte in report.md, index.html or the terminal", async () => {
  const srv = await startFaultServer("escapes");
  try {
    const out = join(dir, "escapes-report");
    for (const json of [false, true]) {
      const r = await runCli(
        ["study", "--url", srv.url, "--quick", "--out", out, "--no-store", ...(json ? ["--json"] : [])],
        {
          limitMs: 60_000,
        },
      );
      assert.equal(r.killed, false, r.stderr);
      assert.doesNotMatch(r.stderr, STACK);
      assert.doesNotMatch(r.stdout, RAW_CONTROL, `stdout:\n${r.stdout.slice(0, 600)}`);
      assert.doesNotMatch(r.stderr, RAW_CONTROL, `stderr:\n${r.stderr.slice(0, 600)}`);
    }
    const md = readFileSync(join(out, "report.md"), "utf8");
    const html = readFileSync(join(out, "index.html"), "utf8");
    for (const [name, text] of [
      ["report.md", md],
      ["index.html", html],
    ] as const) {
      assert.doesNotMatch(text, RAW_CONTROL, `${name} holds a raw control character`);
      // The server's words are still there, made visible.
      assert.match(text, /\\x1b\\?\[2J/, `${name} lost the server's text`);
    }
    // JSON keeps the exact text, escaped by JSON itself.
    const res = JSON.parse(readFileSync(join(out, "results.json"), "utf8"));
    assert.ok(JSON.stringify(res).includes(JSON.stringify(ESC_PAYLOAD).slice(1, -1)), "results.json lost the payload");
  } finally {
    await srv.close();
  }
});

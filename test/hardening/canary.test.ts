// A canary secret planted in every way a secret enters bench, ab, sweep, tune, study and telemetry watch
// must be on no artefact, as given or URL-encoded: stdout, stderr, the run store's file and its -wal/-shm
// (while the run goes and after), `runs export` (JSON and CSV), result and records files, every report
// file and every server log. The forms: `--hf-token` and `--token` in `--server-cmd`, a key that starts
// with "-" (`--api-key -X`), `--env=HF_TOKEN=…`, an `hf_…` token and a `--hf-token` inside the quoted
// `sh -c '…'` script, `--api-key KEY` and `HF_TOKEN=…` in a variant, `--api-key` itself, a URL's password
// (`--base-url`, `--url`, `dcgm:` telemetry) and its query-string key. The servers are the embedded sim,
// started through `sh -c` (which drops the secret words before the sim sees them) or in this process
// for the URL forms, so each run is real and takes seconds.
import assert from "node:assert/strict";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  watch,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { after, before, test } from "node:test";
import { type SimHandle, startSim } from "../../src/sim/index.ts";
import { openStore } from "../../src/store/index.ts";
import { BIN, type CliRun, runCli, STACK } from "../helpers/cli.ts";
import { ESC_PAYLOAD, startFaultServer } from "../helpers/faults.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-canary-"));
let urlSim: SimHandle;
let port = 0;
before(async () => {
  urlSim = await startSim({ port: 0, speed: "zero", seed: 1 });
  port = Number(new URL(urlSim.url).port);
});
after(async () => {
  await urlSim?.close(0);
  rmSync(dir, { recursive: true, force: true });
});

// Each one different, so a leak says which path leaked; only the hf_ ones are token-shaped, so the rest
// can be found by structure alone. `=`, `+` and `~` are written differently once URL-encoded.
const C = {
  hfCmd: "hf_CANARYcmd7q2Wv9Lk3Zt8Rx",
  tokCmd: "CANARYtok-5d1f0e77",
  dashKey: "-CANARYdash-9c2e41",
  envEq: "CANARYenveq-51b7a0",
  shHf: "hf_CANARYsh4Kq8Vb2Xz7Mn1",
  shFlag: "CANARYshflag-0d3e88",
  apiKey: "CANARYapi-0b9e4c21",
  argKey: "CANARYarg-83aa7d10",
  envTok: "CANARYenv-a8c3b2f4",
  hfArg: "hf_CANARYarg4Jk8Pq1Ws6Nx",
  varEnvEq: "CANARYvareq-2f6c19",
  urlPass: "CANARYpw=+7f3a~x",
  queryKey: "CANARYq+4e1d=z",
  dcgmPass: "CANARYdcgm=6a0f+",
};
const CANARY = /CANARY/;
// Every planted value as given and in the forms a URL or a form writes it.
const FORMS = Object.values(C).flatMap((v) => [
  v,
  encodeURIComponent(v),
  new URLSearchParams({ v }).toString().slice(2),
  v.replace(/=/g, "%3D"),
]);

// The sim behind `sh -c`: the words after the script are its positional parameters, which it ignores,
// so the secret flags (and a variant's appended flags) stay in the command without reaching the sim.
// The script itself holds a token and a --hf-token for `true`, which ignores them.
const sim = (flags: string) =>
  `sh -c 'true --hf-token ${C.shFlag} HUB=${C.shHf}; exec ${process.execPath} ${BIN} sim --port "$PORT" ${flags}' sim`;
const SECRET_WORDS = `--token ${C.tokCmd} --hf-token ${C.hfCmd} --api-key ${C.dashKey} run --env=HF_TOKEN=${C.envEq}`;
const SERVER_CMD = `${sim("--speed zero --seed 1")} ${SECRET_WORDS}`;
// tune needs a decode time to rank (a zero-speed sim has none): the sim's own clock, 20× faster.
const TUNE_CMD = `${sim("--time-scale 20 --seed 1")} ${SECRET_WORDS}`;
const SECRET_VARIANT = `tok:HF_TOKEN=${C.envTok} --api-key ${C.argKey} --hf-token=${C.hfArg} --env=HF_TOKEN=${C.varEnvEq}`;
const baseUrl = () => `http://user:${C.urlPass}@127.0.0.1:${port}/?api_key=${encodeURIComponent(C.queryKey)}`;
const dcgm = () => `dcgm:http://u:${encodeURIComponent(C.dcgmPass)}@127.0.0.1:${port}/dcgm/metrics`;

const TSX_CACHE = join(tmpdir(), `tsx-${process.getuid?.() ?? 0}`);

function filesUnder(path: string): string[] {
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(path);
  } catch {
    return [];
  }
  if (st.isSymbolicLink()) return [];
  if (!st.isDirectory()) return [path];
  return readdirSync(path).flatMap((n) => filesUnder(join(path, n)));
}

interface Paths {
  db: string;
  out: string;
  logs: string;
  files: string;
}

interface Case {
  name: string;
  args: (o: Paths) => string[];
  limitMs: number;
  /** Whether it keeps a run in the store (telemetry watch does not). */
  stores?: boolean;
  /** Files it must write. */
  writes?: (o: Paths) => string[];
  /** Its working directory (default: the repository). */
  cwd?: (o: Paths) => string;
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
    writes: ({ out }) => [join(out, "report.md")],
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
    writes: ({ out }) => ["report.md", "index.html", "results.json"].map((f) => join(out, f)),
  },
  {
    name: "bench --base-url with a password and ?api_key=, dcgm telemetry with a password, result and records files",
    args: ({ db, files }) => [
      "bench",
      ...["--base-url", baseUrl(), "--api-key", C.apiKey, "--telemetry", dcgm()],
      ...["--num-prompts", "3", "--random-output-len", "4", "--warmup", "0", "--db", db, "--json"],
      ...["--save-result", join(files, "result.json"), "--records", join(files, "records.jsonl")],
    ],
    limitMs: 60_000,
    writes: ({ files }) => [join(files, "result.json"), join(files, "records.jsonl")],
  },
  {
    name: "bench --save-result (its default name, in the working directory)",
    args: ({ db }) => [
      "bench",
      ...["--base-url", baseUrl(), "--api-key", C.apiKey, "--telemetry", "none"],
      ...["--num-prompts", "2", "--random-output-len", "4", "--warmup", "0", "--db", db, "--save-result"],
    ],
    cwd: ({ files }) => files,
    limitMs: 60_000,
  },
  {
    name: "bench --request-rate 20,40 (a sweep) --json",
    args: () => [
      "bench",
      ...["--base-url", baseUrl(), "--api-key", C.apiKey, "--telemetry", "none", "--request-rate", "20,40"],
      ...["--num-prompts", "2", "--random-output-len", "4", "--warmup", "0", "--json"],
    ],
    limitMs: 60_000,
    stores: false,
  },
  {
    name: "study --url with a password and ?api_key=, dcgm telemetry with a password",
    args: ({ db, out }) => [
      "study",
      "--quick",
      ...["--url", baseUrl(), "--api-key", C.apiKey, "--telemetry", dcgm()],
      ...["--db", db, "--out", out, "--json"],
    ],
    limitMs: 120_000,
    writes: ({ out }) => ["report.md", "index.html", "results.json"].map((f) => join(out, f)),
  },
  {
    name: "telemetry watch dcgm:URL-with-a-password --json",
    args: () => ["telemetry", "watch", dcgm(), "--iterations", "2", "--interval", "100ms", "--json"],
    limitMs: 30_000,
    stores: false,
  },
];

function assertNoCanary(where: string, text: string): void {
  const m = CANARY.exec(text);
  assert.equal(m, null, `canary in ${where}: …${m ? text.slice(Math.max(0, m.index - 120), m.index + 40) : ""}…`);
  for (const f of FORMS) assert.ok(!text.includes(f), `canary ${f} in ${where}`);
}

/**
 * Reads every store file under `base` each time one changes while the run goes (the -wal holds each row
 * before a checkpoint moves it), so a secret written and later overwritten is still seen.
 */
function watchStore(base: string): { stop: () => { leaks: string[]; walSeen: boolean } } {
  const leaks: string[] = [];
  let walSeen = false;
  const check = () => {
    for (const f of filesUnder(base).filter((p) => /runs\.db/.test(p))) {
      let bytes: string;
      try {
        bytes = readFileSync(f).toString("latin1");
      } catch {
        continue;
      }
      if (f.endsWith("-wal") && bytes.length > 0) walSeen = true;
      const m = CANARY.exec(bytes) ?? FORMS.map((x) => ({ index: bytes.indexOf(x) })).find((x) => x.index >= 0);
      if (m) leaks.push(`${f} (during the run): …${bytes.slice(Math.max(0, m.index - 80), m.index + 40)}…`);
    }
  };
  const w = watch(base, () => check());
  return {
    stop: () => {
      w.close();
      return { leaks, walSeen };
    },
  };
}

for (const [i, c] of CASES.entries())
  test(`canary secrets: ${c.name} leaves them on no output, in no store row, export or report`, async () => {
    const base = join(dir, String(i));
    const p: Paths = {
      db: join(base, "runs.db"),
      out: join(base, "report"),
      logs: join(base, "logs"),
      files: join(base, "files"),
    };
    // HOME and TMPDIR inside `base`: the logs a run writes by default (~/.inferscope/logs, $TMPDIR/inferscope-logs) too.
    const env = { HOME: join(base, "home"), TMPDIR: join(base, "tmp") };
    for (const d of [p.files, env.HOME, env.TMPDIR]) mkdirSync(d, { recursive: true });
    // tsx's compile cache stays where it is (a cold one costs seconds per process); filesUnder does not follow it.
    if (existsSync(TSX_CACHE)) symlinkSync(TSX_CACHE, join(env.TMPDIR, basename(TSX_CACHE)));
    const watching = watchStore(base);
    const r: CliRun = await runCli(c.args(p), { limitMs: c.limitMs, env, cwd: c.cwd?.(p) });
    const during = watching.stop();
    assert.equal(r.killed, false, `ran past ${c.limitMs} ms\n${r.stderr}`);
    // tune on a loaded host may end inconclusive (exit 2): the claim here is about secrets, not tune's verdict.
    const okCodes = c.name.startsWith("tune") ? [0, 1, 2] : [0, 1];
    assert.ok(okCodes.includes(r.code ?? -1), `exit ${r.code}\n${r.stderr}`);
    assert.doesNotMatch(r.stderr, STACK);
    assertNoCanary("stdout", r.stdout);
    assertNoCanary("stderr", r.stderr);
    if (r.stdout.trimStart().startsWith("{"))
      for (const line of c.name.startsWith("telemetry watch") ? r.stdout.trim().split("\n") : [r.stdout])
        JSON.parse(line);
    for (const f of c.writes?.(p) ?? []) assert.ok(filesUnder(f).length === 1, `${f} not written`);
    if (c.cwd) assert.ok(filesUnder(c.cwd(p)).length > 0, "no file written in the working directory");

    if (c.stores !== false) {
      // The store while the run went (its -wal before each checkpoint), as bytes after it, and as `runs export` prints it.
      assert.deepEqual(during.leaks, []);
      assert.ok(during.walSeen, "the store's -wal was never seen while the run went");
      const s = openStore(p.db);
      const ids = s.listRuns({}).map((x) => x.id);
      s.close();
      assert.ok(ids.length >= 1, "no run stored");
      for (const f of filesUnder(base).filter((x) => x.includes("runs.db")))
        assertNoCanary(f, readFileSync(f).toString("latin1"));
      for (const id of ids)
        for (const format of ["json", "csv"]) {
          const e = await runCli(["runs", "export", id, "--format", format, "--db", p.db]);
          assert.equal(e.code, 0, e.stderr);
          assertNoCanary(`runs export ${format}`, e.stdout + e.stderr);
        }
    }
    // Every file the run wrote: reports, result and records files, server logs, the store.
    const written = filesUnder(base);
    if (c.args(p).includes("--server-cmd"))
      assert.ok(
        written.some((f) => f.endsWith(".log")),
        `no server log among ${written.join(" ")}`,
      );
    const texts = written.map((f) => readFileSync(f).toString("latin1"));
    for (const [k, f] of written.entries()) assertNoCanary(f, texts[k]!);
    // The secrets are still shown as present, only their values hidden (tune prints its command only
    // when it chooses a candidate; its report always has it).
    assert.ok(
      [r.stdout, r.stderr, ...texts].some((t) => t.includes("[redacted]")),
      "no [redacted] placeholder on any output",
    );
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

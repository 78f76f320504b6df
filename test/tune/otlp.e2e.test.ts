// `tune --otlp-receiver` as a user runs it: one receiver for the run, the embedded sim restarted as a
// real process per block with vLLM's span flags, each block's requests joined with its own spans. The
// server decode per token is checked against the sim's own truth (its model's decode step), which
// travels by another path than the spans.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { InterruptedError } from "../../src/errors.ts";
import { distribution } from "../../src/otlp/join.ts";
import { openStore } from "../../src/store/index.ts";
import { renderTune } from "../../src/tune/render.ts";
import { runTune, type TuneResult } from "../../src/tune/run.ts";
import type { BlockSpanSummary } from "../../src/tune/spans.ts";
import { BIN, runCli, STACK } from "../helpers/cli.ts";
import { type Hidden, trueTpotMs } from "../helpers/tune-sim.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-tune-otlp-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const PROMPTS = 4;
const OUT_LEN = 16;
// Two candidates, one block each: the baseline and NCCL_PROTO=LL (the seed profile: LL's decode is ~18 % faster).
const ARGS = [
  "tune",
  "--knob",
  "NCCL_PROTO=,LL",
  "--num-prompts",
  String(PROMPTS),
  "--random-output-len",
  String(OUT_LEN),
  "--warmup",
  "1",
  "--seed",
  "1",
  "--budget",
  "2",
];
const SEED: Hidden = { overrides: {}, acceptance: 0.7 };
// bench's OTLP end-to-end tolerance (test/otlp/bench-sim.test.ts).
const within = (got: number, want: number) => Math.abs(got - want) <= Math.max(1, 0.02 * Math.abs(want));

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const { port } = s.address() as { port: number };
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

function blocksOf(db: string, runId: string) {
  const s = openStore(db);
  try {
    const d = s.getRun(runId);
    return d.blocks.map((b) => ({
      candidate: b.variant,
      status: b.status,
      otlp: (b.summary as { otlp?: BlockSpanSummary } | null)?.otlp,
      requests: s.getRequests(runId, { blockId: b.id }).length,
      stored: d.summaries?.tune as TuneResult | undefined,
    }));
  } finally {
    s.close();
  }
}

describe("tune --otlp-receiver", () => {
  test("embedded sim at time-scale 1: every block joined with its own spans; server decode per token is the sim's truth", async () => {
    const db = join(dir, "a.db");
    const out = join(dir, "report");
    const r = await runCli(
      [
        ...ARGS,
        "--time-scale",
        "1",
        "--otlp-receiver",
        "0",
        "--json",
        "--db",
        db,
        "--log-dir",
        join(dir, "la"),
        "--out",
        out,
      ],
      { limitMs: 120_000 },
    );
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, STACK);
    const res = JSON.parse(r.stdout) as TuneResult;
    assert.ok(res.otlp, "the result has the span section");
    assert.match(res.otlp.serverFlags ?? "", /--otlp-traces-endpoint http:\/\/127\.0\.0\.1:\d+\/v1\/traces/);
    assert.equal(res.otlp.hint, null);
    // No unmatched spans, no stranger (the servers' probes are known), no receiver finding.
    assert.deepEqual(res.otlp.findings, []);
    for (const c of res.candidates) {
      const s = c.spans!;
      assert.ok(s, `${c.id} has no span join`);
      assert.equal(s.requests, PROMPTS * s.blocks);
      assert.ok(s.joinRate >= 0.99, `${c.id} joined ${s.joined} of ${s.requests}`);
      const truth = trueTpotMs(SEED, c.args, c.env, 32 + OUT_LEN / 2);
      const got = s.split.serverTpotMs!.p50;
      assert.ok(within(got, truth), `${c.id} server decode ${got} ms/token vs the sim's ${truth}`);
    }
    // Each block's own join, stored beside its requests.
    const blocks = blocksOf(db, res.runId);
    assert.equal(blocks.length, 2);
    for (const b of blocks) {
      assert.equal(b.status, "complete");
      assert.equal(b.requests, PROMPTS);
      assert.equal(b.otlp?.joined, PROMPTS, `block of ${b.candidate}: ${JSON.stringify(b.otlp?.findings)}`);
      assert.equal(b.otlp?.parts.serverTpotMs?.length, PROMPTS);
    }
    assert.deepEqual(blocks[0]!.stored?.otlp?.comparison, res.otlp.comparison, "the stored result has the split");
    // LL is the faster one, and its gain is in the server's decode.
    assert.equal(res.best?.id, "c1");
    assert.match(
      res.otlp.comparison ?? "",
      /^NCCL_PROTO=LL: −\d+\.\d\d ms\/token TPOT \(client, median\), all of it in server decode/,
    );
    const text = renderTune(res);
    assert.match(text, /Engine spans \(OTLP, receiver http:\/\/127\.0\.0\.1:\d+\)/);
    assert.match(text, /│ server decode\/token │ delivery\/token │/);
    assert.match(text, /│ c1 +│ 4\/4 \(100\.0 %\)/);
    const md = readFileSync(join(out, "report.md"), "utf8");
    assert.match(md, /## Where the time went \(engine spans\)/);
    assert.match(readFileSync(join(out, "index.html"), "utf8"), /<table id="tune-spans">/);
  });

  test("a server that sends no spans, only a malformed body: the tune completes, every record kept, both are findings", async () => {
    const db = join(dir, "b.db");
    const port = await freePort();
    // The sim as a --server-cmd: no engine the catalog knows, so no flags are given, and it sends nothing. Before
    // it starts, a body that is not protobuf goes to the receiver (answered 400).
    const bad = `fetch('http://127.0.0.1:${port}/v1/traces',{method:'POST',headers:{'content-type':'application/x-protobuf'},body:'not protobuf'}).then((r)=>process.exit(r.status===400?0:1))`;
    const cmd = `${process.execPath} -e "${bad}" && exec ${process.execPath} ${BIN} sim --profile glm5-8x-rtxpro6000-pcie --port {port} --time-scale 10`;
    const r = await runCli(
      [...ARGS, "--server-cmd", cmd, "--otlp-receiver", String(port), "--otlp-wait", "300ms", "--json", "--db", db],
      { limitMs: 120_000 },
    );
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, STACK);
    // The flags to give the engine by hand, printed even with --json.
    assert.match(
      r.stderr,
      /start the engine with vLLM: .*--otlp-traces-endpoint http:\/\/127\.0\.0\.1:\d+\/v1\/traces/,
    );
    const res = JSON.parse(r.stdout) as TuneResult;
    assert.equal(res.otlp?.serverFlags, null);
    assert.match(res.otlp?.hint ?? "", /--otlp-traces-endpoint/);
    const blocks = blocksOf(db, res.runId);
    assert.equal(blocks.length, 2);
    for (const b of blocks) {
      assert.equal(b.status, "complete");
      assert.equal(b.requests, PROMPTS, "every record kept");
      assert.equal(b.otlp?.joined, 0);
    }
    const has = (re: RegExp) =>
      assert.ok(
        res.otlp!.findings.some((f) => re.test(f)),
        `${re}: ${res.otlp!.findings.join("\n")}`,
      );
    has(/^block 1 \(c0\): no-spans: the engine sent no spans/);
    // Each server start's bad body is a finding of the block that follows it.
    has(/^block 1 \(c0\): malformed \(400\): /);
    has(/^block 2 \(c1\): malformed \(400\): /);
    // After a whole block and its wait with nothing, the next block does not wait again.
    assert.ok(
      res.otlp!.findings.some((f) => /^block 2 .*did not wait/.test(f)),
      res.otlp!.findings.join("\n"),
    );
    for (const c of res.candidates) assert.equal(c.spans?.joinRate, 0);
    assert.equal(res.otlp?.comparison, null);
  });

  test("bad values are usage errors naming the flag; a busy port is refused before anything is stored", async () => {
    const cases: Array<[string[], RegExp]> = [
      [["--otlp-receiver", "nope"], /--otlp-receiver: expected \[HOST:\]PORT/],
      [["--otlp-receiver", "70000"], /--otlp-receiver: expected \[HOST:\]PORT/],
      [["--otlp-grpc-receiver", "4317"], /--otlp-grpc-receiver goes with --otlp-receiver/],
      [["--otlp-receiver", "0", "--otlp-grpc-receiver", "x:y"], /--otlp-grpc-receiver: expected/],
      [["--otlp-wait", "1s"], /--otlp-wait goes with --otlp-receiver/],
      [["--otlp-receiver", "0", "--otlp-wait", "soon"], /--otlp-wait/],
      [["--otlp-receiver", "0"], /--otlp-receiver on the embedded sim needs --time-scale 1 \(got 10\)/],
    ];
    for (const [extra, want] of cases) {
      const r = await runCli([...ARGS, ...extra, "--db", join(dir, "c.db")], { limitMs: 30_000 });
      assert.equal(r.code, 2, `${extra.join(" ")}: ${r.stderr}`);
      assert.match(r.stderr, want);
      assert.doesNotMatch(r.stderr, STACK);
    }
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", resolve));
    try {
      const port = (busy.address() as { port: number }).port;
      const db = join(dir, "d.db");
      const r = await runCli([...ARGS, "--time-scale", "1", "--otlp-receiver", String(port), "--db", db], {
        limitMs: 30_000,
      });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /--otlp-receiver: cannot listen on 127\.0\.0\.1:\d+ \(address in use\)/);
      const s = openStore(db);
      try {
        assert.deepEqual(s.listRuns({ kind: "tune" }), []);
      } finally {
        s.close();
      }
    } finally {
      busy.close();
    }
  });

  test("--resume keeps the stored split of the blocks done before, and joins the new ones with a receiver of its own", async () => {
    const db = join(dir, "e.db");
    const base = {
      knobs: ["NCCL_PROTO=,LL"],
      timeScale: 1,
      workload: { numPrompts: PROMPTS, randomInputLen: 32, randomOutputLen: OUT_LEN, warmup: 1 },
      seed: 1,
      budget: { starts: 2 },
      db,
      logDir: join(dir, "le"),
    };
    const ac = new AbortController();
    let runId = "";
    await assert.rejects(
      runTune({
        ...base,
        otlp: { host: "127.0.0.1", port: 0 },
        signal: ac.signal,
        onProgress: (e) => {
          runId = e.runId;
          if (e.phase === "block-done") ac.abort(new InterruptedError("interrupted (SIGINT)"));
        },
      }),
      InterruptedError,
    );
    const first = blocksOf(db, runId).find((b) => b.status === "complete")!;
    assert.equal(first.otlp?.joined, PROMPTS);
    // Resumed without the flag: the run's own receiver spec (port 0) listens again.
    const r = await runTune({ resume: runId, db, logDir: join(dir, "le") });
    assert.equal(r.status, "complete");
    const after_ = blocksOf(db, runId).filter((b) => b.status === "complete");
    assert.equal(after_.length, 2);
    assert.deepEqual(after_[0]!.otlp, first.otlp, "the first block's stored split is left as it was");
    const c0 = r.candidates.find((c) => c.id === first.candidate)!.spans!;
    assert.equal(c0.joined, PROMPTS);
    assert.deepEqual(c0.split.serverTpotMs, distribution(first.otlp!.parts.serverTpotMs!));
    const other = r.candidates.find((c) => c.id !== first.candidate)!.spans!;
    assert.equal(other.joined, PROMPTS, "the resumed block is joined too");
    assert.match(r.otlp?.serverFlags ?? "", /--otlp-traces-endpoint/);
  });
});

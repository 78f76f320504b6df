// Values that used to be accepted silently, or failed late with a raw message, now refused before any
// work: exit 2, one error line naming the flag (and the path, for files), no stack trace, no "internal
// error". Each case ran on the code before this change and did not do that (see the issue's findings).
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { headerFlags, headerValueFlag } from "../../src/cli/common.ts";
import { UsageError } from "../../src/errors.ts";
import { checkInputFile, checkRunStore } from "../../src/input-file.ts";
import { checkParallelism, inputFromOptions, ncclListFlag } from "../../src/model/options.ts";
import { startSim } from "../../src/sim/index.ts";
import { assertRefused, runCli } from "../helpers/cli.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-validation-"));
const sub = join(dir, "a-directory");
mkdirSync(sub);
const file = join(dir, "a-file.txt");
writeFileSync(file, "not a directory\n");
const textFile = join(dir, "notes.txt");
writeFileSync(textFile, "hello\n");
const dead = "http://127.0.0.1:1";
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
const isDir = (flag: string) => new RegExp(`${esc(flag)} ${esc(sub)}: is a directory`);
const MODEL = ["--model", "glm-5", "--gpu", "rtx-pro-6000", "--quant", "nvfp4"];

// [what, argv, first error line must match]
const CASES: Array<[string, string[], RegExp]> = [
  // The parallel layout and NCCL lists.
  [
    "model --tp 3 --gpus 8",
    ["model", "predict", ...MODEL, "--gpus", "8", "--tp", "3"],
    /--tp 3 does not divide --gpus 8/,
  ],
  ["study --tp 3 --gpus 8", ["study", "--url", dead, "--gpus", "8", "--tp", "3"], /--tp 3 does not divide --gpus 8/],
  [
    "model --nccl-proto WAT",
    ["model", "predict", ...MODEL, "--gpus", "8", "--tp", "8", "--nccl-proto", "WAT"],
    /--nccl-proto "WAT": unknown protocol "WAT" \(one of LL, LL128, Simple\)/,
  ],
  [
    "model --nccl-algo Ring,Star",
    ["model", "predict", ...MODEL, "--gpus", "8", "--tp", "8", "--nccl-algo", "Ring,Star"],
    /--nccl-algo "Ring,Star": unknown algorithm "Star"/,
  ],
  [
    "model whatif --scenario proto=WAT",
    ["model", "whatif", ...MODEL, "--gpus", "8", "--tp", "8", "--scenario", "nvlink+proto=WAT"],
    /--scenario proto=WAT "WAT": unknown protocol "WAT"/,
  ],
  [
    "ab --variant with NCCL_PROTO=WAT",
    ["ab", "--server-cmd", "true", "--variant", "a:", "--variant", "b:NCCL_PROTO=WAT"],
    /--variant b:NCCL_PROTO=WAT: NCCL_PROTO "WAT": unknown protocol/,
  ],
  [
    "study --variant with NCCL_PROTO=WAT",
    ["study", "--variant", "a:", "--variant", "b:NCCL_PROTO=WAT"],
    /--variant b: NCCL_PROTO "WAT"/,
  ],
  // Study flags resolved at once, as the model phase will (they used to cost 20 s and exit 0).
  ["study --model wat", ["study", "--url", dead, "--model", "wat"], /--model: unknown model "wat"/],
  ["study --quant wat", ["study", "--url", dead, "--quant", "wat"], /--quant: unknown quantization "wat"/],
  [
    "study --interconnect wat",
    ["study", "--url", dead, "--interconnect", "wat"],
    /--interconnect: unknown interconnect "wat"/,
  ],
  ["study --gpu wat", ["study", "--url", dead, "--gpu", "wat"], /--gpu "wat" is not in the catalog/],
  ["study --engine wat", ["study", "--url", dead, "--engine", "wat"], /unknown --engine "wat"/],
  [
    "model --model a/missing-path",
    ["model", "predict", "--model", "nope/none", "--gpu", "rtx-pro-6000"],
    /--model nope\/none: no such file or directory, and not a catalog model/,
  ],
  // Flags that only mean something with another.
  ["study --profiler-dir without --url", ["study", "--profiler-dir", sub], /--profiler-dir needs --url/],
  [
    "study --server-cmd with --profiler-dir",
    ["study", "--server-cmd", "true", "--profiler-dir", sub],
    /--profiler-dir needs --url/,
  ],
  // The simulator's listen address and profiler directory.
  ["sim --host 999.1.1.1", ["sim", "--port", "0", "--host", "999.1.1.1"], /--host 999\.1\.1\.1 is not an IP address/],
  [
    "sim --host 999.1.1.1 --allow-remote",
    ["sim", "--port", "0", "--host", "999.1.1.1", "--allow-remote"],
    /--host 999\.1\.1\.1 is not an IP address/,
  ],
  [
    "sim --profiler-dir naming a file",
    ["sim", "--port", "0", "--profiler-dir", file],
    new RegExp(`--profiler-dir ${esc(file)}: is a file, not a directory`),
  ],
  // Header values and URL schemes: exit 2 with the flag, not exit 3 with undici's words.
  [
    "metrics --header with a CRLF",
    ["metrics", "scrape", `${dead}/metrics`, "--header", "X-A: b\r\nX-Injected: c"],
    /--header: the value holds a line break \(\\r\)/,
  ],
  [
    "metrics --header with a bad name",
    ["metrics", "scrape", `${dead}/metrics`, "--header", "X A: b"],
    /--header: "X A" is not a header name/,
  ],
  [
    "bench --api-key with a newline",
    ["bench", "--base-url", dead, "--api-key", "sk-abcd\nX-Injected: 1"],
    /--api-key: the value holds a line break \(\\n\)/,
  ],
  [
    "trace capture ftp://",
    ["trace", "capture", "ftp://127.0.0.1:1", "--dir", sub],
    /ftp:\/\/127\.0\.0\.1:1 is not an http\(s\) URL/,
  ],
  [
    "trace capture --timeout abc",
    ["trace", "capture", dead, "--dir", sub, "--timeout", "abc"],
    /--timeout: not a duration/,
  ],
  // A directory where a file is expected, in every place that reads one.
  [
    "model --model DIR (no config.json)",
    ["model", "predict", "--model", sub, "--gpu", "rtx-pro-6000"],
    /--model .*: is a directory without config\.json/,
  ],
  ["model --hardware DIR", ["model", "predict", ...MODEL, "--hardware", sub], isDir("--hardware")],
  ["model --topo DIR", ["model", "predict", ...MODEL, "--topo", sub], isDir("--topo")],
  ["model --calibration DIR", ["model", "predict", ...MODEL, "--calibration", sub], isDir("--calibration")],
  ["model fit --measurements DIR", ["model", "fit", ...MODEL, "--measurements", sub], isDir("--measurements")],
  [
    "bench --dataset-path DIR",
    ["bench", "--base-url", dead, "--dataset-name", "sharegpt", "--dataset-path", sub],
    isDir("--dataset-path"),
  ],
  ["bench --db DIR", ["bench", "--base-url", dead, "--db", sub], isDir("--db")],
  [
    "bench --db on a text file",
    ["bench", "--base-url", dead, "--db", textFile],
    /--db .*: not a run store \(not an SQLite database\)/,
  ],
  ["ab --db DIR", ["ab", "--variant", `a=${dead}`, "--variant", `b=${dead}`, "--db", sub], isDir("--db")],
  ["sweep --db DIR", ["sweep", "lengths", "--url", dead, "--db", sub], isDir("--db")],
  ["study --db DIR", ["study", "--url", dead, "--db", sub, "--out", join(dir, "rep")], isDir("--db")],
  ["study --hardware DIR", ["study", "--url", dead, "--hardware", sub, "--out", join(dir, "rep")], isDir("--hardware")],
  ["report --db DIR", ["report", "x", "--db", sub], isDir("--db")],
  ["report --db missing", ["report", "x", "--db", join(dir, "none.db")], /--db .*none\.db: no run store here/],
  ["runs show --db DIR", ["runs", "show", "x", "--db", sub], isDir("--db")],
  ["sim --profile-file DIR", ["sim", "--port", "0", "--profile-file", sub], isDir("--profile-file")],
  ["trace DIR", ["trace", sub], new RegExp(`${esc(sub)}: is a directory; give a trace file`)],
  ["trace --rules DIR", ["trace", "--rules", sub, file], isDir("--rules")],
  ["trace --capture DIR", ["trace", file, "--capture", sub], isDir("--capture")],
  ["trace capture --rules DIR", ["trace", "capture", dead, "--dir", sub, "--rules", sub], isDir("--rules")],
  ["trace capture --dir FILE", ["trace", "capture", dead, "--dir", file], /--dir .*: is a file, not a directory/],
  ["trace nccl DIR", ["trace", "nccl", sub], new RegExp(`${esc(sub)}: is a directory`)],
  ["trace topo DIR", ["trace", "topo", sub], new RegExp(`${esc(sub)}: is a directory`)],
  // The flags the user typed, not the bench engine's.
  ["sweep concurrency without --levels", ["sweep", "concurrency", "--url", dead], /sweep concurrency needs --levels/],
  ["sweep rate --levels 0", ["sweep", "rate", "--url", dead, "--levels", "0"], /--levels: 0 is not a request rate > 0/],
  ["sweep --url ftp://", ["sweep", "rate", "--url", "ftp://x", "--levels", "1"], /--url is not an http\(s\) URL/],
];

describe("refused before any work, naming the flag", { concurrency: 4 }, () => {
  for (const [what, args, msg] of CASES)
    test(what, async () => {
      const r = await runCli([...args], { limitMs: 30_000, cwd: dir });
      const detail = `${what}\n--- stderr\n${r.stderr}\n--- stdout\n${r.stdout.slice(0, 400)}`;
      assertRefused(r, msg, detail);
      assert.doesNotMatch(r.stderr, /internal error|EISDIR|undici|getaddrinfo/, detail);
      // Nothing started: the sweep names no bench flag, no server line, no run saved.
      assert.doesNotMatch(r.stderr, /--base-url|--rates\b|saved in run/, detail);
      assert.doesNotMatch(r.stdout, /listening on/, detail);
      assert.deepEqual(r.leftovers, [], detail);
    });
});

test("trace capture --json and --steps-by reach the subcommand (the parent no longer swallows them)", async () => {
  const r = await runCli(["trace", "nccl", join("test", "trace", "fixtures", "nccl-allreduce-2022.txt"), "--json"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout).layout, "2022");
});

test("--model takes a Hugging Face id from the catalog although it has a slash", async () => {
  const r = await runCli([
    "model",
    "predict",
    ...MODEL.slice(2),
    "--model",
    "zai-org/GLM-5",
    "--gpus",
    "8",
    "--tp",
    "8",
    "--json",
  ]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout).architecture.name, "glm-5");
});

test("NCCL_PROTO / NCCL_ALGO are parsed as NCCL does: lists, any case, ^, per-collective entries", () => {
  // Plain lists pass as written (reports show them); per-collective ones give the all-reduce's part.
  assert.equal(ncclListFlag("--nccl-proto", "LL"), "LL");
  assert.equal(ncclListFlag("--nccl-proto", "simple,ll128"), "simple,ll128");
  assert.equal(ncclListFlag("--nccl-proto", "^LL128"), "^LL128");
  assert.equal(ncclListFlag("--nccl-proto", "^LL128;allreduce:LL"), "LL");
  assert.equal(ncclListFlag("--nccl-proto", "LL,Simple;allreduce:^LL"), "^LL");
  assert.equal(ncclListFlag("--nccl-proto", "allgather:Simple"), undefined, "the all-reduce stays on auto");
  assert.equal(ncclListFlag("--nccl-algo", "ring;AllReduce:tree,ring"), "Tree,Ring");
  assert.equal(ncclListFlag("--nccl-algo", "NVLSTree,PAT"), "NVLSTree,PAT");
  for (const [v, why] of [
    ["WAT", /unknown protocol "WAT"/],
    ["LL;LL128", /every entry after the first needs a collective prefix/],
    ["allgahter:LL", /unknown collective "allgahter"/],
    ["LL, Simple", /has spaces/],
    ["^", /names nothing/],
    [";", /empty/],
    ["allreduce:LL:Simple", /more than one ":"/],
  ] as const)
    assert.throws(
      () => ncclListFlag("--nccl-proto", v),
      (e: unknown) =>
        e instanceof UsageError && why.test((e as Error).message) && /--nccl-proto/.test((e as Error).message),
      v,
    );
  // The model sees the all-reduce list through inputFromOptions.
  const i = inputFromOptions({
    model: "glm-5",
    gpu: "rtx-pro-6000",
    gpus: "8",
    tp: "8",
    ncclProto: "^LL128;allreduce:LL",
  });
  assert.equal(i.ncclProto, "LL");
});

test("the parallel layout: TP × PP must divide the GPU count and TP × PP × DP fit in it", () => {
  checkParallelism({ tp: 4, gpus: 8 });
  checkParallelism({ tp: 4, dp: 2, gpus: 8 });
  checkParallelism({ tp: 8 });
  assert.throws(
    () => checkParallelism({ tp: 3, gpus: 8 }),
    /--tp 3 does not divide --gpus 8: 2 GPU\(s\) would be left idle/,
  );
  assert.throws(() => checkParallelism({ tp: 4, pp: 2, gpus: 12 }), /TP 4 × PP 2 = 8 GPUs per replica does not divide/);
  assert.throws(() => checkParallelism({ tp: 4, dp: 4, gpus: 8 }), /TP 4 × PP 1 × DP 4 = 16 GPUs, but --gpus is 8/);
  assert.throws(
    () => checkParallelism({ tp: 3, gpus: 8, gpusFrom: "--hardware" }),
    (e: unknown) =>
      /--hardware 8/.test((e as Error).message) && /--gpus 3 \(or 6 with --dp 2\)/.test((e as UsageError).hint ?? ""),
  );
});

test("header values: CR, LF and controls refused with the flag; tabs and ordinary text pass", () => {
  assert.equal(headerValueFlag("--api-key", "sk-abc\tdef"), "sk-abc\tdef");
  assert.equal(headerValueFlag("--api-key", undefined), undefined);
  assert.throws(() => headerValueFlag("--api-key", "a\r\nb"), /--api-key: the value holds a line break/);
  assert.throws(
    () => headerValueFlag("--api-key", "a\x00b"),
    /--api-key: the value holds a control character \(\\x00\)/,
  );
  assert.deepEqual(headerFlags("--header", ["Authorization: Bearer x", "X-A:b"]), {
    authorization: "Bearer x",
    "x-a": "b",
  });
  assert.throws(() => headerFlags("--header", ["nocolon"]), /expected "Name: value"/);
});

test("input files and run stores: a directory, a missing file and a non-store file are named", () => {
  checkInputFile("--x", file);
  checkInputFile("--x", "-");
  assert.throws(() => checkInputFile("--x", sub, "prompts file"), isDir("--x"));
  assert.throws(() => checkInputFile("--x", join(dir, "none")), /--x .*none: no such file or directory/);
  checkRunStore("--db", join(dir, "new", "runs.db"));
  assert.throws(() => checkRunStore("--db", join(file, "runs.db")), /not a directory/);
  assert.throws(() => checkRunStore("--db", textFile), /not a run store \(not an SQLite database\)/);
  assert.throws(() => checkRunStore("--db", join(dir, "none.db"), { mustExist: true }), /no run store here/);
});

test("startSim refuses a bad host and a profiler 'directory' that is a file at start, not at /stop_profile", async () => {
  await assert.rejects(startSim({ host: "999.1.1.1", port: 0, warmup: false }), /--host 999\.1\.1\.1 is not an IP/);
  await assert.rejects(
    startSim({ port: 0, warmup: false, profilerDir: file }),
    new RegExp(`--profiler-dir ${esc(file)}: is a file, not a directory`),
  );
  await assert.rejects(
    startSim({ port: 0, warmup: false, env: { VLLM_TORCH_PROFILER_DIR: file } }),
    /\$VLLM_TORCH_PROFILER_DIR .*: is a file/,
  );
  // A missing profiler directory is made, as vLLM does.
  const fresh = join(dir, "traces", "here");
  const sim = await startSim({ port: 0, warmup: false, profilerDir: fresh });
  await sim.close(0);
});

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { UsageError } from "../../src/errors.ts";
import { resolveSim, type SimOptions, startSim } from "../../src/sim/index.ts";
import { debugRoute, isLoopbackAddress } from "../../src/sim/server.ts";
import { post } from "./util.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const bin = join(root, "bin", "inferscope.mjs");

/** Runs the CLI to completion (bounded by a timeout) and returns its exit code and output. */
function cli(args: string[], env: Record<string, string> = {}, timeoutMs = 60_000) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], { cwd: root, env: { ...process.env, ...env } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`timed out: inferscope ${args.join(" ")}\n${stderr}`));
    }, timeoutMs);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe("inferscope sim CLI", () => {
  test("--explain --json prints the hidden truth; NCCL_PROTO is read from the environment", async () => {
    const ll = await cli(["sim", "--explain", "--json"], { NCCL_PROTO: "LL" });
    assert.equal(ll.code, 0, ll.stderr);
    const a = JSON.parse(ll.stdout);
    // Without NCCL_PROTO this profile's automatic selection is Simple (model.test.ts).
    assert.equal(a.decode.allReduce.protocol, "LL");
    assert.ok(a.decode.stepMs > 17 && a.decode.stepMs < 17.3);
    assert.ok(Array.isArray(a.decode.components));
  });

  test("bad input: unknown flag, non-loopback host, bad profile file — clear message, exit 2, no stack", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sim-cli-"));
    const bad = join(dir, "p.yaml");
    writeFileSync(bad, "name: p\nmodel: 3\n");
    const flag = await cli(["sim", "--bogus"]);
    assert.equal(flag.code, 2);
    assert.match(flag.stderr, /unknown option '--bogus'/);
    const host = await cli(["sim", "--host", "0.0.0.0", "--port", "0", "--time-scale", "2"]);
    assert.equal(host.code, 2);
    assert.match(host.stderr, /--host 0\.0\.0\.0 is not a loopback address/);
    assert.match(host.stderr, /--allow-remote/);
    const prof = await cli(["sim", "--profile-file", bad, "--explain"]);
    assert.equal(prof.code, 2);
    assert.ok(prof.stderr.includes(bad), prof.stderr);
    assert.match(prof.stderr, /field "model"/);
    const blocks = await cli(["sim", "--num-gpu-blocks-override", "0", "--explain"]);
    assert.equal(blocks.code, 2);
    assert.match(blocks.stderr, /--num-gpu-blocks-override/);
    const bs = await cli(["sim", "--block-size", "x", "--explain"]);
    assert.equal(bs.code, 2);
    assert.match(bs.stderr, /--block-size/);
    for (const r of [flag, host, prof, blocks, bs]) assert.ok(!/\n\s+at /.test(r.stderr), "no stack trace");
  });

  test("a KV pool that cannot hold one max-length request is refused at start, as vLLM does (issue 42)", async () => {
    // Was: a request then waited forever (1 block), or "internal error: Invalid typed array length" (1e12).
    for (const [args, msg] of [
      [
        ["--num-gpu-blocks-override", "1"],
        /^inferscope: error: The model's max seq len \(32768\) is larger than the maximum number of tokens that can be stored in KV cache \(64\)\./m,
      ],
      [
        ["--num-gpu-blocks-override", "1e12"],
        /--num-gpu-blocks-override expects an integer in \[1, 4194304\], got "1e12"/,
      ],
    ] as Array<[string[], RegExp]>) {
      const r = await cli(["sim", "--port", "0", ...args]);
      assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
      assert.match(r.stderr, msg);
      assert.doesNotMatch(r.stderr, /internal error|\n\s+at /);
    }
    // The same checks on the library's path (startSim and --explain resolve the profile here).
    const refused = (o: SimOptions, re: RegExp) =>
      assert.throws(
        () => resolveSim(o),
        (e) => e instanceof UsageError && re.test(e.message),
      );
    refused({ overrides: { "engine.numGpuBlocks": 1e12 } }, /the sim keeps at most 4194304 KV blocks/);
    refused({ overrides: { "engine.blockSize": 1e12 } }, /the sim takes at most 65536 tokens a block/);
    refused({ numGpuBlocks: 512, specTokens: 2 }, /\(32768 \+ 2 draft tokens\) is larger than .* \(32768\)/);
    // Exactly one max-length request's worth resolves; so does a small pool under a small context.
    resolveSim({ numGpuBlocks: 512 });
    resolveSim({ numGpuBlocks: 1, overrides: { "model.maxModelLen": 64 } });
    // A clock so slow that one step outlasts Node's timers (was: TimeoutOverflowWarning in a loop).
    await assert.rejects(
      startSim({ port: 0, timeScale: 1e-9, warmup: false }),
      (e) => e instanceof UsageError && /--time-scale 1e-9 is below 0\.001/.test(e.message),
    );
  });

  test("--allow-remote warns what other hosts can reach; /debug answers loopback clients only", async () => {
    assert.ok(isLoopbackAddress("127.0.0.1") && isLoopbackAddress("::1") && isLoopbackAddress("::ffff:127.0.0.2"));
    assert.ok(
      !isLoopbackAddress("10.0.0.5") && !isLoopbackAddress("::ffff:192.168.1.2") && !isLoopbackAddress(undefined),
    );
    // The route the server answers a GET with, by peer (no test connects from another host).
    const routes = { "/debug/telemetry_truth": () => 1 };
    assert.equal(debugRoute(routes, "/debug/telemetry_truth", "::ffff:127.0.0.1"), routes["/debug/telemetry_truth"]);
    assert.equal(debugRoute(routes, "/debug/telemetry_truth", "192.168.1.2"), undefined);
    assert.equal(debugRoute(routes, "/debug/telemetry_truth", undefined), undefined);
    // Listens on every interface for a moment; only 127.0.0.1 is ever asked.
    const child = spawn(process.execPath, [bin, "sim", "--host", "0.0.0.0", "--allow-remote", "--port", "0"], {
      cwd: root,
    });
    try {
      let out = "";
      let err = "";
      const warning =
        /^warning: listening on 0\.0\.0\.0, beyond loopback: other hosts can reach \/v1\/\*, \/metrics, \/tokenize and \/dcgm\/metrics, with no key checked; \/debug\/\* \(the sim's truth\) answers loopback clients only$/m;
      // stderr is its own pipe: the warning may arrive after stdout's listening line, so it is awaited, not assumed.
      // Settles on the warning, or when the sim exits (the assertion below then shows what it printed).
      const warned = new Promise<void>((resolve) => {
        child.stderr.on("data", (d) => {
          err += d;
          if (warning.test(err)) resolve();
        });
        child.on("exit", () => resolve());
      });
      const port = await new Promise<string>((resolve, reject) => {
        child.stdout.on("data", (d) => {
          out += d;
          const m = /listening on http:\/\/0\.0\.0\.0:(\d+)/.exec(out);
          if (m) resolve(m[1]!);
        });
        child.on("exit", () => reject(new Error(`exited before listening: ${err}`)));
      });
      const debug = await fetch(`http://127.0.0.1:${port}/debug/telemetry_truth`);
      assert.equal(debug.status, 200);
      await debug.arrayBuffer();
      // Bounded: a sim that never warns fails here instead of hanging the suite.
      let bound: NodeJS.Timeout | undefined;
      await Promise.race([
        warned,
        new Promise<void>((resolve) => {
          bound = setTimeout(resolve, 10_000);
        }),
      ]).finally(() => clearTimeout(bound));
      assert.match(err, warning);
    } finally {
      child.kill("SIGKILL");
    }
  });

  test("one listening line; port in use is a clear error; SIGTERM drains open streams and exits 0", async () => {
    const child = spawn(process.execPath, [bin, "sim", "--port", "0", "--time-scale", "5"], { cwd: root });
    const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let out = "";
        child.stdout.on("data", (d) => {
          out += d;
          if (out.includes("\n")) resolve(out);
        });
        child.on("exit", () => reject(new Error("exited before listening")));
      });
      const m =
        /^inferscope sim listening on (http:\/\/127\.0\.0\.1:(\d+)) \(profile glm5-8x-rtxpro6000-pcie\)\n$/.exec(line);
      assert.ok(m, line);
      const [, url, port] = m!;
      const clash = await cli(["sim", "--port", port!]);
      assert.equal(clash.code, 2);
      assert.match(clash.stderr, new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use`));
      // A stream in flight when SIGTERM arrives still completes with [DONE].
      const pending = post(url!, "/v1/completions", {
        prompt: "drain",
        max_tokens: 60,
        ignore_eos: true,
        stream: true,
      });
      await new Promise((r) => setTimeout(r, 100));
      child.kill("SIGTERM");
      const r = await pending;
      assert.equal(r.data.at(-1), "[DONE]");
      assert.equal(r.data.length, 61);
      assert.equal(await exited, 0);
    } finally {
      child.kill("SIGKILL");
    }
  });
});

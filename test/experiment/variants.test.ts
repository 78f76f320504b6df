import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { request } from "undici";
import { type BlockRunner, DEFAULT_WORKLOAD, runWatchedBlock } from "../../src/experiment/blocks.ts";
import {
  buildCommand,
  parseVariant,
  processGroupMembers,
  shellSplit,
  startServer,
} from "../../src/experiment/variants.ts";

const tiny = `${process.execPath} test/experiment/fixtures/tiny-server.mjs`;

test("variant syntax: env, flags, both, unchanged, URL", () => {
  assert.deepEqual(parseVariant("base:"), { name: "base", env: {}, args: [] });
  assert.deepEqual(parseVariant("ll:NCCL_PROTO=LL"), { name: "ll", env: { NCCL_PROTO: "LL" }, args: [] });
  assert.deepEqual(parseVariant("eager:--enforce-eager"), { name: "eager", env: {}, args: ["--enforce-eager"] });
  assert.deepEqual(parseVariant("x:NCCL_PROTO=LL,NCCL_ALGO=Ring --enforce-eager --max-num-seqs 4"), {
    name: "x",
    env: { NCCL_PROTO: "LL", NCCL_ALGO: "Ring" },
    args: ["--enforce-eager", "--max-num-seqs", "4"],
  });
  assert.deepEqual(parseVariant("q:--chat-template 'a b' X=1"), {
    name: "q",
    env: {},
    args: ["--chat-template", "a b", "X=1"],
  });
  assert.deepEqual(parseVariant("prod=http://10.0.0.5:8000/"), {
    name: "prod",
    env: {},
    args: [],
    url: "http://10.0.0.5:8000",
  });
  assert.throws(() => parseVariant("nocolon"), /bad --variant "nocolon"/);
  assert.throws(() => parseVariant("a:notanassignment"), /neither ENV=VALUE nor a --flag/);
  assert.throws(() => parseVariant("a=notaurl"), /not a URL/);
  assert.throws(() => shellSplit("a 'b"), /unterminated/);
  assert.equal(buildCommand("serve --port {port}", 8123, ["--x", "a b"]), "serve --port 8123 --x 'a b'");
});

test("a server starts with the variant's env and args, logs are captured, stop empties its group", async () => {
  const s = await startServer({
    name: "ll",
    cmd: `${tiny} --grandchild`,
    env: { NCCL_PROTO: "LL", OPENAI_API_KEY: "sk-variants-HIDDEN-abcdef" },
    apiKey: "sk-variants-HIDDEN-abcdef",
    args: ["--enforce-eager"],
    graceMs: 300,
    readyTimeoutMs: 10_000,
  });
  assert.equal(s.model, "tiny");
  assert.equal(s.version, "0.0.0-tiny");
  assert.ok(s.readyMs > 0);
  const members = processGroupMembers(s.pgid);
  assert.ok(members && members.length >= 2, `group has the server and its grandchild: ${members}`);
  assert.match(s.logTail().join("\n"), /NCCL_PROTO=LL args=--grandchild --enforce-eager/);
  await s.stop();
  assert.deepEqual(processGroupMembers(s.pgid), []);
  assert.match(readFileSync(s.logFile, "utf8"), /SIGKILL to the process group/); // the grandchild ignores SIGTERM
  assert.match(readFileSync(s.logFile, "utf8"), /using api key \[redacted\]/);
  assert.doesNotMatch(readFileSync(s.logFile, "utf8") + s.logTail().join("\n"), /HIDDEN/);
});

test("SIGKILL after the grace period when the server ignores SIGTERM", async () => {
  const s = await startServer({ name: "stubborn", cmd: `${tiny} --ignore-term`, graceMs: 200, readyTimeoutMs: 10_000 });
  const t0 = performance.now();
  await s.stop();
  const took = performance.now() - t0;
  assert.ok(took >= 190 && took < 3000, `stop took ${took} ms`);
  assert.deepEqual(processGroupMembers(s.pgid), []);
  assert.equal(s.exit?.signal, "SIGKILL");
});

test("a server that dies at start: the error names the variant and shows its last log lines", async () => {
  await assert.rejects(
    startServer({ name: "broken", cmd: `${tiny} --crash-at-start`, readyTimeoutMs: 10_000 }),
    (e: Error) => {
      assert.match(e.message, /variant "broken": server exited \(code 3\) before it was ready/);
      assert.match(e.message, /CUDA out of memory \(simulated\)/);
      return true;
    },
  );
});

test("a server that never becomes healthy times out with its log; the port placeholder is filled", async () => {
  await assert.rejects(
    startServer({
      name: "slow",
      // A shell that prints at once and never listens: no start-up race with the timeout.
      cmd: "echo listening soon --port-was {port}; sleep 60",
      readyTimeoutMs: 700,
      graceMs: 200,
    }),
    (e: Error) => {
      assert.match(e.message, /variant "slow": server not ready after 1 s/);
      assert.match(e.message, /--port-was \d+/);
      return true;
    },
  );
});

test("an aborted start stops the server and rejects with the abort reason", async () => {
  const ac = new AbortController();
  const p = startServer({ name: "a", cmd: `${tiny} --slow-health 60000`, signal: ac.signal, graceMs: 200 });
  setTimeout(() => ac.abort(new Error("stop now")), 300);
  await assert.rejects(p, /stop now/);
});

test("a server that dies mid-block fails the block at once, naming the variant with its log", async () => {
  const s = await startServer({
    name: "dying",
    cmd: `${tiny} --die-at-request 4`,
    graceMs: 200,
    readyTimeoutMs: 10_000,
  });
  // A real runner: completions in a loop until told to stop.
  const runner: BlockRunner = async (baseUrl, _w, ctx) => {
    const requests = [];
    while (!ctx.signal.aborted) {
      try {
        const r = await request(`${baseUrl}/v1/completions`, { method: "POST", body: "{}", signal: ctx.signal });
        await r.body.text();
        requests.push(r.statusCode);
      } catch {
        break;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    return { requests: [], durationMs: 0, outputThroughput: 0, requestThroughput: requests.length };
  };
  const t0 = performance.now();
  await assert.rejects(
    runWatchedBlock(runner, s.url, DEFAULT_WORKLOAD, { variant: "dying", blockIndex: 3, server: s }),
    (e: Error) => {
      assert.match(e.message, /variant "dying": server died during block 3 \(exit code 1\)/);
      assert.match(e.message, /NCCL error \(simulated\)/);
      return true;
    },
  );
  assert.ok(performance.now() - t0 < 5000);
  await s.stop();
  assert.deepEqual(processGroupMembers(s.pgid), []);
});

test("no orphan even when inferscope itself is SIGKILLed: the group's watchdog kills the server", async () => {
  const child = spawn(process.execPath, ["--import", "tsx", "test/experiment/fixtures/starter.ts"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const pgid = await new Promise<number>((res, rej) => {
    let out = "";
    child.stdout.on("data", (c) => {
      out += c;
      if (out.includes("\n")) res(Number(out.trim()));
    });
    child.on("exit", (code) => rej(new Error(`starter exited early (${code})`)));
  });
  assert.ok((processGroupMembers(pgid) ?? []).length >= 3, "server, its grandchild and the watchdog");
  const exited = new Promise((r) => child.on("exit", r));
  child.kill("SIGKILL");
  await exited;
  // The watchdog acts as soon as its pipe closes; bounded wait for the kernel to deliver it.
  const deadline = Date.now() + 5000;
  while ((processGroupMembers(pgid) ?? []).length > 0 && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(processGroupMembers(pgid), []);
});

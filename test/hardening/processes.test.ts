// Server commands as users write them (VAR=value prefixes, quotes, {port} and $PORT), and no child left
// running on any way out: SIGINT, SIGTERM, a second signal, for the self-test's sim and started servers.
import assert from "node:assert/strict";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { startServer } from "../../src/experiment/variants.ts";
import { alive, childrenMatching, ROOT, runCli, STACK, waitFor } from "../helpers/cli.ts";

const TINY = join(ROOT, "test", "experiment", "fixtures", "tiny-server.mjs");
const node = process.execPath;

function socketCount(pid: number): number {
  let n = 0;
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`))
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith("socket:")) n++;
      } catch {}
  } catch {}
  return n;
}

for (const [what, cmd] of [
  ["a VAR=value prefix and {port}", `NCCL_PROTO=LL ${node} ${TINY} --port {port}`],
  ["two prefixes, one quoted, and $PORT", `NCCL_PROTO=LL EXTRA='a b' ${node} ${TINY} --port $PORT`],
  ["a prefix before a compound command", `NCCL_PROTO=LL ${node} ${TINY} --port {port} && true`],
] as const)
  test(`--server-cmd with ${what} starts the server with that environment`, async () => {
    const h = await startServer({ name: "env", cmd, readyTimeoutMs: 20_000, graceMs: 2000 });
    try {
      assert.ok(
        h.logTail(50).some((l) => l.includes("NCCL_PROTO=LL")),
        `the server did not see NCCL_PROTO=LL:\n${h.logTail(50).join("\n")}`,
      );
      if (!cmd.includes("&&")) {
        // exec'd in place (through env): the process we watch is the server itself.
        const argv = readFileSync(`/proc/${h.pid}/cmdline`, "utf8").split("\0");
        assert.equal(argv[0], node, argv.join(" "));
      }
    } finally {
      await h.stop();
    }
    assert.equal(alive(h.pid), false);
  });

for (const signals of [["SIGINT"], ["SIGTERM"], ["SIGINT", "SIGINT"]] as const)
  test(`bench --self-test stopped by ${signals.join(" then ")}: exit 130, a message, and its sim is gone`, async () => {
    let cli = 0;
    let sim = 0;
    const run = runCli(["bench", "--self-test"], {
      limitMs: 60_000,
      onStart: (pid) => {
        cli = pid;
      },
    });
    sim = await waitFor(() => childrenMatching(cli, / sim --port 0 /)[0], 30_000, "the self-test's sim");
    // Interrupt mid-measurement: the sim holds its listening socket and at least one client connection.
    await waitFor(() => (socketCount(sim) >= 2 ? true : undefined), 30_000, "the client to stream through the sim");
    for (const s of signals) process.kill(cli, s);
    const r = await run;
    assert.equal(r.code, 130, r.stderr);
    assert.match(r.stderr, new RegExp(`interrupted (again \\(|by )${signals[0]}`));
    assert.doesNotMatch(r.stderr, STACK);
    assert.deepEqual(r.leftovers, []);
    await waitFor(() => (alive(sim) ? undefined : true), 5000, `sim ${sim} to exit`);
  });

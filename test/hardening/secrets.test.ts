// What a finished run prints, as a user sees it: a secret in a variant's environment never reaches
// stdout (tables or JSON), and a bench whose every request failed reports no client saturation.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { DEFINITIONS } from "../../src/load/summarize.ts";
import { startSim } from "../../src/sim/index.ts";
import { BIN, runCli, STACK } from "../helpers/cli.ts";
import { startFaultServer } from "../helpers/faults.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-secrets-"));
const SECRET = "hf_abcdefghijklmnop123456";

test("ab --variant tok:HF_TOKEN=…: the token is on no output, stdout included (text and --json)", async () => {
  const sim = `${process.execPath} ${BIN} sim --port {port} --speed zero --seed 1`;
  for (const json of [false, true]) {
    const r = await runCli(
      [
        "ab",
        ...["--server-cmd", sim, "--variant", "base:", "--variant", `tok:HF_TOKEN=${SECRET}`],
        ...["--repeats", "1", "--num-prompts", "3", "--random-output-len", "8", "--warmup", "0"],
        ...["--ready-timeout", "60s", "--db", join(dir, `ab-${json}.db`), "--log-dir", join(dir, `logs-${json}`)],
        ...(json ? ["--json"] : []),
      ],
      { limitMs: 120_000 },
    );
    assert.equal(r.code, 0, r.stderr);
    assert.ok(!r.stdout.includes(SECRET), `secret on stdout:\n${r.stdout}`);
    assert.ok(!r.stderr.includes(SECRET), `secret on stderr:\n${r.stderr}`);
    // The variant is still shown, its value redacted.
    assert.match(r.stdout, /tok/);
    if (json) JSON.parse(r.stdout);
  }
});

test("bench where every request failed: exit 3, no spurious 'client SATURATED'", async () => {
  const s = await startFaultServer("sse-cut");
  try {
    const r = await runCli(["bench", "--base-url", s.url, "--num-prompts", "4"]);
    assert.equal(r.code, 3, r.stderr);
    assert.match(r.stderr, /every request .*failed/);
    assert.doesNotMatch(r.stdout, /SATURATED/i);
    assert.doesNotMatch(r.stderr, STACK);
  } finally {
    await s.close();
  }
});

test("bench --json and --save-result keep every metric definition (itl_token is data, not a credential)", async () => {
  const sim = await startSim({ port: 0, speed: "zero", seed: 1 });
  try {
    const saved = join(dir, "definitions.json");
    const r = await runCli([
      "bench",
      ...["--base-url", sim.url, "--num-prompts", "2", "--random-output-len", "4", "--warmup", "0"],
      ...["--db", join(dir, "definitions.db"), "--save-result", saved, "--json"],
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout).inferscope.definitions, DEFINITIONS);
    assert.deepEqual(JSON.parse(readFileSync(saved, "utf8")).inferscope.definitions, DEFINITIONS);
  } finally {
    await sim.close(0);
  }
});

// What a finished run prints, as a user sees it: a secret in a variant's environment never reaches
// stdout (tables or JSON), and a bench whose every request failed reports no client saturation.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
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

test("--api-key is hidden from ps once inferscope starts (and said so on stderr); --api-key-file and --api-key-env keep it off the command line", async () => {
  const KEY = "sk-PSKEYvisible12345";
  const sim = await startSim({ port: 0, speed: "zero", seed: 1 });
  try {
    // Read what `ps` reads while the run goes: at its first progress line the line is long rewritten.
    let cmdline = "";
    const run = (args: string[], env: Record<string, string> = {}) =>
      runCli(
        [
          "bench",
          ...["--base-url", sim.url, "--num-prompts", "3", "--random-output-len", "4", "--warmup", "0"],
          ...args,
        ],
        {
          env: { INFERSCOPE_PROGRESS: "1", OPENAI_API_KEY: "", ...env },
          when: {
            match: /\d+\/3|requests/,
            // biome-ignore lint/suspicious/noThenProperty: runCli's hook is named `then`
            then: (pid) => {
              cmdline = readFileSync(`/proc/${pid}/cmdline`, "latin1");
            },
          },
        },
      );
    const r = await run(["--api-key", KEY]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(cmdline.includes("--api-key"), `the command line was not read: ${JSON.stringify(cmdline)}`);
    assert.ok(!cmdline.includes(KEY), `the key is in /proc/PID/cmdline: ${JSON.stringify(cmdline)}`);
    assert.match(cmdline, /--api-key \[redacted\]/);
    assert.match(
      r.stderr,
      /note: --api-key on the command line can be read by other local users \(ps, \/proc\/PID\/cmdline\) until inferscope hid it/,
    );
    assert.equal(r.stderr.match(/note: --api-key/g)?.length, 1, "said once");
    // From a file (its first line) or a named variable: no note, nothing to hide.
    const file = join(dir, "key.txt");
    writeFileSync(file, `${KEY}\nignored\n`);
    for (const args of [
      ["--api-key-file", file],
      ["--api-key-env", "MY_KEY"],
    ]) {
      const x = await run(args, { MY_KEY: KEY });
      assert.equal(x.code, 0, x.stderr);
      assert.doesNotMatch(x.stderr, /note: --api-key/);
      assert.ok(!x.stderr.includes(KEY) && !x.stdout.includes(KEY));
    }
    // Refused, naming the flag: two ways at once, an unset variable, an empty file.
    writeFileSync(join(dir, "empty.txt"), "\n");
    for (const [args, re] of [
      [
        ["--api-key", KEY, "--api-key-env", "MY_KEY"],
        /give the API key one way, not 2 at once: --api-key, --api-key-env$/m,
      ],
      [["--api-key-env", "NOT_SET_ANYWHERE"], /--api-key-env NOT_SET_ANYWHERE: NOT_SET_ANYWHERE is not set/],
      [["--api-key-file", join(dir, "empty.txt")], /--api-key-file .*empty\.txt: its first line is empty/],
    ] as const) {
      const x = await run([...args]);
      assert.equal(x.code, 2, x.stderr);
      assert.match(x.stderr, re);
      assert.doesNotMatch(x.stderr, STACK);
    }
  } finally {
    await sim.close(0);
  }
});

// Issue 42's bounds, run the way the adversarial pass ran them: the real CLI, real files, loopback servers.
// Each case spun, hung or printed a false number before its fix (the old behaviour is in its name).
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { assertRefused, runCli } from "../helpers/cli.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-bounds-"));
const dead = "http://127.0.0.1:1";
const moon = (name: string, stamps: number[]) => {
  const p = join(dir, name);
  writeFileSync(
    p,
    stamps
      .map((t, i) => JSON.stringify({ timestamp: t, input_length: 10, output_length: 5, hash_ids: [i] }))
      .join("\n"),
  );
  return p;
};
const azure = join(dir, "az.csv");
writeFileSync(
  azure,
  "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.6805900,374,44\r\n2099-11-16 18:15:50.5281430,396,109",
);

describe("a schedule past one run's bound is refused before anything is sent (was: TimeoutOverflowWarning in a loop)", {
  concurrency: 2,
}, () => {
  const CASES: Array<[string, string[], RegExp]> = [
    [
      "a Mooncake row at 2^53 − 1 ms",
      ["--dataset-name", "mooncake", "--dataset-path", moon("big.jsonl", [0, 2 ** 53 - 1])],
      /big\.jsonl:2:1: this row is due 285,421 years after the replay starts/,
    ],
    [
      "a 25-day gap between rows",
      ["--dataset-name", "mooncake", "--dataset-path", moon("gap.jsonl", [0, 5, 25 * 86_400_000 + 5])],
      /gap\.jsonl:3:1: this row is due 25\.0 days after the replay starts/,
    ],
    ["an Azure row dated 2099", ["--dataset-name", "azure", "--dataset-path", azure], /az\.csv:3:1: .*76 years/],
    ["--request-rate 1e-9", ["--request-rate", "1e-9"], /--request-rate 1e-9 spreads 100 requests over 3,169 years/],
  ];
  for (const [what, args, msg] of CASES)
    test(what, async () => {
      const r = await runCli(["bench", "--base-url", dead, "--telemetry", "none", ...args], { limitMs: 20_000 });
      const detail = `${what}\n${r.stderr.slice(0, 2000)}`;
      assertRefused(r, msg, detail);
      assert.match(r.stderr, /past the 24\.9 days one run may last/, detail);
      assert.doesNotMatch(r.stderr, /TimeoutOverflowWarning/, detail);
      assert.ok(!r.killed, detail);
    });
});

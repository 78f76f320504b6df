// Invalid values refused before any work, each naming its flag (exit 2, no "internal error").
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { runCli, STACK } from "../helpers/cli.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-inputs-"));
const empty = join(dir, "empty.db");
writeFileSync(empty, "");
const u = "http://127.0.0.1:1/metrics";

const CASES: Array<[string, string[], RegExp]> = [
  ["--extra-body '[1]'", ["bench", "--extra-body", "[1]"], /--extra-body must be a JSON object/],
  ["--window 0s", ["metrics", "audit", u, "--window", "0s"], /--window must be longer than 0/],
  ["watch --interval 0", ["metrics", "watch", u, "--interval", "0"], /--interval must be longer than 0/],
  ["an audit URL with --prometheus", ["metrics", "audit", u, "--prometheus", "http://127.0.0.1:1"], /not both/],
  ["runs list --kind wat", ["runs", "list", "--kind", "wat", "--db", empty], /--kind: unknown run kind "wat"/],
  ["runs list --db on a missing file", ["runs", "list", "--db", join(dir, "none.db")], /no run store here/],
  ["runs list --db on an empty text file", ["runs", "list", "--db", empty], /not a run store \(an empty file\)/],
  [
    "sweep --url ftp://",
    ["sweep", "lengths", "--url", "ftp://x", "--db", join(dir, "s.db")],
    /--url is not an http\(s\) URL/,
  ],
];

for (const [what, args, msg] of CASES)
  test(`${what} is refused naming the flag`, async () => {
    const r = await runCli(args, { limitMs: 20_000 });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, msg);
    assert.doesNotMatch(r.stderr, STACK);
    assert.doesNotMatch(r.stderr, /internal error/);
  });

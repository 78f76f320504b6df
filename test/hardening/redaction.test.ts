// Secrets found by structure (names and positions), not by a pattern list, and a resume that takes them
// again: the pure parts, case by case.
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { abResumeConflicts, resolveABConfig } from "../../src/experiment/ab.ts";
import { sealTarget, unsealTarget } from "../../src/experiment/sealed.ts";
import { describeVariant, parseVariant } from "../../src/experiment/variants.ts";
import { DEFINITIONS } from "../../src/load/summarize.ts";
import {
  addSecret,
  isSecretName,
  REDACTED,
  redact,
  redactArgs,
  redactString,
  registerArgvSecrets,
  sealCommand,
  unsealCommand,
} from "../../src/secrets.ts";

test("names that carry credentials, and look-alikes that do not", () => {
  for (const n of [
    "--api-key",
    "--hf-token",
    "--token",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "WANDB_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "DB_PASSWORD",
    "Authorization",
    "X-Api-Key",
    "apiKey",
  ])
    assert.ok(isSecretName(n), n);
  for (const n of [
    "--max-num-batched-tokens",
    "--tokenizer",
    "--api-key-file",
    "NCCL_PROTO",
    "--num-speculative-tokens",
    "MAX_TOKENS",
  ])
    assert.ok(!isSecretName(n), n);
  // Our own records' plain fields.
  assert.ok(!isSecretName("key", { field: true }));
  assert.ok(!isSecretName("token", { field: true }));
  assert.ok(isSecretName("apiKey", { field: true }));
});

test("a flag's value is found as the next item, after =, in VAR=, in a header, and by its shape", () => {
  assert.deepEqual(redactArgs(["--api-key", "KEY", "--port", "8000"]), ["--api-key", REDACTED, "--port", "8000"]);
  assert.deepEqual(redactArgs(["--hf-token=abc123", "--tp", "2"]), [`--hf-token=${REDACTED}`, "--tp", "2"]);
  assert.deepEqual(redactArgs(["HF_TOKEN=abc123", "vllm"]), [`HF_TOKEN=${REDACTED}`, "vllm"]);
  assert.deepEqual(redactArgs(["-H", "Authorization: Bearer abc"]), ["-H", `Authorization: Bearer ${REDACTED}`]);
  assert.deepEqual(redactArgs(["--model", "hf_abcdefghij12"]), ["--model", REDACTED]);
  assert.deepEqual(redactArgs(["pip", "install", "hf_transfer"]), ["pip", "install", "hf_transfer"]);
  assert.deepEqual(redactArgs(["--max-num-batched-tokens", "512", "--tokenizer", "t"]), [
    "--max-num-batched-tokens",
    "512",
    "--tokenizer",
    "t",
  ]);
  // Stored apart from its flag in a record: the structure still finds it.
  const stored = redact({ args: ["--api-key", "KEY12345"], env: { HF_TOKEN: "zzzz9999", NCCL_PROTO: "LL" } });
  assert.deepEqual(stored, { args: ["--api-key", REDACTED], env: { HF_TOKEN: REDACTED, NCCL_PROTO: "LL" } });
});

test("free text: secrets by position, our hints and quotes left intact", () => {
  assert.equal(
    redactString("start: vllm --hf-token hf_abcdefgh1234 --tp 2"),
    `start: vllm --hf-token ${REDACTED} --tp 2`,
  );
  assert.equal(redactString("the server wants a key (--api-key …)"), "the server wants a key (--api-key …)");
  // The resume-mismatch message kept its closing quotes: a value's quote is not part of the value.
  const msg = `--variant is "tok: HF_TOKEN=${REDACTED}" in the run, "tok: HF_TOKEN=abcd1234 --x" now`;
  assert.equal(
    redactString(msg),
    `--variant is "tok: HF_TOKEN=${REDACTED}" in the run, "tok: HF_TOKEN=${REDACTED} --x" now`,
  );
  assert.equal(redactString("http://u:pw1234@h/x"), `http://u:${REDACTED}@h/x`);
});

test("a command is sealed word by word and unsealed exactly, quotes included", () => {
  const cmd = `HF_TOKEN='a b' vllm serve m --api-key s3cr3t --hf-token=hf_abcdefgh12 -H 'Authorization: Bearer xyz1'`;
  const s = sealCommand(cmd);
  assert.deepEqual(
    s.secrets.map((x) => x.value),
    ["a b", "s3cr3t", "hf_abcdefgh12", "xyz1"],
  );
  for (const v of ["a b", "s3cr3t", "hf_abcdefgh12", "xyz1"]) assert.ok(!s.shown.includes(v), s.shown);
  assert.match(s.shown, /vllm serve m --api-key \[redacted\]/);
  const back = unsealCommand(
    s.shown,
    s.secrets.map((x) => x.value),
  );
  assert.deepEqual(sealCommand(back).secrets, s.secrets);
});

test("resume: secrets come back from the same flags or the environment, checked by keyed hash", () => {
  const cmd = "serve --port {port} --hf-token hf_realtoken12345";
  const tok = parseVariant("tok:HF_TOKEN=envsecret1 --api-key argsecret1");
  const sealed = sealTarget(cmd, [parseVariant("base:"), tok]);
  const json = JSON.stringify(sealed);
  for (const v of ["hf_realtoken12345", "envsecret1", "argsecret1"]) assert.ok(!json.includes(v), json);
  assert.equal(sealed.sealed?.slots.length, 3);

  // Nothing given: a usage error naming each missing secret and where to give it.
  assert.throws(
    () => unsealTarget("ab-1", sealed, {}, {}),
    (e: Error) =>
      e.constructor.name === "UsageError" &&
      /--hf-token \(set HF_TOKEN in the environment or pass the same --server-cmd again\)/.test(e.message) &&
      /variant "tok": HF_TOKEN/.test(e.message) &&
      /variant "tok": --api-key \(set API_KEY/.test(e.message),
  );
  // From the environment.
  const env = { HF_TOKEN: "hf_realtoken12345", API_KEY: "argsecret1" };
  // HF_TOKEN names two secrets here (the command's and the variant's); give the variant again for its own.
  const r = unsealTarget("ab-1", sealed, { variants: [tok] }, env);
  assert.equal(r.serverCmd, cmd);
  assert.deepEqual(r.variants[1], tok);
  // The same flags again: accepted, though their display is the stored one.
  const again = unsealTarget("ab-1", sealed, { serverCmd: cmd, variants: [tok] }, {});
  assert.equal(again.serverCmd, cmd);
  // A different secret: refused, by hash.
  assert.throws(
    () =>
      unsealTarget(
        "ab-1",
        sealed,
        { serverCmd: cmd, variants: [parseVariant("tok:HF_TOKEN=other --api-key argsecret1")] },
        {},
      ),
    /variant "tok": HF_TOKEN: the --variant tok:… given is not the secret the run started with \(compared by keyed hash\)/,
  );
});

test("ab --resume with the same secret variant again is no conflict; its display hides the value", () => {
  const variants = ["base:", "tok:HF_TOKEN=hf_abcdefgh1234 --api-key KEY98765"];
  const stored = resolveABConfig({ serverCmd: "serve --port {port} --token t0k3n999", variants });
  const sealed = { ...stored, ...sealTarget(stored.serverCmd, stored.variants) };
  assert.deepEqual(abResumeConflicts({ variants, serverCmd: "serve --port {port} --token t0k3n999" }, sealed), []);
  const c = abResumeConflicts({ variants: ["base:", "tok:HF_TOKEN=x --other"] }, sealed);
  assert.equal(c.length, 1);
  assert.ok(!c[0]!.includes("hf_abcdefgh1234") && !c[0]!.includes("KEY98765"), c[0]);
  assert.equal(describeVariant(parseVariant(variants[1]!)), `tok: HF_TOKEN=${REDACTED} --api-key ${REDACTED}`);
});

test("a URL's password and credential query parameters are found, raw or in a telemetry source; a port is not a password", () => {
  const cases: Array<[string, string]> = [
    ["http://user:pa55word@127.0.0.1:8000/v1", `http://user:${REDACTED}@127.0.0.1:8000/v1`],
    ["http://127.0.0.1:8000/?api_key=QKEY123&x=1", `http://127.0.0.1:8000/?api_key=${REDACTED}&x=1`],
    [
      "http://h/p?token=T0K&sig=S1G#access_token=AT0",
      `http://h/p?token=${REDACTED}&sig=${REDACTED}#access_token=${REDACTED}`,
    ],
    ["dcgm:http://u:dcgmPW1@h:9400/metrics@200ms", `dcgm:http://u:${REDACTED}@h:9400/metrics@200ms`],
    ["dcgm:http://u:dcgmPW1@h:9400@200ms", `dcgm:http://u:${REDACTED}@h:9400@200ms`],
    ["https://ghp_abcDEF123456@github.com/x", `https://${REDACTED}@github.com/x`],
  ];
  for (const [text, want] of cases) assert.equal(redactString(text), want, text);
  // What is no secret stays as it was: a port before a sampling interval, a plain user name, other parameters.
  for (const text of [
    "dcgm:http://127.0.0.1:9400@200ms",
    "prometheus:http://h:9090/api?query=DCGM_FI_DEV_POWER_USAGE@1s",
    "ssh://git@github.com/x",
    "http://h/?max_tokens=16&model=m",
  ])
    assert.equal(redactString(text), text);
  // In a sentence the punctuation after the URL stays.
  assert.equal(redactString("see http://h/?api_key=X12345, then"), `see http://h/?api_key=${REDACTED}, then`);
});

test("--api-key -X: a value that starts with '-' is the flag's value; a long option is not", () => {
  assert.deepEqual(redactArgs(["--api-key", "-Xk3y9", "--port", "8000"]), ["--api-key", REDACTED, "--port", "8000"]);
  assert.deepEqual(redactArgs(["--api-key", "--port", "8000"]), ["--api-key", "--port", "8000"]);
  assert.equal(redactString("vllm serve m --api-key -Xk3y9 --tp 2"), `vllm serve m --api-key ${REDACTED} --tp 2`);
});

test("--env=NAME=VALUE and -e NAME=VALUE (docker, podman) hide the value of a secret name", () => {
  assert.deepEqual(redactArgs(["run", "--env=HF_TOKEN=abc12345", "-e", "WANDB_API_KEY=zz99", "--env=TP=2"]), [
    "run",
    `--env=HF_TOKEN=${REDACTED}`,
    "-e",
    `WANDB_API_KEY=${REDACTED}`,
    "--env=TP=2",
  ]);
  assert.equal(redactString("podman run --env=HF_TOKEN=abc12345 img"), `podman run --env=HF_TOKEN=${REDACTED} img`);
});

test("secrets inside a quoted sh -c script: sealed in place and unsealed exactly", () => {
  const cmd = `sh -c 'HF_TOKEN=hf_inScript7q2Wv9Lk3; exec vllm serve m --api-key "k e y" --hf-token=hf_second8Jk4Pq1W' x --port 1`;
  const s = sealCommand(cmd);
  assert.deepEqual(
    s.secrets.map((x) => x.value),
    ["hf_inScript7q2Wv9Lk3", "k e y", "hf_second8Jk4Pq1W"],
  );
  for (const v of ["hf_inScript7q2Wv9Lk3", "k e y", "hf_second8Jk4Pq1W"]) assert.ok(!s.shown.includes(v), s.shown);
  assert.equal(
    s.shown,
    `sh -c 'HF_TOKEN=${REDACTED}; exec vllm serve m --api-key "${REDACTED}" --hf-token=${REDACTED}' x --port 1`,
  );
  const back = unsealCommand(
    s.shown,
    s.secrets.map((x) => x.value),
  );
  // The same words as the original, quoting aside.
  assert.deepEqual(sealCommand(back).secrets, s.secrets);
  assert.equal(redactString(`sh -c "bash -c 'vllm --token T0k3n123'"`), `sh -c "bash -c 'vllm --token ${REDACTED}'"`);
});

test("a registered secret is cut out as given and URL-encoded", () => {
  addSecret("Reg1st=red+pw~");
  const text = `a Reg1st=red+pw~ b ${encodeURIComponent("Reg1st=red+pw~")} c Reg1st%3Dred+pw~ d`;
  assert.equal(redactString(text), `a ${REDACTED} b ${REDACTED} c ${REDACTED} d`);
});

test("a field of our own records is never blanked by its name alone; credential fields still are", () => {
  // Every metric definition (itl_token among them) and our own …Key fields survive.
  assert.deepEqual(redact(DEFINITIONS), DEFINITIONS);
  const ours = {
    itl_token: "itl.token.pooled",
    sourceKey: "vllm-blog-2025",
    arKey: "ar-1",
    cache_key: "k1",
    key: "ttft",
  };
  assert.deepEqual(redact(ours), ours);
  const creds = {
    apiKey: "plainword",
    api_key: "plainword",
    HF_TOKEN: "plainword",
    accessToken: "plainword",
    password: "a pass phrase",
    "x-api-key": "plainword",
    authorization: "Bearer abc",
    sessionToken: "plainword",
    // Shaped like a token, whatever the field's name.
    some_token: "hf_abcdEFG1234567",
  };
  for (const [k, v] of Object.entries(redact(creds))) assert.equal(v, REDACTED, k);
});

test("resume: a variant word holding two secrets and an environment URL's password come back in place", () => {
  const v = parseVariant(
    `two:DB_URL=http://u:dbPass99@h/x --env=HF_TOKEN=envEq1234 --script 'x --api-key K3y12345 --token T0k12345'`,
  );
  const sealed = sealTarget("serve --port {port}", [v]);
  const json = JSON.stringify(sealed);
  for (const x of ["dbPass99", "envEq1234", "K3y12345", "T0k12345"]) assert.ok(!json.includes(x), json);
  assert.equal(sealed.sealed?.slots.length, 4);
  assert.equal(sealed.variants[0]!.env.DB_URL, `http://u:${REDACTED}@h/x`);
  const back = unsealTarget("ab-1", sealed, { variants: [v] }, {});
  assert.deepEqual(back.variants[0], v);
  // A different value in the second slot of one word is refused by its own hash.
  const other = parseVariant(
    `two:DB_URL=http://u:dbPass99@h/x --env=HF_TOKEN=envEq1234 --script 'x --api-key K3y12345 --token other999'`,
  );
  assert.throws(
    () => unsealTarget("ab-1", sealed, { variants: [other] }, {}),
    /--token: the --variant two:… given is not the secret/,
  );
});

test("the keyed hashes' key stays out of the store: a stored seal cannot test a guess; the key file is 0600", () => {
  const keyDir = mkdtempSync(join(tmpdir(), "inferscope-key-"));
  const before = process.env.INFERSCOPE_SECRET_KEY_FILE;
  process.env.INFERSCOPE_SECRET_KEY_FILE = join(keyDir, "secret.key");
  try {
    const secret = "abc123";
    const sealed = sealTarget(`serve --port {port} --api-key ${secret}`, []);
    const stored = JSON.stringify(sealed);
    const hash = sealed.sealed!.slots[0]!.hash;
    // Everything hex the store holds, as an HMAC key, with and without everything else hex as a salt:
    // none gives the stored hash of the right guess.
    const hexes = [...new Set(stored.match(/[0-9a-f]{32,}/g) ?? [])];
    for (const k of hexes)
      for (const salt of ["", ...hexes]) {
        const h = createHmac("sha256", Buffer.from(k, "hex"))
          .update(Buffer.from(salt, "hex"))
          .update(secret)
          .digest("hex");
        assert.notEqual(h, hash, "the store alone confirms a guess");
      }
    assert.equal(statSync(process.env.INFERSCOPE_SECRET_KEY_FILE).mode & 0o777, 0o600);
    assert.ok(!stored.includes(readFileSync(process.env.INFERSCOPE_SECRET_KEY_FILE, "utf8").trim()));
    // The same user key checks the secret given again; a seal made under another key says so.
    assert.equal(
      unsealTarget("ab-1", sealed, { serverCmd: `serve --port {port} --api-key ${secret}` }, {}).serverCmd,
      `serve --port {port} --api-key ${secret}`,
    );
    process.env.INFERSCOPE_SECRET_KEY_FILE = join(keyDir, "other.key");
    assert.throws(
      () => unsealTarget("ab-1", sealed, {}, { API_KEY: secret }),
      /hashed with another key \(id [0-9a-f]{16}\) than this user's .*other\.key/,
    );
    // A run sealed when the key was kept beside the hashes still resumes.
    const legacy = {
      ...sealed,
      sealed: { hmacKeyHex: "11".repeat(32), slots: [] as Array<{ slot: string; hash: string }> },
    };
    legacy.sealed.slots.push({
      slot: sealed.sealed!.slots[0]!.slot,
      hash: createHmac("sha256", Buffer.from("11".repeat(32), "hex"))
        .update(secret)
        .digest("hex"),
    });
    assert.equal(
      unsealTarget("ab-1", legacy, {}, { API_KEY: secret }).serverCmd,
      `serve --port {port} --api-key ${secret}`,
    );
  } finally {
    if (before === undefined) delete process.env.INFERSCOPE_SECRET_KEY_FILE;
    else process.env.INFERSCOPE_SECRET_KEY_FILE = before;
    rmSync(keyDir, { recursive: true, force: true });
  }
});

test("every secret in our own command line is registered: cut out wherever its value turns up alone", () => {
  registerArgvSecrets([
    "bench",
    ...["--base-url", "http://u:Argv=Pw9@127.0.0.1:1/?api_key=ArgvQ7", "--api-key", "-ArgvDash1"],
    ...["--server-cmd", "sh -c 'HF_TOKEN=ArgvEnv2; exec vllm serve m'"],
  ]);
  // A server's error quoting a value without its flag or URL: only the registration knows it.
  assert.equal(
    redactString("denied: Argv=Pw9 Argv%3DPw9 ArgvQ7 -ArgvDash1 ArgvEnv2"),
    `denied: ${REDACTED} ${REDACTED} ${REDACTED} ${REDACTED} ${REDACTED}`,
  );
});

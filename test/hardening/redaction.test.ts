// Secrets found by structure (names and positions), not by a pattern list, and a resume that takes them
// again: the pure parts, case by case.
import assert from "node:assert/strict";
import { test } from "node:test";
import { abResumeConflicts, resolveABConfig } from "../../src/experiment/ab.ts";
import { sealTarget, unsealTarget } from "../../src/experiment/sealed.ts";
import { describeVariant, parseVariant } from "../../src/experiment/variants.ts";
import {
  isSecretName,
  REDACTED,
  redact,
  redactArgs,
  redactString,
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

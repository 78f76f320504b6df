// The per-user key of the keyed hashes a run keeps of its secrets (src/secrets.ts: a resume checks a
// secret given again against them). It lives outside every run store — ~/.inferscope/secret.key, mode
// 0600, or the file INFERSCOPE_SECRET_KEY_FILE names — so a store that is copied, shared or read by
// someone else holds hashes no guess can be tested against. (With the key beside the hashes, a short
// --api-key fell to brute force from the store alone.)
import { createHash, randomBytes } from "node:crypto";
import { closeSync, linkSync, mkdirSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { InputError } from "./errors.ts";

export interface SecretKey {
  key: Buffer;
  /** Names the key without telling it: stored with a run's hashes, so a resume with another key says so. */
  id: string;
  path: string;
}

/** Where this user's key is: INFERSCOPE_SECRET_KEY_FILE, else ~/.inferscope/secret.key. */
export function secretKeyPath(): string {
  return resolve(process.env.INFERSCOPE_SECRET_KEY_FILE || join(homedir(), ".inferscope", "secret.key"));
}

const loaded = new Map<string, SecretKey>();

/** This user's key, made on first use (32 random bytes; the file readable by its owner only). */
export function secretKey(): SecretKey {
  const path = secretKeyPath();
  const had = loaded.get(path);
  if (had) return had;
  const why = (e: unknown) => (e as NodeJS.ErrnoException).code ?? (e as Error).message;
  const hint = "set INFERSCOPE_SECRET_KEY_FILE to a file this user may create and read";
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT")
      throw new InputError(`cannot read the secret-hash key ${path} (${why(e)})`, { hint });
    text = create(path, hint, why);
  }
  if (process.platform !== "win32") {
    const mode = statSync(path).mode & 0o777;
    if (mode & 0o077)
      throw new InputError(
        `the secret-hash key ${path} is readable by others (mode ${mode.toString(8).padStart(4, "0")})`,
        { hint: `chmod 600 ${path}` },
      );
  }
  const hex = text.trim();
  if (!/^[0-9a-f]{64}$/.test(hex))
    throw new InputError(`${path} is not an inferscope secret-hash key (64 hex digits)`, {
      hint: `remove it to have a new one made (runs sealed with it then cannot be resumed), or ${hint}`,
    });
  const key = Buffer.from(hex, "hex");
  const k = {
    key,
    id: createHash("sha256").update("inferscope key id\0").update(key).digest("hex").slice(0, 16),
    path,
  };
  loaded.set(path, k);
  return k;
}

/** Writes a new key beside `path` and links it into place: of processes racing to make it, one wins, all read it. */
function create(path: string, hint: string, why: (e: unknown) => string): string {
  const tmp = `${path}.${process.pid}.tmp`;
  try {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    const fd = openSync(tmp, "wx", 0o600);
    try {
      writeSync(fd, `${randomBytes(32).toString("hex")}\n`);
    } finally {
      closeSync(fd);
    }
    try {
      linkSync(tmp, path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    return readFileSync(path, "utf8");
  } catch (e) {
    throw new InputError(`cannot create the secret-hash key ${path} (${why(e)})`, { hint });
  } finally {
    try {
      unlinkSync(tmp);
    } catch {}
  }
}

// npm run build: tsc compiles src/ to dist/ (ESM + .d.ts), then every non-TypeScript file under src/
// (sim profiles, the worker boot file, data added later) is copied beside the code that reads it, and
// the compiled model fits the measurement corpus once: dist/model/priors-fit.json, stamped with a hash
// of the corpus and the fit's code, so `model predict` loads the priors instead of fitting per process.
//   node scripts/build.mjs [--out DIR] [--if-stale]
// --if-stale skips the build when dist/ is newer than every file under src/ (npm start, bench:startup).
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { hostname } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const argv = process.argv.slice(2);
const outIdx = argv.indexOf("--out");
const out = outIdx >= 0 ? resolve(argv[outIdx + 1] ?? "") : join(root, "dist");
const src = join(root, "src");
const stamp = join(out, ".build-stamp");

function walk(dir) {
  const files = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) files.push(...walk(p));
    else if (e.isFile()) files.push(p);
  }
  return files;
}

const inputs = [
  ...walk(src),
  join(root, "tsconfig.json"),
  join(root, "tsconfig.build.json"),
  fileURLToPath(import.meta.url),
];
const fresh = () => existsSync(stamp) && inputs.every((f) => statSync(f).mtimeMs <= statSync(stamp).mtimeMs);
if (argv.includes("--if-stale") && fresh()) process.exit(0);

// One build at a time per output: two benches that find dist/ stale together must not build it over
// each other (one emptied it while the other ran from it: ENOENT … dist/errors.js). The second waits,
// then finds it fresh.
// The lock lies beside the output, whose folder may not exist yet (the pack test's --out stage/dist).
mkdirSync(dirname(out), { recursive: true });
takeBuildLock(`${out}.build-lock`);
if (argv.includes("--if-stale") && fresh()) process.exit(0);

// Built beside and moved in at the end, file by file, so a failed build leaves the previous dist/ whole
// and a process running from dist/ meanwhile never finds a file missing.
const tmp = `${out}.tmp-${process.pid}`;
rmSync(tmp, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
const r = spawnSync(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json"), "--outDir", tmp], {
  stdio: "inherit",
});
if (r.status !== 0) {
  rmSync(tmp, { recursive: true, force: true });
  console.error("build: tsc failed; dist/ left as it was");
  process.exit(r.status ?? 1);
}

// Declarations keep the sources' ".ts" specifiers; point them at the emitted ".d.ts"/".js" pair so
// every TypeScript version and resolution mode a user has can follow them.
const specifier = /((?:from\s+|import\()["'])(\.{1,2}\/[^"']*?)\.ts(["'])/g;
let copied = 0;
for (const f of walk(tmp)) {
  if (!f.endsWith(".d.ts")) continue;
  const text = readFileSync(f, "utf8");
  const fixed = text.replace(specifier, "$1$2.js$3");
  if (fixed !== text) writeFileSync(f, fixed);
}
for (const f of walk(src)) {
  if (f.endsWith(".ts")) continue;
  cpSync(f, join(tmp, relative(src, f)));
  copied++;
}
// The compiled code fits its own copy of the corpus, so the stamp covers exactly what dist/ runs. An --out
// outside the checkout (the pack test's staging folder) cannot resolve the fit's dependencies (yaml, required
// lazily, through NODE_PATH; pure-rand, an ES import, which NODE_PATH does not reach) from where it lies: the
// child runs with NODE_PATH and a node_modules link inside the temporary build, removed before the move.
// The out-of-support inflations are a whole grouped cross-validation (some 80 refits, minutes): precomputedPriors()
// stores the checked-in src/model/corpus/cv-inflations.json (copied beside the code; test/model/validation.test.ts
// fails while it is stale for this corpus and code) instead of recomputing it.
const fit = `
import { writeFileSync } from "node:fs";
const url = ${JSON.stringify(pathToFileURL(join(tmp, "model", "priors.js")).href)};
const priors = await import(url);
const pre = priors.precomputedPriors();
writeFileSync(priors.PRIORS_CACHE_FILE, JSON.stringify(pre) + "\\n");
const check = priors.readPrecomputedPriors();
if (!check.ok) throw new Error("they do not load back: " + check.detail);
console.log(pre.fit.rowsUsed.length);
`;
const modLink = join(tmp, "node_modules");
symlinkSync(join(root, "node_modules"), modLink, "dir");
const fr = spawnSync(process.execPath, ["--input-type=module", "-e", fit], {
  encoding: "utf8",
  env: { ...process.env, NODE_PATH: join(root, "node_modules") },
});
rmSync(modLink, { force: true });
if (fr.status !== 0) {
  rmSync(tmp, { recursive: true, force: true });
  const why = (fr.stderr || "").split("\n").find((l) => /Error/.test(l)) ?? fr.stderr;
  console.error(`build: precomputing the priors failed (${why.trim()}); dist/ left as it was`);
  process.exit(1);
}
const priorRows = Number(fr.stdout.trim());
chmodSync(join(tmp, "cli", "main.js"), 0o755);
// Stale until the last file is in: the stamp goes first and comes back last.
rmSync(stamp, { force: true });
const built = moveInto(tmp, out);
prune(out, built);
rmSync(tmp, { recursive: true, force: true });
writeFileSync(stamp, `${new Date().toISOString()}\n`);
console.error(
  `build: ${relative(process.cwd(), out) || "."} (tsc + ${copied} asset files + priors of ${priorRows} corpus rows)`,
);

/** Moves every file under `from` over its namesake under `to` (one rename each); returns the paths placed. */
function moveInto(from, to, placed = new Set()) {
  if (existsSync(to) && !statSync(to).isDirectory()) rmSync(to, { force: true });
  mkdirSync(to, { recursive: true });
  placed.add(to);
  for (const e of readdirSync(from, { withFileTypes: true })) {
    const a = join(from, e.name);
    const b = join(to, e.name);
    if (e.isDirectory()) moveInto(a, b, placed);
    else {
      if (existsSync(b) && statSync(b).isDirectory()) rmSync(b, { recursive: true, force: true });
      renameSync(a, b);
      placed.add(b);
    }
  }
  return placed;
}

/** Removes what an earlier build left under `dir` that this one did not place (a source since deleted). */
function prune(dir, placed) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (!placed.has(p)) rmSync(p, { recursive: true, force: true });
    else if (e.isDirectory()) prune(p, placed);
  }
}

/**
 * Takes `lock` (O_EXCL, "pid host"), waiting while another live build holds it (at most 10 min); a lock
 * whose process is gone on this host is taken over. Released when this process exits.
 */
function takeBuildLock(lock) {
  const me = `${process.pid} ${hostname()}`;
  const deadline = Date.now() + 10 * 60_000;
  let said = false;
  for (;;) {
    try {
      writeFileSync(lock, me, { flag: "wx" });
      break;
    } catch (e) {
      if (e.code !== "EEXIST") throw e;
    }
    let owner = "";
    try {
      owner = readFileSync(lock, "utf8");
    } catch {}
    const [pid, host] = owner.split(" ");
    let alive = owner === "" || host !== hostname();
    if (!alive)
      try {
        process.kill(Number(pid), 0);
        alive = true;
      } catch (e) {
        alive = e.code === "EPERM";
      }
    if (!alive) {
      rmSync(lock, { force: true });
      continue;
    }
    if (Date.now() > deadline) {
      console.error(`build: ${lock} is still held by pid ${pid} on ${host} after 10 min; if no build runs, remove it`);
      process.exit(1);
    }
    if (!said) console.error(`build: waiting for the build of pid ${pid} (${lock})`);
    said = true;
    // A synchronous script: sleep 100 ms, then look again.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
  }
  process.on("exit", () => {
    try {
      if (readFileSync(lock, "utf8") === me) rmSync(lock, { force: true });
    } catch {}
  });
}

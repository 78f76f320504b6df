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
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
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
if (argv.includes("--if-stale") && existsSync(stamp)) {
  const built = statSync(stamp).mtimeMs;
  if (inputs.every((f) => statSync(f).mtimeMs <= built)) process.exit(0);
}

// Built beside and swapped in at the end, so a failed build leaves the previous dist/ whole.
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
// The compiled code fits its own copy of the corpus, so the stamp covers exactly what dist/ runs. In a child
// process with NODE_PATH at this checkout's node_modules: an --out outside the checkout (the pack test's
// staging folder) cannot resolve the fit's one dependency (yaml, required lazily) from where it lies.
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
const fr = spawnSync(process.execPath, ["--input-type=module", "-e", fit], {
  encoding: "utf8",
  env: { ...process.env, NODE_PATH: join(root, "node_modules") },
});
if (fr.status !== 0) {
  rmSync(tmp, { recursive: true, force: true });
  const why = (fr.stderr || "").split("\n").find((l) => /Error/.test(l)) ?? fr.stderr;
  console.error(`build: precomputing the priors failed (${why.trim()}); dist/ left as it was`);
  process.exit(1);
}
const priorRows = Number(fr.stdout.trim());
chmodSync(join(tmp, "cli", "main.js"), 0o755);
writeFileSync(join(tmp, ".build-stamp"), `${new Date().toISOString()}\n`);
rmSync(out, { recursive: true, force: true });
renameSync(tmp, out);
console.error(
  `build: ${relative(process.cwd(), out) || "."} (tsc + ${copied} asset files + priors of ${priorRows} corpus rows)`,
);

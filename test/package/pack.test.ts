// The package as users get it: build into a staging folder, npm pack it, install the tarball in an
// empty folder, then run the installed bin and import the library. Install scripts are skipped, as
// npm 12 skips unreviewed ones in a user's install: on a Node with node:sqlite the run store must work
// so; on Node 20 better-sqlite3's native build (minutes) is replaced by the checkout's built addon
// (same pinned version). Nothing here needs tsx.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";
import { LOAD_LOOP_FLAGS } from "../../src/cli/launch.mjs";
import { shippedCorpus } from "../../src/model/corpus.ts";
import { spawnSim } from "../helpers/sim.ts";
import { expectedSqliteDriver, nodeHasSqlite } from "../helpers/sqlite.ts";

const npm = process.platform === "win32" ? "npm.cmd" : "npm";

test("npm pack → install in an empty folder, scripts skipped: --version, model predict, a bench, the library, the run store", async () => {
  const dir = mkdtempSync(join(tmpdir(), "inferscope-pack-"));
  try {
    const stage = join(dir, "stage");
    execFileSync(process.execPath, ["scripts/build.mjs", "--out", join(stage, "dist")], { stdio: "pipe" });
    for (const f of ["package.json", "README.md", "docs", "grafana"]) cpSync(f, join(stage, f), { recursive: true });
    const tgz = execFileSync(npm, ["pack", "--ignore-scripts", "--silent", "--pack-destination", dir], {
      cwd: stage,
      encoding: "utf8",
    }).trim();
    const app = join(dir, "app");
    mkdirSync(app);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
    execFileSync(npm, ["install", "--prefer-offline", "--ignore-scripts", "--no-audit", "--no-fund", join(dir, tgz)], {
      cwd: app,
      stdio: "pipe",
    });
    const addon = "node_modules/better-sqlite3/build/Release/better_sqlite3.node";
    if (nodeHasSqlite()) assert.ok(!existsSync(join(app, addon)), "install scripts were skipped");
    else {
      mkdirSync(join(app, addon, ".."), { recursive: true });
      cpSync(addon, join(app, addon));
    }
    assert.ok(!existsSync(join(app, "node_modules/tsx")), "tsx must not be a runtime dependency");
    assert.ok(existsSync(join(app, "node_modules/inferscope/dist/index.d.ts")), "declarations shipped");
    assert.ok(!existsSync(join(app, "node_modules/inferscope/src")), "sources are not shipped");
    assert.ok(existsSync(join(app, "node_modules/inferscope/grafana/inferscope-runs.json")), "the dashboard ships");

    // The serving corpus ships beside the decode corpus, and the compiled loader reads every file of it.
    const servingDir = join(app, "node_modules/inferscope/dist/model/corpus/serving");
    assert.deepEqual(readdirSync(servingDir).sort(), readdirSync("src/model/corpus/serving").sort());
    const corpusJs = pathToFileURL(join(app, "node_modules/inferscope/dist/model/corpus.js")).href;
    const sc = spawnSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import { shippedCorpus } from ${JSON.stringify(corpusJs)}; const c = shippedCorpus(); console.log(c.serving.length, c.sources.length);`,
      ],
      { cwd: app, encoding: "utf8" },
    );
    assert.equal(sc.status, 0, sc.stderr);
    const src = shippedCorpus();
    assert.equal(sc.stdout.trim(), `${src.serving.length} ${src.sources.length}`);

    const bin = join(app, "node_modules/.bin/inferscope");
    const v = spawnSync(bin, ["--version"], { encoding: "utf8" });
    assert.equal(v.status, 0, v.stderr);
    assert.equal(
      v.stdout.trim(),
      JSON.parse(execFileSync("node", ["-p", "JSON.stringify(require('./package.json'))"], { encoding: "utf8" }))
        .version,
    );

    const args = ["model", "predict", "--model", "glm-5", "--quant", "nvfp4", "--gpu", "rtx-pro-6000", "--gpus", "8"];
    const p = spawnSync(bin, [...args, "--tp", "8", "--interconnect", "pcie5", "--json"], { encoding: "utf8" });
    assert.equal(p.status, 0, p.stderr);
    assert.equal(JSON.parse(p.stdout).kind, "inferscope.model.prediction");

    // A load loop through the installed bin: re-executed with --no-memory-reducer where Node can (launch.mjs,
    // copied beside the compiled main.js), as the run's --json says.
    const sim = await spawnSim(["--speed", "zero"]);
    try {
      const b = spawnSync(
        bin,
        ["bench", "--base-url", sim.url, "--num-prompts", "1", "--no-server-metrics", "--json"],
        {
          encoding: "utf8",
        },
      );
      assert.equal(b.status, 0, b.stderr);
      const flags = JSON.parse(b.stdout).inferscope.client.nodeFlags;
      assert.deepEqual(flags, typeof (process as { execve?: unknown }).execve === "function" ? LOAD_LOOP_FLAGS : []);
    } finally {
      await sim.stop();
    }

    const lib = spawnSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        'import { predict, runBench, startSim, load } from "inferscope"; console.log([typeof predict, typeof runBench, typeof startSim, typeof load.computeMetrics].join(","));',
      ],
      { cwd: app, encoding: "utf8" },
    );
    assert.equal(lib.status, 0, lib.stderr);
    assert.equal(lib.stdout.trim(), "function,function,function,function");

    // The run store, written through the library and read back by the bin, on this Node's driver.
    const db = join(dir, "runs.db");
    const w = spawnSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import { openStore } from "inferscope"; const s = openStore(${JSON.stringify(db)}); const r = s.saveRun({ kind: "bench", config: {} }); s.finishRun(r.id); console.log(s.driver); s.close();`,
      ],
      { cwd: app, encoding: "utf8" },
    );
    assert.equal(w.status, 0, w.stderr);
    assert.equal(w.stdout.trim(), expectedSqliteDriver());
    const runs = spawnSync(process.execPath, [bin, "runs", "list", "--db", db, "--json"], { encoding: "utf8" });
    assert.equal(runs.status, 0, runs.stderr);
    const listed = JSON.parse(runs.stdout) as Array<{ id: string; kind: string }>;
    assert.deepEqual(
      listed.map((r) => r.kind),
      ["bench"],
    );
    // The Parquet writer (a runtime dependency) resolves in the installed package.
    const pq = spawnSync(
      process.execPath,
      [bin, "runs", "export", listed[0]!.id, "--db", db, "--format", "parquet", "--out", join(dir, "x"), "--json"],
      { encoding: "utf8" },
    );
    assert.equal(pq.status, 0, pq.stderr);
    assert.deepEqual(JSON.parse(pq.stdout).files, [join(dir, "x.requests.parquet"), join(dir, "x.summary.parquet")]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";
import { binSamples, chartSpecs } from "../../src/report/charts.ts";
import { esc, fmtQ, mdEsc, redactSecrets } from "../../src/report/format.ts";
import { parseStudyResult, renderMarkdown, renderTerminal, writeReport } from "../../src/report/index.ts";
import { CHROMIUM, launchChromium, reportPage } from "../helpers/chromium.ts";
import { sampleResult } from "./sample.ts";

const XSS = `<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>"'&`;

test("esc and mdEsc neutralise markup", () => {
  assert.equal(esc(`<a href="x">'&'</a>`), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  assert.ok(!mdEsc(XSS).includes("<"));
  assert.ok(!mdEsc("a|b\nc").includes("\n"));
  assert.equal(mdEsc("a|b"), "a\\|b");
});

test("redactSecrets removes keys, tokens and URL passwords", () => {
  const cmd =
    "OPENAI_API_KEY=sk-abcdefghijkl HF_TOKEN=hf_x vllm serve m --api-key s3cret --hf-token=abc http://u:pw@h/ -H 'Authorization: Bearer xyz'";
  const r = redactSecrets(cmd);
  for (const s of ["sk-abcdefghijkl", "hf_x", "s3cret", "abc ", ":pw@", "xyz"])
    assert.ok(!r.includes(s), `${s} leaked: ${r}`);
  assert.match(r, /vllm serve m/);
});

test("fmtQ prints value, interval and unit", () => {
  assert.equal(
    fmtQ({ value: 17.43, low: 17.3, high: 17.55, unit: "ms", method: "measured", how: "" }),
    "17.4 ms [17.3, 17.6]",
  );
  assert.equal(fmtQ(undefined), "n/a");
  assert.equal(
    fmtQ({ value: 65.1, low: 65.08, high: 65.13, unit: "%", method: "measured", how: "" }),
    "65.10 % [65.08, 65.13]",
  );
});

test("binSamples conserves the count and covers the range", () => {
  const xs = Array.from({ length: 1000 }, (_, i) => 10 + (i % 97) / 10);
  const bins = binSamples(xs);
  assert.equal(
    bins.reduce((s, b) => s + b.count, 0),
    1000,
  );
  assert.ok(bins[0]!.lo <= 10);
  assert.deepEqual(binSamples([]), []);
  assert.equal(binSamples([5, 5, 5])[0]!.count, 3);
});

test("chartSpecs: one chart per populated section, none for missing sections", () => {
  const full = chartSpecs(sampleResult());
  const ids = full.map((c) => c.id);
  for (const id of [
    "decomposition",
    "ceilings",
    "ttft-hist",
    "itl-hist",
    "itl-time",
    "slices",
    "sweep-fit",
    "ab-arms",
    "trace-classes",
    "model-residuals",
    "whatifs",
  ])
    assert.ok(ids.includes(id), `missing chart ${id}`);
  const partial = sampleResult();
  delete partial.ab;
  delete partial.trace;
  const pids = chartSpecs(partial).map((c) => c.id);
  assert.ok(!pids.includes("ab-arms") && !pids.includes("trace-classes"));
});

test("writeReport writes html, md and json; json round-trips; missing phases are named", async () => {
  const dir = await mkdtemp(join(tmpdir(), "inferscope-report-"));
  const r = sampleResult();
  delete r.ab;
  r.meta.phases.find((p) => p.name === "ab")!.status = "unavailable";
  r.meta.phases.find((p) => p.name === "ab")!.reason = "the server cannot be restarted (--url)";
  const w = await writeReport(r, dir);
  const html = await readFile(w.html, "utf8");
  const md = await readFile(w.markdown, "utf8");
  const back = parseStudyResult(await readFile(w.json, "utf8"));
  assert.deepEqual(back.summary, r.summary);
  assert.match(html, /The A\/B experiment is not in this report: the server cannot be restarted \(--url\)/);
  assert.match(md, /The A\/B experiment is not in this report/);
  assert.ok(!/<script/i.test(html), "the report carries no script");
  assert.ok(
    !/https?:\/\/(?!www\.w3\.org)/.test(html.replace(/xmlns(:xlink)?="[^"]*"/g, "")),
    "no external URL in the page",
  );
  for (const section of [
    "Summary",
    "What the metrics endpoint exposes",
    "Latency distributions",
    "Length sweep",
    "Model vs measurement",
    "Ceilings and what-ifs",
    "Method and environment",
  ])
    assert.ok(html.includes(section) && md.includes(section.split(" ")[0]!), section);
  assert.throws(() => parseStudyResult('{"a":1}'), /not an inferscope study result/);
  const term = renderTerminal(r, { outDir: dir });
  assert.match(term, /decode rate/);
  assert.match(term, /phase ab: unavailable/);
});

test("an XSS payload in labels, model names and kernel names is escaped everywhere", async () => {
  const dir = await mkdtemp(join(tmpdir(), "inferscope-report-"));
  const w = await writeReport(sampleResult(XSS), dir);
  const html = await readFile(w.html, "utf8");
  assert.ok(!html.includes("<img src=x"), "raw img tag in html");
  assert.ok(!html.includes("<script>window"), "raw script in html");
  const md = renderMarkdown(sampleResult(XSS));
  assert.ok(!md.includes("<img"), "raw img tag in markdown");
});

test("headless Chromium: loads without console errors, every chart has marks, XSS inert, screenshot", async (t) => {
  if (!existsSync(CHROMIUM)) {
    if (process.env.INFERSCOPE_REQUIRE_E2E) assert.fail(`${CHROMIUM} is missing and INFERSCOPE_REQUIRE_E2E is set`);
    t.skip(`SKIPPED: ${CHROMIUM} not installed (apt-get install chromium)`);
    return;
  }
  const dir = await mkdtemp(join(tmpdir(), "inferscope-report-"));
  const r = sampleResult(XSS);
  const w = await writeReport(r, dir);
  const browser = await launchChromium();
  try {
    const page = await reportPage(browser);
    const problems: string[] = [];
    const requests: string[] = [];
    let dialogs = 0;
    page.on("console", (m) => {
      if (m.type() === "error" || m.type() === "warning") problems.push(`${m.type()}: ${m.text()}`);
    });
    page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
    page.on("dialog", async (d) => {
      dialogs++;
      await d.dismiss();
    });
    page.on("request", (req) => {
      if (!req.url().startsWith("file:")) requests.push(req.url());
    });
    await page.goto(pathToFileURL(w.html).href, { waitUntil: "load" });
    assert.deepEqual(problems, [], "console errors");
    assert.deepEqual(requests, [], "the page made network requests");
    assert.equal(
      await page.evaluate(() => (globalThis as unknown as { __xss?: number }).__xss),
      undefined,
      "XSS executed",
    );
    assert.equal(dialogs, 0);
    // The payload shows as text.
    assert.ok((await page.textContent("header h1"))!.includes("<img src=x"));
    const charts = await page.$$eval("figure.chart", (figs) =>
      figs.map((f) => ({
        id: f.getAttribute("data-chart"),
        svg: f.querySelectorAll("svg").length,
        marks: f.querySelectorAll("svg g[class*='mark-'] path, svg g[class*='mark-'] rect, svg g[class*='mark-'] line")
          .length,
        w: f.querySelector("svg")?.getBoundingClientRect().width ?? 0,
      })),
    );
    assert.equal(charts.length, w.charts.length);
    assert.ok(charts.length >= 10);
    for (const c of charts) {
      assert.equal(c.svg, 1, `${c.id} has no svg`);
      assert.ok(c.marks > 0, `${c.id} has no rendered marks`);
      assert.ok(c.w > 100, `${c.id} is not laid out`);
    }
    const shot = join(dir, "report.png");
    await page.screenshot({ path: shot, fullPage: true });
    assert.ok((await stat(shot)).size > 10_000);
  } finally {
    await browser.close();
  }
});

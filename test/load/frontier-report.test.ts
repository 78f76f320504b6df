// The rate sweep's TTFT p90 against the offered rate, beside the frontier: its points (pure), in the
// sweep's --json data, and as a second SVG in the report, each point labelled with its load and limit.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { ttftRatePoints } from "../../src/load/frontier.ts";
import { pointLabel, writeSweepReport } from "../../src/report/sweep.ts";
import { rateSweep } from "../helpers/sweep-sample.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-frontier-report-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("TTFT points: sorted by offered rate; a level with no TTFT has none", () => {
  const pts = ttftRatePoints([
    { level: 4, ttftP90Ms: 900, completedRate: 3.1, limit: "max-num-seqs" },
    { level: 1, ttftP90Ms: 40, completedRate: 1, limit: null },
    { level: 8, ttftP90Ms: Number.NaN, completedRate: 0, limit: null },
  ]);
  assert.deepEqual(pts, [
    { level: 1, ttftP90Ms: 40, completedRate: 1, limit: null },
    { level: 4, ttftP90Ms: 900, completedRate: 3.1, limit: "max-num-seqs" },
  ]);
});

test("a rate sweep's --json has TTFT p90 per offered rate with its limit; a concurrency sweep has none", () => {
  const r = rateSweep("rate");
  assert.ok(r.ttftRate);
  assert.deepEqual(
    r.ttftRate.points.map((p) => [p.level, p.ttftP90Ms, p.limit]),
    r.points.map((p) => [p.level, p.ttftMs.p90, p.diagnosis.binding.map((b) => b.limit).join("+") || null]),
  );
  assert.equal(r.ttftRate.points[2]!.limit, "max-num-seqs");
  assert.ok(r.ttftRate.points[2]!.ttftP90Ms > 900);
  assert.equal(rateSweep("concurrency").ttftRate, null);
});

test("the report draws TTFT p90 against rate beside the frontier, each point labelled; an overlay adds the other run", async () => {
  const r = rateSweep("rate");
  const rep = await writeSweepReport(r, join(dir, "one"));
  const html = readFileSync(rep.html, "utf8");
  const at = html.indexOf('id="chart-ttft-rate"');
  assert.ok(at > html.indexOf('id="chart-frontier"'), "the TTFT chart follows the frontier");
  const chart = html.slice(at, html.indexOf("</figure>", at));
  assert.match(chart, /<svg[^>]*>/);
  assert.match(chart, /TTFT p90 \(ms\)/);
  for (const p of r.ttftRate!.points) assert.ok(chart.includes(`>${pointLabel(p, "rate")}<`), pointLabel(p, "rate"));
  assert.ok(chart.includes(">4 req/s · max-num-seqs<"));
  assert.match(readFileSync(join(dir, "one", "report.md"), "utf8"), /TTFT p90 \(ms\)/);

  // A run stored before the curve existed is drawn from its levels; overlaid runs are named in the legend.
  const old = rateSweep("rate", "sweep-rate-old");
  delete old.ttftRate;
  const two = await writeSweepReport(r, join(dir, "two"), [old]);
  const h2 = readFileSync(two.html, "utf8");
  const c2 = h2.slice(h2.indexOf('id="chart-ttft-rate"'), h2.indexOf("</figure>", h2.indexOf('id="chart-ttft-rate"')));
  assert.ok(c2.includes(">sweep-rate-old<") && c2.includes(`>${r.runId}<`), "legend names both runs");
  assert.equal((c2.match(/ req\/s( · [a-z+-]+)?<\/text>/g) ?? []).length, 6, "six labelled points");

  // A concurrency sweep has no TTFT-against-rate chart.
  const c = await writeSweepReport(rateSweep("concurrency"), join(dir, "conc"));
  assert.doesNotMatch(readFileSync(c.html, "utf8"), /chart-ttft-rate/);
});

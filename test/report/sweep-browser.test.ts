// The sweep report in a real browser: headless Chromium loads it, the frontier's SVG is laid out and
// visible, every point's label is in the rendered DOM, and a screenshot of the chart's box has the
// points drawn: its pixels, decoded by the browser, hold the marks' colour, not only the axes' greys.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { pointLabel, writeSweepReport } from "../../src/report/sweep.ts";
import { CHROMIUM, launchChromium, reportPage } from "../helpers/chromium.ts";
import { rateSweep } from "../helpers/sweep-sample.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-sweep-browser-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Pixels of a PNG that are not background (near white), and those with a colour (not grey or black). */
interface PixelCount {
  width: number;
  height: number;
  ink: number;
  coloured: number;
}

/** The few browser APIs the pixel count uses. */
interface BrowserGlobals {
  Image: new () => { src: string; naturalWidth: number; naturalHeight: number; decode(): Promise<void> };
  document: {
    createElement(tag: "canvas"): {
      width: number;
      height: number;
      getContext(kind: "2d"): {
        drawImage(img: unknown, x: number, y: number): void;
        getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray };
      } | null;
    };
  };
}

test("headless Chromium: the frontier chart is visible, each point labelled, and its screenshot shows the points", async (t) => {
  if (!existsSync(CHROMIUM)) {
    if (process.env.INFERSCOPE_REQUIRE_E2E) assert.fail(`${CHROMIUM} is missing and INFERSCOPE_REQUIRE_E2E is set`);
    t.skip(`SKIPPED: ${CHROMIUM} not installed (apt-get install chromium)`);
    return;
  }
  const r = rateSweep("rate");
  const rep = await writeSweepReport(r, join(dir, "report"));
  const browser = await launchChromium();
  try {
    const page = await reportPage(browser);
    const problems: string[] = [];
    page.on("console", (m) => {
      if (m.type() === "error") problems.push(m.text());
    });
    page.on("pageerror", (e) => problems.push(e.message));
    await page.goto(`file://${rep.html}`, { waitUntil: "load" });
    assert.deepEqual(problems, []);

    for (const [id, labels] of [
      ["chart-frontier", r.frontier.points.map((p) => pointLabel(p, "rate"))],
      ["chart-ttft-rate", r.ttftRate!.points.map((p) => pointLabel(p, "rate"))],
    ] as const) {
      const svg = page.locator(`#${id} svg`);
      assert.equal(await svg.count(), 1, `${id}: one svg`);
      assert.ok(await svg.isVisible(), `${id}: visible`);
      const box = (await svg.boundingBox())!;
      assert.ok(box.width > 300 && box.height > 150, `${id}: laid out ${box.width}×${box.height}`);
      // The labels as the browser rendered them, one text element each.
      const texts = await svg.locator("text").allTextContents();
      for (const l of labels) assert.ok(texts.includes(l), `${id}: label "${l}" in ${JSON.stringify(texts)}`);
      assert.ok(
        labels.some((l) => l.endsWith("· max-num-seqs")),
        `${id}: the pinned level's limit`,
      );

      // The screenshot of the chart's box, decoded by the browser into pixels and counted.
      const png = await svg.screenshot();
      const px: PixelCount = await page.evaluate(async (b64) => {
        // The page's DOM (the project's typings have no DOM lib).
        const w = globalThis as unknown as BrowserGlobals;
        const img = new w.Image();
        img.src = `data:image/png;base64,${b64}`;
        await img.decode();
        const c = w.document.createElement("canvas");
        c.width = img.naturalWidth;
        c.height = img.naturalHeight;
        const g = c.getContext("2d")!;
        g.drawImage(img, 0, 0);
        const d = g.getImageData(0, 0, c.width, c.height).data;
        let ink = 0;
        let coloured = 0;
        for (let i = 0; i < d.length; i += 4) {
          const [r, gr, b] = [d[i]!, d[i + 1]!, d[i + 2]!];
          if (Math.min(r, gr, b) < 235) ink++;
          if (Math.max(r, gr, b) - Math.min(r, gr, b) > 60) coloured++;
        }
        return { width: c.width, height: c.height, ink, coloured };
      }, png.toString("base64"));
      t.diagnostic(`${id}: ${px.width}×${px.height} px, ${px.ink} inked, ${px.coloured} coloured`);
      assert.ok(px.width >= box.width - 1 && px.height >= box.height - 1, `${id}: screenshot covers the box`);
      // Axes, ticks and labels ink the box; the points (filled, size 60: ~60 px each) colour it.
      assert.ok(px.ink > 2000, `${id}: ${px.ink} inked pixels`);
      assert.ok(px.coloured >= 3 * 40, `${id}: ${px.coloured} coloured pixels for ${labels.length} points`);
    }
  } finally {
    await browser.close();
  }
});

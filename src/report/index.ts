// Report writers: a StudyResult → a directory with index.html, report.md and results.json.
import { mkdir, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { escapeControl } from "../control.ts";
import { redact } from "../secrets.ts";
import { renderCharts } from "./charts.ts";
import { renderHtml } from "./html.ts";
import { renderJson } from "./json.ts";
import { renderMarkdown } from "./markdown.ts";
import type { StudyResult } from "./types.ts";

export { chartSpecs, renderCharts, renderSvg } from "./charts.ts";
export { esc, fmt, fmtQ, redactSecrets } from "./format.ts";
export { renderHtml } from "./html.ts";
export { parseStudyResult, renderJson } from "./json.ts";
export { renderMarkdown } from "./markdown.ts";
export { renderTerminal } from "./terminal.ts";
export type * from "./types.ts";

export interface WrittenReport {
  dir: string;
  html: string;
  markdown: string;
  json: string;
  charts: string[];
}

/** Renders every chart and writes the three report files into dir (created if missing). */
export async function writeReport(study: StudyResult, dir: string): Promise<WrittenReport> {
  // The writer redacts: no caller can hand it a secret that reaches a file.
  const result = redact(study);
  const abs = resolve(dir);
  await mkdir(abs, { recursive: true });
  const charts = await renderCharts(result);
  const files = { html: join(abs, "index.html"), markdown: join(abs, "report.md"), json: join(abs, "results.json") };
  // Control characters from servers made visible in the files a terminal may print (JSON escapes its own).
  await writeFile(files.html, escapeControl(renderHtml(result, charts)));
  await writeFile(files.markdown, escapeControl(renderMarkdown(result)));
  await writeFile(files.json, renderJson(result));
  return { dir: abs, ...files, charts: charts.map((c) => c.id) };
}

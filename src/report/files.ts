// The files a report directory holds (tune, sweep): index.html, report.md and results.json, written
// with control characters from servers made visible (JSON escapes its own); and a stored run's summary
// read back for `inferscope report ID`.
import { mkdir, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { escapeControl } from "../control.ts";
import { UsageError } from "../errors.ts";
import { checkRunStore } from "../input-file.ts";
import { openStore, type RunDetail } from "../store/index.ts";

export interface WrittenReportFiles {
  dir: string;
  html: string;
  markdown: string;
  json: string;
}

export async function writeReportFiles(
  dir: string,
  content: { html: string; markdown: string; json: unknown },
): Promise<WrittenReportFiles> {
  const abs = resolve(dir);
  await mkdir(abs, { recursive: true });
  const files = { html: join(abs, "index.html"), markdown: join(abs, "report.md"), json: join(abs, "results.json") };
  await writeFile(files.html, escapeControl(content.html));
  await writeFile(files.markdown, escapeControl(content.markdown));
  await writeFile(files.json, `${JSON.stringify(content.json, null, 2)}\n`);
  return { dir: abs, ...files };
}

/**
 * A stored run's summary `key`, for a run of one of `kinds` (`what` names them in the refusal); `missing`
 * says why a run has none. A reader: never creates a store, nor opens a directory or another file as one.
 */
export function storedSummary<T>(
  id: string,
  dbPath: string | undefined,
  o: { kinds: string[]; what: string; key: string; missing: (d: RunDetail) => UsageError; valid?: (x: T) => boolean },
): T {
  checkRunStore("--db", dbPath, { mustExist: true });
  const store = openStore(dbPath);
  try {
    const d = store.getRun(id);
    if (!o.kinds.includes(d.run.kind)) throw new UsageError(`run ${id} is a ${d.run.kind} run, not a ${o.what}`);
    const r = d.summaries[o.key] as T | undefined;
    if (r === undefined || (o.valid && !o.valid(r))) throw o.missing(d);
    return r;
  } finally {
    store.close();
  }
}

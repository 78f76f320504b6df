// nccl-tests output parser (pure): all_reduce_perf and the other collectives, text output in the
// current and pre-2022 column layouts (found by header detection, not fixed columns), and -J JSON.
import { InputError, ParseError } from "../errors.ts";

export interface NcclResult {
  timeUs: number;
  algbwGBs: number;
  busbwGBs: number;
  /** #wrong (current) or max error (≤ 2022); null when printed N/A. */
  wrong: number | null;
  /** -I 1 per-iteration columns, when present. */
  iterMinUs?: number;
  iterMaxUs?: number;
  iterP99Us?: number;
  iterCvPct?: number;
}

export interface NcclRow {
  line: number;
  sizeBytes: number;
  count: number;
  type: string;
  redop: string;
  root: number | null;
  outOfPlace: NcclResult | null;
  inPlace: NcclResult | null;
  timestamp?: string;
}

export interface NcclTestsResult {
  collective?: string;
  version?: string;
  layout: "current" | "2022" | "json";
  /** time column: "time" (GPU) or "cputime" (-C 1). */
  timeKind: "time" | "cputime";
  config: Record<string, number | string>;
  devices: Array<{ rank: number; host: string; device: number; busId?: string; name: string }>;
  rows: NcclRow[];
  avgBusBwGBs?: number;
  outOfBounds?: number;
  warnings: string[];
}

/** One point per size for model fitting: the smaller of out-of-place and in-place time. */
export interface LatencyPoint {
  sizeBytes: number;
  timeUs: number;
  busbwGBs: number;
  algbwGBs: number;
  /** Whether the in-place run was the faster one for this size. */
  inPlace: boolean;
}

const num = (s: string): number => (s === "N/A" || s === "nan" ? Number.NaN : Number(s));

/** 1-based column where the i-th whitespace-separated token of a line starts (text tables here and in topo.ts). */
export function tokenColumn(raw: string, i: number): number {
  const m = [...raw.matchAll(/\S+/g)][i];
  return m?.index === undefined ? 1 : m.index + 1;
}

export function parseNcclTests(text: string, file?: string): NcclTestsResult {
  const trimmed = text.trimStart();
  if (trimmed.startsWith("{")) return parseNcclJson(trimmed, file);
  const lines = text.split(/\r?\n/);
  const out: NcclTestsResult = { layout: "current", timeKind: "time", config: {}, devices: [], rows: [], warnings: [] };
  let cols: string[] | undefined; // column names of the data rows
  let prefix = 0; // columns before the first result group
  let group = 0; // columns per result group
  let hasTimestamp = false;
  for (let li = 0; li < lines.length; li++) {
    const raw = lines[li]!;
    const line = raw.trim();
    if (!line) continue;
    if (line.startsWith("#")) {
      const body = line.replace(/^#\s*/, "");
      let m: RegExpExecArray | null;
      if ((m = /^nccl-tests version (\S+)/.exec(body))) out.version = m[1];
      else if ((m = /^Collective test starting: (\S+)/.exec(body))) out.collective = m[1];
      else if (body.startsWith("nThread")) {
        for (const mm of body.matchAll(/([A-Za-z][A-Za-z ]*?):?\s+(-?\d+)(?:\(([a-z]+)\))?/g)) {
          const key = mm[1]!.trim().replace(/\s+/g, "_");
          out.config[key] = Number(mm[2]);
          if (mm[3]) out.config[`${key}_unit`] = mm[3];
        }
      } else if (
        (m =
          /^Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+(?:\[([0-9a-fx:.]+)\]\s+)?(.*)$/i.exec(
            body,
          ))
      )
        out.devices.push({ rank: Number(m[1]), host: m[2]!, device: Number(m[3]), busId: m[4], name: m[5]!.trim() });
      else if ((m = /^Avg bus bandwidth\s*:\s*([\d.eE+-]+)/.exec(body))) out.avgBusBwGBs = Number(m[1]);
      else if ((m = /^Out of bounds values\s*:\s*(\d+)/.exec(body))) out.outOfBounds = Number(m[1]);
      else {
        const toks = body.split(/\s+/);
        const timeIdx = toks.findIndex((t) => t === "time" || t === "cputime");
        if ((toks[0] === "size" || toks[0] === "bytes") && timeIdx > 0) {
          cols = toks;
          out.timeKind = toks[timeIdx] === "cputime" ? "cputime" : "time";
          prefix = timeIdx;
          const second = toks.findIndex((t, i) => i > timeIdx && (t === "time" || t === "cputime"));
          hasTimestamp = toks[toks.length - 1] === "timestamp";
          group = second > 0 ? second - timeIdx : toks.length - timeIdx - (hasTimestamp ? 1 : 0);
          out.layout = toks.includes("#wrong") ? "current" : "2022";
        }
      }
      continue;
    }
    if (!/^\d/.test(line)) continue; // NCCL INFO/WARN lines and other noise interleaved with the output
    if (!cols) {
      out.warnings.push(`${file ?? "input"}:${li + 1}: result row before any column header; skipped`);
      continue;
    }
    const toks = line.split(/\s+/);
    const expected = prefix + 2 * group;
    // A trace-replay row may omit out-of-place; -S adds a two-token timestamp.
    if (toks.length < prefix + group) {
      out.warnings.push(
        `${file ?? "input"}:${li + 1}: incomplete row (${toks.length} of ${expected} columns); skipped`,
      );
      continue;
    }
    const col = (name: string) => cols!.indexOf(name);
    const get = (name: string) => {
      const i = col(name);
      return i >= 0 && i < prefix ? toks[i] : undefined;
    };
    const size = Number(get("size") ?? get("bytes"));
    const count = Number(get("count") ?? get("N"));
    if (!Number.isFinite(size)) {
      const c = raw.indexOf(toks[0]!) + 1;
      throw new ParseError(`not a number in the size column: "${toks[0]}"`, { file, line: li + 1, column: c });
    }
    const readGroup = (start: number): NcclResult | null => {
      const g = toks.slice(start, start + group);
      if (g.length < Math.min(group, 3)) return null;
      const names = cols!.slice(prefix, prefix + group);
      const at = (n: string) => {
        const i = names.indexOf(n);
        return i >= 0 ? g[i] : undefined;
      };
      // A value that is not a number is an error at its own column (N/A stays NaN only where allowed).
      const field = (k: string, ...cands: string[]): number => {
        const name = cands.find((c) => names.includes(c));
        const v = name === undefined ? undefined : at(name);
        const x = num(v ?? "N/A");
        if (Number.isNaN(x)) {
          const ti = name === undefined ? -1 : start + names.indexOf(name);
          const column = ti >= 0 && ti < toks.length ? tokenColumn(raw, ti) : 1;
          throw new ParseError(`not a number in the ${k} column${v === undefined ? "" : `: "${v}"`}`, {
            file,
            line: li + 1,
            column,
          });
        }
        return x;
      };
      const r: NcclResult = {
        timeUs: field("timeUs", "time", "cputime"),
        algbwGBs: field("algbwGBs", "algbw"),
        busbwGBs: field("busbwGBs", "busbw"),
        wrong: null,
      };
      const w = at("#wrong") ?? at("error") ?? at("res");
      if (w !== undefined && w !== "N/A") r.wrong = Number(w);
      if (at("i_min")) {
        r.iterMinUs = field("iterMinUs", "i_min");
        r.iterMaxUs = field("iterMaxUs", "i_max");
        r.iterP99Us = field("iterP99Us", "i_p99");
        r.iterCvPct = field("iterCvPct", "i_cv%");
      }
      return r;
    };
    const two = toks.length >= expected;
    const row: NcclRow = {
      line: li + 1,
      sizeBytes: size,
      count,
      type: get("type") ?? "",
      redop: get("redop") ?? get("op") ?? "",
      root: get("root") !== undefined ? Number(get("root")) : null,
      outOfPlace: two ? readGroup(prefix) : null,
      inPlace: readGroup(two ? prefix + group : prefix),
    };
    if (hasTimestamp && toks.length > expected) row.timestamp = toks.slice(expected).join(" ");
    out.rows.push(row);
  }
  if (out.rows.length === 0)
    throw new InputError(
      `${file ?? "input"}: no nccl-tests result rows found${cols ? "" : " (no '#  size  count  type …' column header)"}`,
      { hint: "expected the stdout of e.g. `all_reduce_perf -b 8 -e 128M -f 2 -g 1`" },
    );
  return out;
}

function parseNcclJson(text: string, file?: string): NcclTestsResult {
  let doc: any;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new InputError(`${file ?? "input"}: not valid JSON: ${(e as Error).message}`);
  }
  if (!Array.isArray(doc?.results))
    throw new InputError(`${file ?? "input"}: JSON without a "results" list: not nccl-tests -J output`);
  const res = (o: any): NcclResult | null =>
    o && typeof o === "object"
      ? {
          timeUs: Number(o.time ?? o.cpu_time),
          algbwGBs: Number(o.alg_bw),
          busbwGBs: Number(o.bus_bw),
          wrong: o.nwrong === null || o.nwrong === undefined ? null : Number(o.nwrong),
        }
      : null;
  const rows: NcclRow[] = doc.results.map((r: any, i: number) => ({
    line: i + 1,
    sizeBytes: Number(r.size),
    count: Number(r.count),
    type: String(r.type ?? ""),
    redop: String(r.redop ?? ""),
    root: r.root === undefined ? null : Number(r.root),
    outOfPlace: res(r.out_of_place),
    inPlace: res(r.in_place),
  }));
  if (!rows.length) throw new InputError(`${file ?? "input"}: nccl-tests JSON has no results`);
  const cfg = doc.config ?? {};
  return {
    layout: "json",
    timeKind: doc.results.some((r: any) => r.out_of_place?.cpu_time !== undefined) ? "cputime" : "time",
    config: Object.fromEntries(
      Object.entries(cfg).filter(([, v]) => typeof v === "number" || typeof v === "string"),
    ) as Record<string, number | string>,
    devices: (cfg.devices ?? []).map((d: any) => ({
      rank: Number(d.rank),
      host: String(d.hostname),
      device: Number(d.device),
      busId: d.device_hex,
      name: String(d.device_info),
    })),
    rows,
    avgBusBwGBs: doc.average_bus_bandwidth?.bandwidth,
    outOfBounds: doc.out_of_bounds?.count,
    warnings: [],
  };
}

/** Latency vs size (the faster of out-of-place / in-place per row), sorted by size; feeds `model fit`. */
export function ncclLatencyTable(r: NcclTestsResult): LatencyPoint[] {
  return r.rows
    .map((row) => {
      const cands = [row.outOfPlace, row.inPlace].filter((x): x is NcclResult => !!x && Number.isFinite(x.timeUs));
      const best = cands.sort((a, b) => a.timeUs - b.timeUs)[0];
      return best
        ? {
            sizeBytes: row.sizeBytes,
            timeUs: best.timeUs,
            busbwGBs: best.busbwGBs,
            algbwGBs: best.algbwGBs,
            inPlace: best === row.inPlace,
          }
        : undefined;
    })
    .filter((x): x is LatencyPoint => !!x)
    .sort((a, b) => a.sizeBytes - b.sizeBytes);
}

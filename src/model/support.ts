// The corpus's support: which engines (and over which release dates), hardware classes, quantization formats, MoE
// shapes and parallel layouts its rows measured. A prediction outside it is an extrapolation; each kind found is named
// and widens the interval by a variance inflation estimated from the grouped cross-validation (cv.ts). Pure.
import type { Resolved } from "./resolve.ts";

/** What one corpus row measured, as far as support goes. */
export interface RowFacts {
  id: string;
  engine: string;
  /** The engine release date the row ran (ISO). */
  date: string;
  family: string;
  /** When the engine first ran the family (ISO). */
  since: string;
  device: string;
  formats: string[];
  moe?: { experts: number; active: number };
  tp: number;
  ep: number;
  /** "none" at TP 1, else the link kind (nvlink, pcie, xgmi, …). */
  link: string;
  /** The row's maturity weight u (1 on the day the engine first ran the family). */
  u: number;
}

export interface CorpusSupport {
  rows: number;
  engines: Record<string, { first: string; last: string; rows: number; moeRows: number; u: number[] }>;
  /** engine → the device classes (GPU generation and memory) it has rows on. */
  engineDevices: Record<string, string[]>;
  /** "engine|family" → first supported (the maturity clock's start). */
  familySince: Record<string, string>;
  families: string[];
  devices: string[];
  formats: string[];
  moe: { experts: [number, number]; active: [number, number] } | null;
  tp: number[];
  ep: number[];
  links: string[];
}

export function corpusSupport(facts: RowFacts[]): CorpusSupport {
  const engines: CorpusSupport["engines"] = {};
  const familySince: Record<string, string> = {};
  const engineDevices: Record<string, Set<string>> = {};
  const uniq = (xs: (string | number)[]) => [...new Set(xs)].sort() as never;
  let moe: CorpusSupport["moe"] = null;
  for (const f of facts) {
    const e = (engines[f.engine] ??= { first: f.date, last: f.date, rows: 0, moeRows: 0, u: [] });
    if (f.date < e.first) e.first = f.date;
    if (f.date > e.last) e.last = f.date;
    e.rows++;
    if (f.moe) e.moeRows++;
    e.u.push(f.u);
    (engineDevices[f.engine] ??= new Set()).add(f.device);
    const k = `${f.engine}|${f.family}`;
    if (!familySince[k] || f.since < familySince[k]) familySince[k] = f.since;
    if (f.moe) {
      if (!moe) moe = { experts: [f.moe.experts, f.moe.experts], active: [f.moe.active, f.moe.active] };
      moe.experts = [Math.min(moe.experts[0], f.moe.experts), Math.max(moe.experts[1], f.moe.experts)];
      moe.active = [Math.min(moe.active[0], f.moe.active), Math.max(moe.active[1], f.moe.active)];
    }
  }
  for (const e of Object.values(engines)) e.u.sort((a, b) => a - b);
  return {
    rows: facts.length,
    engines,
    engineDevices: Object.fromEntries(Object.entries(engineDevices).map(([k, v]) => [k, [...v].sort()])),
    familySince,
    families: uniq(facts.map((f) => f.family)),
    devices: uniq(facts.map((f) => f.device)),
    formats: uniq(facts.flatMap((f) => f.formats)),
    moe,
    tp: [...new Set(facts.map((f) => f.tp))].sort((a, b) => a - b),
    ep: [...new Set(facts.map((f) => f.ep))].sort((a, b) => a - b),
    links: uniq(facts.map((f) => f.link)),
  };
}

export const EXTRAPOLATION_KINDS = [
  "engine",
  "release",
  "family",
  "moe-engine",
  "moe-shape",
  "hardware",
  "engine-hardware",
  "quant",
  "layout",
] as const;
export type ExtrapolationKind = (typeof EXTRAPOLATION_KINDS)[number];

export interface Extrapolation {
  kind: ExtrapolationKind;
  detail: string;
}

/** What a query looks like to the support check (its facts; `date` absent when no engine version was given). */
export type QueryFacts = Omit<RowFacts, "id" | "date" | "since" | "u"> & { date?: string };

const month = (iso: string) => iso.slice(0, 7);

/** Every way the query lies outside the support, each with a sentence. */
export function extrapolations(q: QueryFacts, s: CorpusSupport): Extrapolation[] {
  const out: Extrapolation[] = [];
  const e = s.engines[q.engine];
  if (!e) out.push({ kind: "engine", detail: `no ${q.engine} row in the corpus` });
  else if (q.date) {
    // Dates in the corpus are often known to the month: a release within the same month is inside.
    if (month(q.date) < month(e.first))
      out.push({ kind: "release", detail: `no ${q.engine} row before ${month(e.first)}` });
    else if (month(q.date) > month(e.last))
      out.push({ kind: "release", detail: `no ${q.engine} row after ${month(e.last)}` });
  }
  if (!s.families.includes(q.family)) out.push({ kind: "family", detail: `no ${q.family} row in the corpus` });
  if (q.moe) {
    if (e && e.moeRows === 0) out.push({ kind: "moe-engine", detail: `no MoE row on ${q.engine}` });
    const m = s.moe;
    const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
    if (!m) out.push({ kind: "moe-shape", detail: "no MoE row in the corpus" });
    else {
      const why: string[] = [];
      if (q.moe.experts < m.experts[0] || q.moe.experts > m.experts[1])
        why.push(`${q.moe.experts} experts (rows: ${m.experts[0]}–${m.experts[1]})`);
      if (q.moe.active < m.active[0] * 0.999 || q.moe.active > m.active[1] * 1.001)
        why.push(`active ratio ${pct(q.moe.active)} (rows: ${pct(m.active[0])}–${pct(m.active[1])})`);
      if (why.length) out.push({ kind: "moe-shape", detail: why.join(", ") });
    }
  }
  if (!s.devices.includes(q.device)) out.push({ kind: "hardware", detail: `no ${q.device} row in the corpus` });
  // The engine and the device class each measured, never together: an engine's kernels, graphs and
  // defaults on a GPU generation it was not measured on (leaving one engine × generation out moves more
  // than the shared spreads say).
  else if (e && q.device !== "probe" && !(s.engineDevices[q.engine] ?? []).includes(q.device))
    out.push({ kind: "engine-hardware", detail: `no ${q.engine} row on ${q.device}` });
  const fmts = q.formats.filter((f) => !s.formats.includes(f));
  if (fmts.length) out.push({ kind: "quant", detail: `no row with ${fmts.join(", ")} weights` });
  const lay: string[] = [];
  if (!s.tp.includes(q.tp)) lay.push(`TP ${q.tp}`);
  if (q.ep > 1 && !s.ep.includes(q.ep)) lay.push(`EP ${q.ep}`);
  if (q.link !== "none" && !s.links.includes(q.link)) lay.push(`${q.link} interconnect`);
  if (lay.length) out.push({ kind: "layout", detail: `never measured: ${lay.join(", ")}` });
  return out;
}

/** The link kind of a resolved input ("none" without tensor parallelism). */
export function linkKind(r: Resolved): string {
  if (r.tp <= 1 && r.ep <= 1) return "none";
  return r.link.kind;
}

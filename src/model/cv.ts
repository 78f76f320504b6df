// Grouped cross-validation of the corpus fit: leave one source (paper, blog, benchmark suite, issue thread) out, one
// model family out, one engine out — the whole fit, hyperparameters included, redone without the group — and row-level
// leave-one-out as a fourth line (it leaks: a row's siblings stay in the fit). The grouped folds also estimate how much
// each kind of extrapolation (support.ts) widens the interval: the out-of-support variance inflations. Pure, but for
// reading the checked-in inflations (shippedInflations).

import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Corpus, CorpusRow } from "./corpus.ts";
import { CORPUS_FILE, shippedCorpus } from "./corpus.ts";
import { engineDate } from "./engines.ts";
import type { CorpusFit, StepParts } from "./priors.ts";
import {
  cachedInflations,
  corpusFiles,
  corpusRowData,
  decodeRows,
  deviceClass,
  effectiveParameters,
  fitCorpus,
  isBurstRow,
  predictive,
  predictiveSteps,
  queryFacts,
  rowPredictSteps,
  servingRows,
  Z80,
} from "./priors.ts";
import { fitStamp } from "./priors-cache.ts";
import type { Resolved } from "./resolve.ts";
import { resolve } from "./resolve.ts";
import type { Extrapolation, ExtrapolationKind, QueryFacts } from "./support.ts";
import { EXTRAPOLATION_KINDS, extrapolations } from "./support.ts";

export type Grouping = "source" | "family" | "engine" | "row" | "engine-gen" | "future";
export const GROUPINGS: Grouping[] = ["source", "family", "engine", "row", "engine-gen", "future"];

/** The rows the fit reads as evidence and the cross-validation scores: decode steps and serving benchmarks. */
export function evidenceRows(c: Corpus): CorpusRow[] {
  return [...decodeRows(c), ...servingRows(c)];
}

/** When a row's number was published (its own date, else its engine release's). */
export function publishedDate(row: CorpusRow): string {
  const d = row.published ?? row.engine.date;
  return d.length === 7 ? `${d}-15` : d;
}

/** GPU generation of a row's device (its device class: hopper-hbm, blackwell-hbm, cdna3-hbm, …). */
export function generationOf(row: CorpusRow): string {
  return deviceClass(resolve(row.input).gpu);
}

/** A datacenter serving row: vLLM, SGLang or TensorRT-LLM on a datacenter accelerator (HBM: A100 to B300, MI300X to
 * MI355X), the deployments this tool's users run. */
export function isDatacenter(row: CorpusRow): boolean {
  if (!["vllm", "sglang", "trtllm"].includes(row.engine.name)) return false;
  const g = generationOf(row);
  return /hbm/.test(g);
}

/** The source document of a row (the corpus's `sourceKey`: one slug per paper, blog, benchmark suite or thread). */
export function sourceKey(row: CorpusRow): string {
  return row.sourceKey;
}

/** The model family of a row (the corpus's `family`). */
export function familyKey(row: CorpusRow): string {
  return row.family;
}

export function groupOf(row: CorpusRow, g: Grouping): string {
  if (g === "source") return sourceKey(row);
  if (g === "family") return familyKey(row);
  if (g === "engine") return row.engine.name;
  if (g === "engine-gen") return `${row.engine.name} × ${generationOf(row)}`;
  return row.id;
}

/** Leave-future-out cut dates: quarterly, each with rows on both sides. A row is scored by the fit on every row
 * published before the latest cut that precedes it (the newest model a user would have had). */
export const FUTURE_CUTS = ["2025-04-01", "2025-07-01", "2025-10-01", "2026-01-01", "2026-04-01"];

export interface CvRow {
  id: string;
  label: string;
  group: string;
  moe: boolean;
  measuredMs: number;
  centreMs: number;
  /** log-sd of the predictive interval (before any widening). */
  logSd: number;
  low: number;
  high: number;
  inside: boolean;
  /** (centre − measured) / measured */
  error: number;
  ratio: number;
  /** How the row lies outside the fold's training rows. */
  extrapolations: Extrapolation[];
  /** A serving benchmark (TPOT under load) rather than a batch-1 decode step. */
  serving: boolean;
  datacenter: boolean;
}

export interface CvScore {
  n: number;
  medianAbsError: number;
  coverage: number;
  medianRatio: number;
}

export interface CvResult {
  grouping: Grouping;
  folds: number;
  rows: CvRow[];
  all: CvScore;
  dense: CvScore;
  moe: CvScore;
  datacenter: CvScore;
  /** Per fold: the spreads its empirical-Bayes search chose (cold start: selection inside the fold). */
  hypers?: { fold: string; hyper: CorpusFit["hyper"] }[];
}

function median(xs: number[]): number {
  if (!xs.length) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

export function score(rows: CvRow[]): CvScore {
  return {
    n: rows.length,
    medianAbsError: median(rows.map((r) => Math.abs(r.error))),
    coverage: rows.length ? rows.filter((r) => r.inside).length / rows.length : Number.NaN,
    medianRatio: median(rows.map((r) => r.ratio)),
  };
}

function result(grouping: Grouping, folds: number, rows: CvRow[], hypers?: CvResult["hypers"]): CvResult {
  return {
    grouping,
    folds,
    rows,
    all: score(rows),
    dense: score(rows.filter((r) => !r.moe)),
    moe: score(rows.filter((r) => r.moe)),
    datacenter: score(rows.filter((r) => r.datacenter)),
    ...(hypers ? { hypers } : {}),
  };
}

/** The facts of a corpus row as a query (its engine date given, as a user with that release would). */
function rowQuery(c: Corpus, id: string): QueryFacts {
  const f = corpusRowData(c).facts.find((x) => x.id === id)!;
  const { id: _i, since: _s, u: _u, ...q } = f;
  return q;
}

/** Predicts one held-out row from a fit that never saw it. */
function heldOut(c: Corpus, f: CorpusFit, row: CorpusRow, group: string): CvRow {
  const steps = rowPredictSteps(c, row, f.support);
  const serving = steps.length > 1 || row.kind === "benchmark";
  const p = serving ? predictiveSteps(f, steps, true, 0, true, isBurstRow(row)) : predictive(f, steps[0].sp);
  return {
    id: row.id,
    label: row.label,
    group,
    moe: Boolean(steps[0].sp.groups.moe),
    measuredMs: row.measuredMs,
    centreMs: p.ms,
    logSd: p.logSd,
    low: p.low80,
    high: p.high80,
    inside: row.measuredMs >= p.low80 && row.measuredMs <= p.high80,
    error: (p.ms - row.measuredMs) / row.measuredMs,
    ratio: p.high80 / p.low80,
    extrapolations: extrapolations(rowQuery(c, row.id), f.support),
    serving,
    datacenter: isDatacenter(row),
  };
}

export interface CvOptions {
  /** Warm-start each fold's spreads at the full fit's (faster; the headline is cold: selection inside the fold). */
  warm?: boolean;
  /** Only these rows' groups are folded and scored (every row is still fitted when it is not held out). */
  only?: (r: CorpusRow) => boolean;
}

/** The folds of a grouping: which rows each fit leaves out, and which of them it scores. */
function foldsOf(c: Corpus, grouping: Grouping): { name: string; exclude: Set<string>; score: CorpusRow[] }[] {
  const rows = evidenceRows(c);
  if (grouping === "future") {
    const out: { name: string; exclude: Set<string>; score: CorpusRow[] }[] = [];
    FUTURE_CUTS.forEach((cut, i) => {
      const next = FUTURE_CUTS[i + 1] ?? "9999";
      const after = rows.filter((r) => publishedDate(r) >= cut);
      const window = after.filter((r) => publishedDate(r) < next);
      if (window.length && after.length < rows.length)
        out.push({ name: `published ≥ ${cut}`, exclude: new Set(after.map((r) => r.id)), score: window });
    });
    return out;
  }
  const groups = new Map<string, CorpusRow[]>();
  for (const r of rows) {
    const g = groupOf(r, grouping);
    groups.set(g, [...(groups.get(g) ?? []), r]);
  }
  return [...groups].map(([name, members]) => ({ name, exclude: new Set(members.map((m) => m.id)), score: members }));
}

/** One grouped cross-validation: for each fold, refit without its rows (spreads included) and predict them. */
export function groupedCv(
  c: Corpus,
  grouping: Grouping,
  full: CorpusFit = fitCorpus(c),
  opts: CvOptions = {},
): CvResult {
  const out: CvRow[] = [];
  const hypers: NonNullable<CvResult["hypers"]> = [];
  const folds = foldsOf(c, grouping).filter((fd) => !opts.only || fd.score.some(opts.only));
  for (const fd of folds) {
    const f = fitCorpus(c, { exclude: fd.exclude, ...(opts.warm ? { hyperStart: full.hyper } : {}) });
    hypers.push({ fold: fd.name, hyper: f.hyper });
    for (const m of fd.score) if (!opts.only || opts.only(m)) out.push(heldOut(c, f, m, fd.name));
  }
  const order = new Map(evidenceRows(c).map((r, i) => [r.id, i]));
  out.sort((a, b) => order.get(a.id)! - order.get(b.id)!);
  return result(grouping, folds.length, out, hypers);
}

// ---------------------------------------------------------------- out-of-support variance inflations

export interface Inflation {
  kind: ExtrapolationKind;
  /** Extra variance as a share of the predicted variance: the interval's log-width × √(1 + a). */
  a: number;
  /** Held-out predictions (pooled over the grouped folds) in which the kind occurred. */
  n: number;
  /** "estimated" from n rows, or "pooled" (no fold had the kind: the estimate over every extrapolating row). */
  basis: "estimated" | "pooled";
}

export interface Inflations {
  kinds: Record<ExtrapolationKind, Inflation>;
  /**
   * Calibration of the 80 % interval, dense and MoE rows apart: the factor on the log-width that puts 80 % of the
   * held-out rows inside (after the kinds' widening), clamped to 0.5–2. Below 1 when the hierarchical priors' spreads
   * (several stay at their hyperprior centres) overstate the grouped folds' errors.
   */
  scale: { dense: number; moe: number; n: { dense: number; moe: number } };
  /** The pooled estimate over every held-out row with any extrapolation. */
  any: { a: number; n: number };
  /** Which groupings' held-out rows were pooled. */
  from: Grouping[];
}

/** The standard normal's 0.9 quantile: an 80 % two-sided interval is centre · e^(±Z80·sd). */
const Z80_CV = 1.2815515655446004;

/** Median of χ²₁: under a calibrated interval, half the squared standardised errors lie below it. */
const CHI2_1_MEDIAN = 0.454936423119572;

/**
 * Variance inflations per extrapolation kind from held-out rows: with z² = (log measured − log centre)² / predicted
 * variance, a row with kinds K should have median z² = χ²₁'s median × (1 + Σ_K a_k). Each a_k is fitted by backfitting
 * on the median (robust to a single wild row), floored at 0: extrapolating never narrows an interval (an additive
 * model of negative excesses is ill-posed: their sum can pass −1).
 */
export function estimateInflations(rows: CvRow[], from: Grouping[]): Inflations {
  const data = rows.map((r) => ({
    z2: Math.log(r.measuredMs / r.centreMs) ** 2 / r.logSd ** 2,
    kinds: [...new Set(r.extrapolations.map((e) => e.kind))],
  }));
  const a = Object.fromEntries(EXTRAPOLATION_KINDS.map((k) => [k, 0])) as Record<ExtrapolationKind, number>;
  const withKind = (k: ExtrapolationKind) => data.filter((d) => d.kinds.includes(k));
  for (let it = 0; it < 50; it++) {
    let moved = 0;
    for (const k of EXTRAPOLATION_KINDS) {
      const ds = withKind(k);
      if (!ds.length) continue;
      const ratios = ds.map((d) => d.z2 / CHI2_1_MEDIAN / (1 + d.kinds.reduce((s, j) => s + (j === k ? 0 : a[j]), 0)));
      // The kind's own share: median ratio − 1, after the other kinds present in the same rows.
      const next = Math.max(0, median(ratios) - 1);
      moved = Math.max(moved, Math.abs(next - a[k]));
      a[k] = next;
    }
    if (moved < 1e-6) break;
  }
  const scaleOf = (moe: boolean) => {
    const zs = rows
      .filter((r) => r.moe === moe)
      .map((r) => {
        const k = [...new Set(r.extrapolations.map((e) => e.kind))];
        const widen = 1 + k.reduce((s, j) => s + a[j], 0);
        return Math.abs(Math.log(r.measuredMs / r.centreMs)) / (r.logSd * Math.sqrt(widen));
      })
      .sort((x, y) => x - y);
    if (zs.length < 10) return { s: 1, n: zs.length };
    // The 80th percentile of |z| (linear between order statistics) against the normal's.
    const h = 0.8 * (zs.length - 1);
    const lo = Math.floor(h);
    const q = zs[lo] + (h - lo) * ((zs[lo + 1] ?? zs[lo]) - zs[lo]);
    return { s: Math.min(2, Math.max(0.5, q / Z80_CV)), n: zs.length };
  };
  const sd = scaleOf(false);
  const sm = scaleOf(true);
  const scale = { dense: sd.s, moe: sm.s, n: { dense: sd.n, moe: sm.n } };
  const ext = data.filter((d) => d.kinds.length > 0);
  const any = { a: ext.length ? Math.max(0, median(ext.map((d) => d.z2)) / CHI2_1_MEDIAN - 1) : 0, n: ext.length };
  const kinds = Object.fromEntries(
    EXTRAPOLATION_KINDS.map((k) => {
      const n = withKind(k).length;
      return [k, { kind: k, a: n ? a[k] : any.a, n, basis: n ? "estimated" : "pooled" }];
    }),
  ) as Record<ExtrapolationKind, Inflation>;
  return { kinds, scale, any, from };
}

/** The variance multiplier's excess (Σ a_k over the distinct kinds found) and each kind's factor on the interval. */
export function inflationFor(
  ex: Extrapolation[],
  inf: Inflations,
  moe = false,
): { a: number; each: (Extrapolation & { inflation: number })[] } {
  const seen = new Set<ExtrapolationKind>();
  let a = 0;
  const each = ex.map((e) => {
    const k = inf.kinds[e.kind];
    if (!seen.has(e.kind)) {
      seen.add(e.kind);
      a += k.a;
    }
    return { ...e, inflation: Math.sqrt(1 + k.a) };
  });
  // The calibration scale multiplies the whole variance: 1 + a_total = scale² · (1 + Σ a_k).
  const s = moe ? inf.scale.moe : inf.scale.dense;
  return { a: s * s * (1 + a) - 1, each };
}

/**
 * The grouped results re-scored with out-of-support widening, the inflations cross-fitted: a fold's rows are widened
 * by inflations estimated from every other fold's held-out rows (never from their own errors).
 */
export function widened(res: CvResult, pool: CvRow[], from: Grouping[]): CvResult {
  const byGroup = new Map<string, CvRow[]>();
  for (const r of res.rows) byGroup.set(r.group, [...(byGroup.get(r.group) ?? []), r]);
  const out: CvRow[] = [];
  for (const [, members] of byGroup) {
    const ids = new Set(members.map((m) => m.id));
    const inf = estimateInflations(
      pool.filter((p) => !ids.has(p.id)),
      from,
    );
    for (const m of members) {
      const { a } = inflationFor(m.extrapolations, inf, m.moe);
      const sd = m.logSd * Math.sqrt(1 + a);
      const low = m.centreMs * Math.exp(-Z80 * sd);
      const high = m.centreMs * Math.exp(Z80 * sd);
      out.push({
        ...m,
        logSd: sd,
        low,
        high,
        inside: m.measuredMs >= low && m.measuredMs <= high,
        ratio: high / low,
      });
    }
  }
  const order = new Map(res.rows.map((r, i) => [r.id, i]));
  out.sort((x, y) => order.get(x.id)! - order.get(y.id)!);
  return result(res.grouping, res.folds, out, res.hypers);
}

export interface CvReport {
  /** As fitted (no widening). */
  plain: Partial<Record<Grouping, CvResult>>;
  /** With out-of-support widening, inflations cross-fitted across folds (row LOO is not widened: it never extrapolates far). */
  widened: Partial<Record<Exclude<Grouping, "row">, CvResult>>;
  /** Inflations from every pooled grouped fold's held-out rows (what predictions use). */
  inflations: Inflations;
  effectiveParameters: number;
  parameters: number;
  /** Per row: in-sample error (the full fit) beside its left-out errors. */
  perRow: { id: string; inSample: number; source: number; family: number; engine: number; row?: number }[];
  hyper: CorpusFit["hyper"];
}

/** The groupings whose held-out rows estimate the inflations (predictions widen by what they found). */
const POOLED: Exclude<Grouping, "row">[] = ["source", "family", "engine"];

export interface CrossValidateOptions {
  /** Also row-level leave-one-out (decode rows only: it leaks siblings; a fourth line). */
  rowLoo?: boolean;
  /** Extra groupings beside the pooled ones (engine × GPU generation, leave-future-out). */
  extra?: Exclude<Grouping, "row" | "source" | "family" | "engine">[];
  /** Warm-start the folds at the full fit's spreads (faster, optimistic); default cold. */
  warm?: boolean;
}

/** Every grouped cross-validation, the inflations they imply, and the in-sample contrast. */
export function crossValidate(c: Corpus = shippedCorpus(), opts: CrossValidateOptions = {}): CvReport {
  const full = fitCorpus(c);
  const plain: CvReport["plain"] = {};
  for (const g of POOLED) plain[g] = groupedCv(c, g, full, { warm: opts.warm });
  for (const g of opts.extra ?? []) plain[g] = groupedCv(c, g, full, { warm: opts.warm });
  if (opts.rowLoo) plain.row = groupedCv(c, "row", full, { warm: true, only: (r) => r.kind === "decode" });
  const pool = POOLED.flatMap((g) => plain[g]!.rows);
  const wid: CvReport["widened"] = {};
  for (const g of [...POOLED, ...(opts.extra ?? [])]) wid[g] = widened(plain[g]!, pool, POOLED);
  const inSample = new Map(
    evidenceRows(c).map((row) => {
      const steps = rowPredictSteps(c, row, full.support);
      const p = steps.length > 1 ? predictiveSteps(full, steps, true, 0, true) : predictive(full, steps[0].sp);
      return [row.id, (p.ms - row.measuredMs) / row.measuredMs];
    }),
  );
  const err = (g: Grouping, id: string) => plain[g]?.rows.find((r) => r.id === id)?.error ?? Number.NaN;
  return {
    plain,
    widened: wid,
    inflations: estimateInflations(pool, POOLED),
    effectiveParameters: effectiveParameters(full),
    parameters: full.names.length,
    perRow: [...inSample].map(([id, e]) => ({
      id,
      inSample: e,
      source: err("source", id),
      family: err("family", id),
      engine: err("engine", id),
      ...(plain.row ? { row: err("row", id) } : {}),
    })),
    hyper: full.hyper,
  };
}

/** Inflations alone (the grouped folds, no row LOO): what the build stores beside the fit. */
export function corpusInflations(c: Corpus = shippedCorpus()): Inflations {
  return crossValidate(c).inflations;
}

// ---------------------------------------------------------------- the inflations predictions use

/** Checked-in inflations for runs from src/ (tsx), stamped like the build's cache; the build stores its own. */
export const INFLATIONS_FILE = fileURLToPath(new URL("./corpus/cv-inflations.json", import.meta.url));
const CV_FILE = fileURLToPath(import.meta.url);

export interface InflationsFile {
  kind: "inferscope.cv-inflations";
  stamp: string;
  inflations: Inflations;
}

/** The stamp the checked-in file must carry: the corpus and every module the cross-validation runs. */
export function inflationsStamp(): string {
  return fitStamp(CV_FILE, corpusFiles()).stamp;
}

/** What `bench/model.ts --write-inflations` writes to INFLATIONS_FILE. */
export function inflationsFile(inf: Inflations = corpusInflations()): InflationsFile {
  return { kind: "inferscope.cv-inflations", stamp: inflationsStamp(), inflations: inf };
}

function isInflations(x: unknown): x is Inflations {
  const k = (x as Inflations | undefined)?.kinds;
  return (
    typeof k === "object" &&
    k !== null &&
    EXTRAPOLATION_KINDS.every((e) => typeof k[e]?.a === "number") &&
    typeof (x as Inflations).scale?.dense === "number" &&
    typeof (x as Inflations).scale?.moe === "number"
  );
}

/** Where the inflations in use came from. */
export type InflationsSource = "build cache" | "checked-in file" | "checked-in file (stale)" | "computed now";

let shipped: { inflations: Inflations; source: InflationsSource } | undefined;

/**
 * The inflations for the shipped corpus: the build's cache, else the checked-in file when its stamp matches the code
 * and corpus in this checkout, else the grouped cross-validation run now (seconds; once per process).
 */
export function shippedInflations(): { inflations: Inflations; source: InflationsSource } {
  if (shipped) return shipped;
  const cached = cachedInflations();
  if (isInflations(cached)) return (shipped = { inflations: cached, source: "build cache" });
  try {
    const j = JSON.parse(readFileSync(INFLATIONS_FILE, "utf8")) as InflationsFile;
    // A stale file (the corpus or the model code changed since `bench:model --write-inflations`) is still the best
    // estimate at hand: recomputing means some 80 refits (minutes). test/model/validation.test.ts fails while it is
    // stale, so a shipped build never carries one.
    if (j.kind === "inferscope.cv-inflations" && isInflations(j.inflations))
      return (shipped = {
        inflations: j.inflations,
        source: j.stamp === inflationsStamp() ? "checked-in file" : "checked-in file (stale)",
      });
  } catch {
    // missing or unreadable: computed below
  }
  return (shipped = { inflations: corpusInflations(), source: "computed now" });
}

export interface SupportCheck {
  /** Each extrapolation with its own factor on the interval's log-width. */
  extrapolations: (Extrapolation & { inflation: number })[];
  /** Σ a_k: the predicted variance is multiplied by 1 + a. */
  a: number;
  /** Parameters carrying ≥ 5 % of the step that a single corpus row informed. */
  singleRow: string[];
  source?: InflationsSource;
}

/** How far a prediction lies from the corpus, what that does to its interval, and what rests on a single row. */
/** The extrapolations of one input against the fit's support (what supportCheck widens by). */
function extrapolationsOf(r: Resolved, f: CorpusFit): Extrapolation[] {
  const q: QueryFacts = { ...queryFacts(r) };
  const v = r.input.engineVersion;
  const d = v ? engineDate(r.engine, v) : undefined;
  if (d) q.date = d.date;
  const out = extrapolations(q, f.support);
  // A version the release table cannot date (it sorts after the newest listed release) is a release no row measured,
  // whatever date the table gives it; a build older than the engine's first run of the family may not run it at all.
  if (d?.beyond === "after" && !out.some((e) => e.kind === "release"))
    out.push({ kind: "release", detail: `${r.engine} ${v} sorts after every listed release (${d.how})` });
  const since = f.support.familySince[`${r.engine}|${q.family}`];
  if (d && since && d.date < since && !out.some((e) => e.kind === "release"))
    out.push({
      kind: "release",
      detail: `${r.engine} ${v} (${d.date}) predates ${r.engine}'s first run of ${q.family} in the corpus (${since})`,
    });
  return out;
}

/** The variance inflation's excess alone (no notes): the what-if grid's fast path widens as predict() does. */
export function supportInflation(r: Resolved, f: CorpusFit): number {
  return inflationFor(extrapolationsOf(r, f), shippedInflations().inflations, Boolean(r.arch.moe)).a;
}

export function supportCheck(r: Resolved, sp: StepParts, f: CorpusFit): SupportCheck {
  const ex = extrapolationsOf(r, f);
  const rows = new Map(f.params.map((p) => [p.name, p.rows]));
  const base = predictive(f, sp);
  const single = new Set<string>();
  sp.parts.forEach((p, i) => {
    if (base.parts[i].ms / base.ms < 0.05) return;
    for (const k of Object.keys(p.coef)) if (rows.get(k) === 1) single.add(k);
  });
  const s = shippedInflations();
  const { a, each } = inflationFor(ex, s.inflations, Boolean(r.arch.moe));
  return { extrapolations: each, a, singleRow: [...single].sort(), source: s.source };
}

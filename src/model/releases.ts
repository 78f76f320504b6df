// Engine release tables (data): release name → date, so `--engine-version v0.4.1`, `0.4.1`, `b6918` or `2025-08`
// all resolve to the date the maturity clock needs. Pure.
//
// Where the dates come from (`approx: true` marks a date known to the month, recalled from the release page and not
// re-checked against a snapshot here; the others were read from a snapshot or from a corpus row's own source):
// - TGI: the git tags of huggingface/text-generation-inference (tag dates read from a mirror of the repository).
// - vLLM, SGLang, TensorRT-LLM: the GitHub releases pages of vllm-project/vllm, sgl-project/sglang, NVIDIA/TensorRT-LLM.
// - llama.cpp: builds are tagged bNNNN on every master merge (ggml-org/llama.cpp releases); the build numbers below are
//   sampled so that any build's date is interpolated by number between its neighbours. b1631 is dated by the corpus
//   (validation-public.md V11, build 1631 of 2023-12-16), b4748 by the shared llama.cpp build (2025-02-20).
// - MLX: mlx-lm 0.28.2 (validation-public.md V9).
// - Releases added for the serving corpus (corpus/serving/) are marked approx: each is dated by the first commit of
//   SemiAnalysisAI/InferenceX whose benchmark configs pin that image (an upper bound, usually days after the release
//   page), or, where noted, by the earliest public page that ran it.
import { UsageError } from "../errors.ts";
import { editDistance } from "./hardware.ts";

export interface Release {
  version: string;
  date: string;
  /** Known to the month only. */
  approx?: boolean;
}

export interface ReleaseTable {
  engine: string;
  source: string;
  releases: Release[];
}

type Row = [version: string, date: string, approx?: "approx"];

const table = (engine: string, source: string, rows: Row[]): ReleaseTable => ({
  engine,
  source,
  releases: rows
    .map(([version, date, a]) => ({ version, date, ...(a ? { approx: true } : {}) }))
    .sort((x, y) => x.date.localeCompare(y.date)),
});

export const RELEASE_TABLES: ReleaseTable[] = [
  table("vllm", "github.com/vllm-project/vllm/releases", [
    ["v0.1.0", "2023-06-20"],
    ["v0.2.0", "2023-09-28"],
    ["v0.2.7", "2024-01-04", "approx"],
    ["v0.3.0", "2024-01-31"],
    ["v0.3.3", "2024-03-01", "approx"],
    ["v0.4.0", "2024-03-30"],
    ["v0.4.1", "2024-04-24"],
    ["v0.4.2", "2024-05-05"],
    ["v0.4.3", "2024-06-01", "approx"],
    ["v0.5.0", "2024-06-11"],
    ["v0.5.3", "2024-07-23", "approx"],
    ["v0.5.4", "2024-08-05", "approx"],
    ["v0.6.0", "2024-09-04"],
    ["v0.6.3", "2024-10-14", "approx"],
    ["v0.6.4", "2024-11-15", "approx"],
    ["v0.6.5", "2024-12-17", "approx"],
    ["v0.7.0", "2025-01-27"],
    ["v0.7.3", "2025-02-20", "approx"],
    ["v0.8.0", "2025-03-18"],
    ["v0.8.4", "2025-04-14", "approx"],
    ["v0.8.5", "2025-04-28", "approx"],
    ["v0.9.0", "2025-05-15"],
    ["v0.9.1", "2025-06-10", "approx"],
    ["v0.9.2", "2025-07-08", "approx"],
    ["v0.10.0", "2025-07-24"],
    ["v0.10.1", "2025-08-18", "approx"],
    ["v0.10.2", "2025-09-13", "approx"],
    ["v0.11.0", "2025-10-02"],
    ["v0.11.1", "2025-11-18", "approx"],
    ["v0.11.2", "2025-12-05", "approx"],
    // v0.13.0: the GPUStack DeepSeek-V3.2 page of 2025-12-22 ran it (InferenceX pinned it on 2026-01-02).
    ["v0.13.0", "2025-12-22", "approx"],
    ["v0.14.0", "2026-01-21", "approx"],
    ["v0.15.1", "2026-02-18", "approx"],
    ["v0.16.0", "2026-02-26", "approx"],
    ["v0.17.0", "2026-03-09", "approx"],
    ["v0.18.0", "2026-03-23", "approx"],
    ["v0.19.0", "2026-04-05", "approx"],
    ["v0.20.0", "2026-04-28", "approx"],
    ["v0.21.0", "2026-05-15", "approx"],
    ["v0.22.0", "2026-05-29", "approx"],
    ["v0.23.0", "2026-06-24", "approx"],
    ["v0.24.0", "2026-07-04", "approx"],
    ["v0.25.0", "2026-07-12", "approx"],
  ]),
  table("sglang", "github.com/sgl-project/sglang/releases", [
    ["v0.1.5", "2024-01-24", "approx"],
    ["v0.1.14", "2024-04-15", "approx"],
    ["v0.2.0", "2024-07-25", "approx"],
    ["v0.3.0", "2024-09-19", "approx"],
    ["v0.3.5", "2024-11-03", "approx"],
    ["v0.4.0", "2024-12-04", "approx"],
    ["v0.4.1", "2024-12-26", "approx"],
    ["v0.4.2", "2025-01-27", "approx"],
    ["v0.4.3", "2025-02-14", "approx"],
    ["v0.4.4", "2025-03-13", "approx"],
    ["v0.4.5", "2025-04-07", "approx"],
    ["v0.4.6", "2025-04-27", "approx"],
    ["v0.4.7", "2025-06-10", "approx"],
    ["v0.4.8", "2025-06-24", "approx"],
    ["v0.4.9", "2025-07-05", "approx"],
    ["v0.4.10", "2025-07-31", "approx"],
    ["v0.5.0", "2025-08-23", "approx"],
    // The gpt-oss rows (validation-public.md V12/V13): the LMSYS blog of 2025-08-27 ran v0.5.1.post3.
    ["v0.5.1.post3", "2025-08-27"],
    ["v0.5.2", "2025-09-11", "approx"],
    ["v0.5.3", "2025-10-06", "approx"],
    ["v0.5.4", "2025-10-26", "approx"],
    // v0.5.3rc0 precedes v0.5.3rc1 (no page dates it on its own): dated at rc1's upper bound.
    ["v0.5.3rc0", "2025-09-20", "approx"],
    ["v0.5.3rc1", "2025-09-20", "approx"],
    ["v0.5.5", "2025-11-10", "approx"],
    ["v0.5.5.post2", "2025-12-04", "approx"],
    ["v0.5.5.post3", "2025-12-04", "approx"],
    // v0.5.6.post1: the SGLang cookbook's DeepSeek-R1 results of 2025-12-14 ran it (InferenceX pinned it on 12-16).
    ["v0.5.6.post1", "2025-12-14", "approx"],
    // v0.5.6.post2: the GPUStack DeepSeek-V3.2 page of 2025-12-22 ran it (InferenceX pinned it on 2025-12-30).
    ["v0.5.6.post2", "2025-12-22", "approx"],
    ["v0.5.7", "2026-01-12", "approx"],
    ["v0.5.8", "2026-01-27", "approx"],
    ["v0.5.8.post1", "2026-02-06", "approx"],
    ["v0.5.9", "2026-02-26", "approx"],
    ["v0.5.10", "2026-04-08", "approx"],
    ["v0.5.10.post1", "2026-04-14", "approx"],
    ["v0.5.11", "2026-05-12", "approx"],
    ["v0.5.12", "2026-05-17", "approx"],
    ["v0.5.12.post1", "2026-06-11", "approx"],
    ["v0.5.13", "2026-07-02", "approx"],
    ["v0.5.14", "2026-07-04", "approx"],
  ]),
  table("llamacpp", "github.com/ggml-org/llama.cpp/releases (bNNNN build tags)", [
    ["b1000", "2023-08-22", "approx"],
    ["b1631", "2023-12-16"],
    ["b2000", "2024-01-27", "approx"],
    ["b2500", "2024-03-22", "approx"],
    ["b3000", "2024-05-26", "approx"],
    ["b3500", "2024-08-02", "approx"],
    ["b4000", "2024-10-31", "approx"],
    ["b4500", "2025-01-17", "approx"],
    // ../shared/engines/llama.cpp/README.md: build b4748 is commit c392e509 of 2025-02-20 (stream-quirks.md). The
    // approx neighbours b4500 and b5000 interpolate it to 2025-02-22.
    ["b4748", "2025-02-20"],
    ["b5000", "2025-03-31", "approx"],
    ["b5500", "2025-05-27", "approx"],
    ["b6000", "2025-07-26", "approx"],
    ["b6500", "2025-09-16", "approx"],
    ["b6918", "2025-11-01", "approx"],
    ["b7000", "2025-11-10", "approx"],
  ]),
  table("trtllm", "github.com/NVIDIA/TensorRT-LLM/releases", [
    ["v0.5.0", "2023-10-19", "approx"],
    ["v0.6.1", "2023-12-05", "approx"],
    ["v0.7.1", "2024-01-10", "approx"],
    ["v0.8.0", "2024-03-05", "approx"],
    ["v0.9.0", "2024-04-16", "approx"],
    ["v0.10.0", "2024-06-05", "approx"],
    ["v0.11.0", "2024-07-17", "approx"],
    ["v0.12.0", "2024-08-29", "approx"],
    ["v0.13.0", "2024-09-26", "approx"],
    ["v0.14.0", "2024-11-01", "approx"],
    ["v0.15.0", "2024-12-04", "approx"],
    ["v0.16.0", "2024-12-24", "approx"],
    ["v0.17.0", "2025-02-10", "approx"],
    ["v0.18.0", "2025-03-18", "approx"],
    ["v0.19.0", "2025-05-05", "approx"],
    ["v0.20.0", "2025-06-10", "approx"],
    ["v0.21.0", "2025-07-22", "approx"],
    ["v1.0.0", "2025-09-24", "approx"],
    ["1.1.0rc2", "2025-09-05", "approx"],
    ["1.1.0rc2.post1", "2025-09-08", "approx"],
    ["1.1.0rc2.post2", "2025-09-17", "approx"],
    // 1.2.0rc0, rc1 and rc5: the GPUStack performance-lab pages that first ran them (2025-10-15, 10-31, 12-22).
    ["1.2.0rc0", "2025-10-15", "approx"],
    ["1.2.0rc0.post1", "2025-10-20", "approx"],
    ["1.2.0rc1", "2025-10-31", "approx"],
    ["1.2.0rc5", "2025-12-22", "approx"],
    ["1.2.0rc2", "2025-12-02", "approx"],
    ["1.2.0rc2.post1", "2026-01-17", "approx"],
    ["1.2.0rc6.post2", "2026-01-29", "approx"],
    ["1.2.0rc6.post3", "2026-02-05", "approx"],
    ["1.3.0rc11", "2026-04-13", "approx"],
    ["1.3.0rc14", "2026-05-18", "approx"],
  ]),
  table("tgi", "git tags of huggingface/text-generation-inference", [
    ["v0.9.0", "2023-07-01"],
    ["v1.0.0", "2023-07-28"],
    ["v1.1.0", "2023-09-28"],
    ["v1.2.0", "2023-11-30"],
    ["v1.3.0", "2023-12-11"],
    ["v1.4.0", "2024-01-26"],
    ["v2.0.0", "2024-04-12"],
    ["v2.0.4", "2024-05-24"],
    ["v2.1.0", "2024-06-28"],
    ["v2.2.0", "2024-07-23"],
    ["v2.3.0", "2024-09-20"],
    ["v2.4.0", "2024-10-25"],
    ["v2.4.1", "2024-11-22"],
    ["v3.0.0", "2024-12-09"],
    ["v3.1.0", "2025-01-31"],
    ["v3.2.0", "2025-03-12"],
    ["v3.3.0", "2025-05-09"],
    ["v3.3.4", "2025-06-19"],
    ["v3.3.5", "2025-09-02"],
    ["v3.3.6", "2025-09-16"],
    ["v3.3.7", "2025-12-18"],
  ]),
  table("mlx", "ml-explore/mlx-lm releases (validation-public.md V9)", [["0.28.2", "2025-10-15"]]),
];

const DAY = 86400000;

/** "2025-08" (the 15th) or "2025-08-27" → epoch ms; undefined for anything else. */
export function parseIsoDate(s: string): number | undefined {
  const m = /^(\d{4})-(\d{2})(?:-(\d{2}))?$/.exec(s.trim());
  if (!m) return undefined;
  const mo = Number(m[2]);
  const d = m[3] ? Number(m[3]) : 15;
  if (mo < 1 || mo > 12 || d < 1 || d > 31) return undefined;
  return Date.UTC(Number(m[1]), mo - 1, d);
}

export function isoDate(t: number): string {
  return new Date(t).toISOString().slice(0, 10);
}

export function releaseTable(engine: string): ReleaseTable | undefined {
  return RELEASE_TABLES.find((t) => t.engine === engine);
}

const norm = (x: string) =>
  x
    .trim()
    .toLowerCase()
    .replace(/^(v|version\s*)/, "");

export interface ResolvedRelease {
  date: string;
  /** How the date was obtained, for notes. */
  how: string;
  approx: boolean;
  /** The version sorts after the newest listed release (or before the oldest): its date is a bound, not a date. */
  beyond?: "after" | "before";
}

/** llama.cpp build number → date, interpolated (or extrapolated at the ends) linearly in the build number. */
function llamaBuildDate(t: ReleaseTable, n: number): ResolvedRelease {
  const pts = t.releases.map((r) => ({ n: Number(r.version.slice(1)), t: parseIsoDate(r.date)!, r }));
  pts.sort((a, b) => a.n - b.n);
  const exact = pts.find((p) => p.n === n);
  if (exact) return { date: exact.r.date, how: `build b${n} (${t.source})`, approx: exact.r.approx === true };
  let i = pts.findIndex((p) => p.n > n);
  if (i <= 0) i = i === 0 ? 1 : pts.length - 1;
  const a = pts[i - 1];
  const b = pts[i];
  const tt = a.t + ((n - a.n) * (b.t - a.t)) / (b.n - a.n);
  const inside = n > a.n && n < b.n;
  const last = pts[pts.length - 1].n;
  return {
    date: isoDate(Math.round(tt / DAY) * DAY),
    how: `build b${n}: date ${inside ? "interpolated" : "extrapolated"} by build number from b${a.n} (${a.r.date}) and b${b.n} (${b.r.date}), ${t.source}`,
    approx: true,
    ...(n > last ? { beyond: "after" as const } : n < pts[0].n ? { beyond: "before" as const } : {}),
  };
}

/**
 * A release name or a date → its date. Accepts `v0.4.1`, `0.4.1`, `v0.5.1.post3` (a post or patch release not in the
 * table falls back to its base release; any other well-formed version is dated by where it sorts among the listed
 * releases), llama.cpp `b6918` / `6918` / `build 6918`, and `2025-08` / `2025-08-27`. Anything else is a UsageError
 * with the nearest names.
 */
export function resolveRelease(engine: string, version: string): ResolvedRelease {
  const v = version.trim();
  const t0 = parseIsoDate(v);
  if (t0 !== undefined) return { date: isoDate(t0), how: `date given (${v})`, approx: !/\d{4}-\d{2}-\d{2}/.test(v) };
  const t = releaseTable(engine);
  if (t) {
    if (engine === "llamacpp") {
      const m = /^(?:b|build\s*)?(\d{3,5})$/i.exec(v);
      if (m) return llamaBuildDate(t, Number(m[1]));
    }
    const want = norm(v);
    const hit = t.releases.find((r) => norm(r.version) === want);
    if (hit) return { date: hit.date, how: `${engine} ${hit.version} (${t.source})`, approx: hit.approx === true };
    // A post/patch release missing from the table: its base release (x.y.z of x.y.z.postN or x.y.z.w).
    const base = /^(\d+\.\d+\.\d+)(?:\.post\d+|\.\d+|rc\d+|\.dev\d*)$/.exec(want)?.[1];
    const b = base ? t.releases.find((r) => norm(r.version) === base) : undefined;
    if (b)
      return {
        date: b.date,
        how: `${engine} ${v}: dated as its base release ${b.version} (${t.source}); a post release is days to weeks later`,
        approx: true,
      };
    const byOrder = orderedNeighbours(t, want);
    if (byOrder) return byOrder;
  }
  const names = t ? t.releases.map((r) => r.version) : [];
  const near = names
    .map((n) => ({ n, d: editDistance(norm(v), norm(n)) }))
    .sort((a, b) => a.d - b.d || a.n.localeCompare(b.n))
    .filter((x) => x.d <= 3)
    .slice(0, 3)
    .map((x) => x.n);
  throw new UsageError(
    `--engine-version "${version}": unknown ${engine} release${near.length ? ` (did you mean ${near.join(", ")}?)` : t ? "" : ` (no release table for ${engine}: give a date)`}`,
    {
      hint: `give a release${names.length ? ` (${names[0]} … ${names[names.length - 1]})` : ""} or its date, e.g. --engine-version 2025-08 or 2025-08-27`,
    },
  );
}

/** `0.5.1.post3` → [0, 5, 1, 0.3]-like sort key (post after, rc/dev before the base); null when not a version. */
function versionKey(v: string): number[] | null {
  const m = /^(\d+(?:\.\d+){1,3})(?:[.-]?(post|rc|dev)(\d*))?$/.exec(v);
  if (!m) return null;
  const nums = m[1].split(".").map(Number);
  while (nums.length < 4) nums.push(0);
  const tag = m[2] ? (m[2] === "post" ? 1 : -1) * (1 + Number(m[3] || 0) / 1000) : 0;
  return [...nums, tag];
}

function cmpKey(a: number[], b: number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * A well-formed release name the table does not list: dated by where it sorts among the listed ones — midway between
 * its neighbours, or at the newest (oldest) listed release when it sorts after (before) all of them. The tables sample
 * each engine's releases, so a real release between two samples is the common case.
 */
function orderedNeighbours(t: ReleaseTable, want: string): ResolvedRelease | undefined {
  const k = versionKey(want);
  if (!k) return undefined;
  const listed = t.releases
    .map((r) => ({ r, k: versionKey(norm(r.version)) }))
    .filter((x): x is { r: Release; k: number[] } => x.k !== null)
    .sort((a, b) => cmpKey(a.k, b.k));
  if (listed.length === 0) return undefined;
  const i = listed.findIndex((x) => cmpKey(x.k, k) > 0);
  const name = `${t.engine} ${want.startsWith("v") ? want : `v${want}`}`;
  if (i === 0) {
    const o = listed[0].r;
    return {
      date: o.date,
      how: `${name} is not in the release table and sorts before its oldest release ${o.version}: dated no later than ${o.date} (${t.source})`,
      approx: true,
      beyond: "before",
    };
  }
  if (i === -1) {
    const n = listed[listed.length - 1].r;
    return {
      date: n.date,
      how: `${name} is not in the release table and sorts after its newest release ${n.version}: dated no earlier than ${n.date} (${t.source})`,
      approx: true,
      beyond: "after",
    };
  }
  const a = listed[i - 1].r;
  const b = listed[i].r;
  const mid = (parseIsoDate(a.date)! + parseIsoDate(b.date)!) / 2;
  return {
    date: isoDate(Math.round(mid / DAY) * DAY),
    how: `${name} is not in the release table: dated midway between ${a.version} (${a.date}) and ${b.version} (${b.date}) by version order (${t.source})`,
    approx: true,
  };
}

/** Releases of an engine dated within [from, to] (ISO dates, inclusive). */
export function releasesBetween(engine: string, from: string, to: string): Release[] {
  const t = releaseTable(engine);
  if (!t) return [];
  const a = parseIsoDate(from)!;
  const b = parseIsoDate(to)!;
  return t.releases.filter((r) => {
    const d = parseIsoDate(r.date)!;
    return d >= a && d <= b;
  });
}

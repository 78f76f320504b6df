// `trace --explain KERNEL` (pure): why each kernel whose name contains the query got its class —
// the name rules that match it (with their principle), the evidence that decided, and where the
// launching op or the kernel's place in the step split one name over several classes.
import { InputError } from "../errors.ts";
import type { TraceAnalysis } from "./analyze.ts";
import { DEFAULT_RULES, type KernelClass, type RuleFile } from "./classify.ts";
import { CONTEXT_ATTENTION, CONTEXT_NOT_SAMPLING } from "./context.ts";

export interface KernelExplanation {
  name: string;
  class: KernelClass;
  /** The first name rule that matched ("default" if none). */
  rule: string;
  /** What decided the class: "rule …", "op …", "module …", "context …" or "default". */
  decidedBy: string;
  /** Every rule whose pattern matches the name, in table order, with its class and principle. */
  matchingRules: Array<{ id: string; class: KernelClass; weak: boolean; note?: string; first: boolean }>;
  variants?: Array<{ class: KernelClass; decidedBy: string; count: number; totalUs: number }>;
  /** Kernels and time with this name in the trace. */
  count: number;
  totalUs: number;
  why: string;
}

const CONTEXT_WHY: Record<string, string> = {
  [CONTEXT_ATTENTION]:
    "a softmax between two GEMMs with no other GEMM between them (scores → weights): the softmax, the kernels between and the two GEMMs (Q·Kᵀ, P·V) are attention",
  [CONTEXT_NOT_SAMPLING]:
    "named like sampling, but it runs before the step's LM-head GEMM (its last GEMM), and sampling only follows it",
};

function why(by: string): string {
  if (CONTEXT_WHY[by]) return CONTEXT_WHY[by]!;
  if (by.startsWith("rule ")) return "its name matched a specific rule: the name decides";
  if (by.startsWith("op ")) return "its name is unknown or only a weak hint: the CPU op that launched it decides";
  if (by.startsWith("module "))
    return "neither its name nor a launching op decide: the nn.Module around the launch does";
  return "no rule, op or module says what it is";
}

export function explainKernels(a: TraceAnalysis, query: string, rules?: RuleFile): KernelExplanation[] {
  const q = query.toLowerCase();
  const hits = Object.entries(a.kernelClasses).filter(([n]) => n.toLowerCase().includes(q));
  if (!hits.length) {
    const names = Object.keys(a.kernelClasses);
    throw new InputError(
      `--explain: no kernel in the trace has "${query}" in its name (${names.length} kernel names)`,
      {
        hint: `part of a name from the top-kernels table, e.g. "${names[0]?.slice(0, 30) ?? "nvjet"}"`,
      },
    );
  }
  const all = [...(rules?.rules ?? []), ...DEFAULT_RULES];
  const compiled = all.map((r) => ({
    r,
    re: new RegExp(r.match, r.ignoreCase === false ? "" : "i"),
    unless: r.unless ? new RegExp(r.unless, r.ignoreCase === false ? "" : "i") : undefined,
  }));
  return hits.map(([name, c]) => {
    const matching = compiled
      .filter(({ r, re, unless }) => (r.kinds ?? ["kernel"]).includes("kernel") && re.test(name) && !unless?.test(name))
      .map(({ r }) => ({
        id: r.id,
        class: r.class,
        weak: r.weak === true,
        ...(r.note ? { note: r.note } : {}),
        first: r.id === c.rule,
      }));
    const count = c.count ?? 0;
    const totalUs = c.totalUs ?? 0;
    return {
      name,
      class: c.class,
      rule: c.rule,
      decidedBy: c.decidedBy,
      matchingRules: matching,
      ...(c.variants ? { variants: c.variants } : {}),
      count,
      totalUs,
      why: why(c.decidedBy),
    };
  });
}

export function formatExplanations(list: KernelExplanation[]): string {
  const out: string[] = [];
  for (const e of list) {
    out.push(`${e.name} (${e.count} kernels, ${(e.totalUs / 1000).toFixed(3)} ms)`);
    out.push(`  class: ${e.class}, decided by ${e.decidedBy}: ${e.why}`);
    if (e.matchingRules.length)
      for (const r of e.matchingRules)
        out.push(
          `  ${r.first ? "matched" : "also matches"} rule ${r.id} → ${r.class}${r.weak ? " (weak: an op may decide)" : ""}${r.note ? ` — ${r.note}` : ""}`,
        );
    else out.push("  no name rule matches");
    if (e.variants)
      for (const v of e.variants)
        out.push(`  ${v.count} kernels, ${(v.totalUs / 1000).toFixed(3)} ms → ${v.class} (${v.decidedBy})`);
  }
  return out.join("\n");
}

// What a server command says about the deployment, read the way each engine's CLI reads it (pure).
// The command is the user's own, so everything found here counts as given ("server command").
import { shellSplit } from "../experiment/variants.ts";

export interface CommandFacts {
  /** The engine the program name implies, when it is unambiguous. */
  engine?: string;
  /** The evidence for `engine`: the program or module run. */
  program?: string;
  /** The model argument (a path or a hub id), and the flag it came from. */
  model?: { value: string; flag: string };
  tp?: { value: number; flag: string };
  threads?: { value: number; flag: string };
  /** llama.cpp layers offloaded to a GPU (0 or absent: CPU only). */
  gpuLayers?: { value: number; flag: string };
  /** Environment assignments before the program (`NCCL_PROTO=LL vllm serve …`). */
  env: Record<string, string>;
}

const PROGRAMS: Array<[RegExp, string]> = [
  [/(^|\/)llama-server$|(^|\/)server$/, "llamacpp"],
  [/(^|\/)vllm$|^vllm\.entrypoints/, "vllm"],
  [/^sglang\.launch_server$|(^|\/)sglang$/, "sglang"],
  [/(^|\/)text-generation-launcher$|(^|\/)text-generation-router$/, "tgi"],
  [/(^|\/)trtllm-serve$/, "trtllm"],
  [/(^|\/)tritonserver$/, "triton"],
  [/^dynamo\.|(^|\/)dynamo$/, "dynamo"],
];

/** Flags per engine: [names…] → fact. Later occurrences win, as in each engine's own parser. */
const FLAGS: Record<string, { model: string[]; tp: string[]; threads: string[]; gpuLayers: string[] }> = {
  llamacpp: {
    model: ["-m", "--model"],
    tp: [],
    threads: ["-t", "--threads"],
    gpuLayers: ["-ngl", "--gpu-layers", "--n-gpu-layers"],
  },
  vllm: { model: ["--model"], tp: ["-tp", "--tensor-parallel-size"], threads: [], gpuLayers: [] },
  sglang: {
    model: ["--model-path", "--model"],
    tp: ["--tp", "--tp-size", "--tensor-parallel-size"],
    threads: [],
    gpuLayers: [],
  },
  tgi: { model: ["--model-id"], tp: ["--num-shard"], threads: [], gpuLayers: [] },
  trtllm: { model: [], tp: ["--tp_size", "--tp-size"], threads: [], gpuLayers: [] },
  triton: { model: [], tp: [], threads: [], gpuLayers: [] },
  dynamo: { model: ["--model-path", "--model"], tp: ["--tensor-parallel-size", "--tp"], threads: [], gpuLayers: [] },
};

function flagValue(words: string[], names: string[]): { value: string; flag: string } | undefined {
  let hit: { value: string; flag: string } | undefined;
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    const eq = w.indexOf("=");
    const name = eq > 0 && w.startsWith("-") ? w.slice(0, eq) : w;
    if (!names.includes(name)) continue;
    const v = eq > 0 && w.startsWith("-") ? w.slice(eq + 1) : words[i + 1];
    if (v !== undefined && !(v.startsWith("-") && !/^-\d/.test(v))) hit = { value: v, flag: name };
  }
  return hit;
}

function intFlag(words: string[], names: string[]): { value: number; flag: string } | undefined {
  const v = flagValue(words, names);
  if (!v) return undefined;
  const n = Number(v.value);
  return Number.isInteger(n) && n >= 0 ? { value: n, flag: v.flag } : undefined;
}

/** Reads a server command (with `{port}` or $PORT placeholders left in). Unparseable text gives no facts. */
export function commandFacts(cmd: string | undefined): CommandFacts {
  const out: CommandFacts = { env: {} };
  if (!cmd) return out;
  let words: string[];
  try {
    words = shellSplit(cmd);
  } catch {
    return out;
  }
  let i = 0;
  if (words[0] === "env") i++;
  for (; i < words.length; i++) {
    const a = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(words[i]!);
    if (!a) break;
    out.env[a[1]!] = a[2]!;
  }
  const rest = words.slice(i);
  // `python -m vllm.entrypoints.openai.api_server`, `python3 -m sglang.launch_server`, `uv run vllm serve`
  let program = rest[0] ?? "";
  const m = rest.indexOf("-m");
  if (/(^|\/)python[\d.]*$/.test(program) && m >= 0 && rest[m + 1]) program = rest[m + 1]!;
  else if ((program === "uv" || program === "uvx") && rest[1] === "run" && rest[2]) program = rest[2]!;
  else if (program === "uvx" && rest[1]) program = rest[1]!;
  for (const [re, engine] of PROGRAMS)
    if (re.test(program)) {
      out.engine = engine;
      out.program = program;
      break;
    }
  const engine = out.engine;
  if (!engine) return out;
  const f = FLAGS[engine]!;
  out.model = flagValue(rest, f.model);
  // `vllm serve MODEL` and `trtllm-serve MODEL`: the first positional word after the subcommand.
  if (!out.model) {
    const start = engine === "vllm" ? rest.indexOf("serve") : engine === "trtllm" ? 0 : -1;
    const w = start >= 0 ? rest[start + 1] : undefined;
    if (w && !w.startsWith("-")) out.model = { value: w, flag: engine === "vllm" ? "vllm serve MODEL" : "MODEL" };
  }
  out.tp = intFlag(rest, f.tp);
  out.threads = intFlag(rest, f.threads);
  out.gpuLayers = intFlag(rest, f.gpuLayers);
  return out;
}

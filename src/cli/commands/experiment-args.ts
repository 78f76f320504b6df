// Flag parsers shared by the experiment commands (ab, sweep).
import { InvalidArgumentError } from "@commander-js/extra-typings";
import { MAX_STREAMS_PER_WORKER, maxWorkers } from "../../load/limits.ts";
import { numberArg } from "../common.ts";

export function intArg(v: string): number {
  const n = Number(v);
  if (!/^\s*\d+\s*$/.test(v) || !Number.isSafeInteger(n))
    throw new InvalidArgumentError(`"${v}" is not a whole number`);
  return n;
}

export function numArg(v: string): number {
  const n = Number(v);
  if (v.trim() === "" || !Number.isFinite(n)) throw new InvalidArgumentError(`"${v}" is not a number`);
  return n;
}

export function listArg(v: string): number[] {
  return v.split(",").map((x) => numArg(x.trim()));
}

/**
 * A count flag with its range (`--num-prompts expects an integer in [1, 1000000], got "1e99"`): counts
 * size the records, prompts and sockets of every block, so a typo must not reach the servers.
 */
export function countArg(name: string, min: number, max: number) {
  return numberArg(name, { integer: true, min, max });
}

export { MAX_REQUESTS, MAX_TOKENS } from "../../load/limits.ts";
/** Streams all worker threads of this host may hold (see src/load/limits.ts). */
export const MAX_STREAMS = maxWorkers() * MAX_STREAMS_PER_WORKER;

/** bench's and tune's OTLP receiver flags, described once. */
export const OTLP_RECEIVER_HELP =
  "receive the engine's request spans (OTLP/HTTP, protobuf or JSON; loopback unless a host is given) and join them to the requests: TTFT split into network, intake, queue, prefill, delivery";
export const OTLP_GRPC_HELP =
  "with --otlp-receiver, also take OTLP/gRPC here (vLLM's and SGLang's default protocol; 4317 by convention)";

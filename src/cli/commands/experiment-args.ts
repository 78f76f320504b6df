// Flag parsers shared by the experiment commands (ab, sweep).
import { InvalidArgumentError } from "@commander-js/extra-typings";

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

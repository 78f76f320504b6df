// Types for launch.mjs (plain JavaScript: the development launcher runs it before tsx loads).
export declare const LOAD_LOOP_FLAGS: readonly string[];
export declare const LOAD_LOOP_COMMANDS: readonly string[];
export declare function runsLoadLoop(args: readonly string[]): boolean;
export declare function relaunchArgv(p: {
  canExec: boolean;
  execPath: string;
  execArgv: readonly string[];
  argv: readonly string[];
  nodeOptions?: string;
}): string[] | null;
export declare function execWithLoadLoopFlags(): void;

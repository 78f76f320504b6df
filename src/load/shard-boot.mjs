// Worker entry for a bench shard. In the package the compiled shard.js sits beside this file; from
// the sources, module hooks (tsx) are per thread, so register them here before loading shard.ts.
import { existsSync } from "node:fs";

const compiled = new URL("./shard.js", import.meta.url);
if (existsSync(compiled)) await import(compiled.href);
else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("./shard.ts");
}

// Worker entry for a trace segment reader (parallel.ts). In the package the compiled parallel.js
// sits beside this file; from the sources, module hooks (tsx) are per thread, so register them here.
import { existsSync } from "node:fs";

const compiled = new URL("./parallel.js", import.meta.url);
if (existsSync(compiled)) await import(compiled.href);
else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("./parallel.ts");
}

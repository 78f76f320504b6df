// Worker entry for a bench shard: module hooks (tsx) are per thread, so register them here, then load
// the TypeScript shard.
import { register } from "tsx/esm/api";

register();
await import("./shard.ts");

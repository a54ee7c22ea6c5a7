/**
 * The deterministic simulator, re-exported from its parts under `sim/`
 * (kept so existing imports of `raft/simulator.ts` keep working). See
 * `sim/cluster.ts` for the simulator, `sim/main.ts` for its command line
 * (`deno task sim`).
 *
 * @module
 */

export { mixSeed, mulberry32, Prng } from "./sim/prng.ts";
export {
  type ClusterConfig,
  type FaultConfig,
  type FaultCounts,
  replayCommand,
  scenarioForSeed,
  SimulationError,
  type SimulationOptions,
  type SimulationResult,
} from "./sim/scenario.ts";
export { ClusterSimulator, simulateSeed } from "./sim/cluster.ts";
export { SimDisk, type SimulatedDisk } from "./sim/disk.ts";
export { SimNetwork } from "./sim/network.ts";
export { SimClock } from "./sim/clock.ts";

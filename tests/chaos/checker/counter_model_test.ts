import assert from "node:assert/strict";
import { checkLinearizable, type WglOperation } from "./wgl.ts";
import { type CounterInput, counterModel } from "./counter_model.ts";

type Op = WglOperation<CounterInput, number>;
const add = (id: string): CounterInput => ({ f: "add", requestId: id });
const get: CounterInput = { f: "get" };

Deno.test("counter model: a lost acknowledged add, an add applied twice and a stale read are each refused; concurrent ones in any order are accepted", () => {
  const lost: Op[] = [
    { input: add("a"), output: 1, call: 0, return: 1 },
    { input: add("b"), output: 2, call: 2, return: 3 },
    { input: get, output: 1, call: 4, return: 5 },
  ];
  assert.equal(checkLinearizable(counterModel, lost).ok, false);
  const twice: Op[] = [
    { input: add("a"), output: 1, call: 0, return: 1 },
    { input: get, output: 2, call: 2, return: 3 },
  ];
  assert.equal(checkLinearizable(counterModel, twice).ok, false);
  const duplicateValue: Op[] = [
    { input: add("a"), output: 1, call: 0, return: 5 },
    { input: add("b"), output: 1, call: 1, return: 6 },
  ];
  assert.equal(checkLinearizable(counterModel, duplicateValue).ok, false);
  const concurrent: Op[] = [
    { input: add("a"), output: 2, call: 0, return: 10 },
    { input: add("b"), output: 1, call: 1, return: 9 },
    { input: get, output: 1, call: 2, return: 3 },
    { input: get, output: 2, call: 11, return: 12 },
  ];
  assert.equal(checkLinearizable(counterModel, concurrent).ok, true);
});

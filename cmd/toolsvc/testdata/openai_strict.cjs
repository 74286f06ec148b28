// Checks tool definitions for OpenAI's strict function calling with the
// openai SDK's own helper (toStrictJsonSchema, openai-node lib/transform):
// it throws on a schema strict mode refuses, and returns the schema made
// strict. A definition marked strict must pass it unchanged: nothing left
// to make strict. Reads the definitions (Chat Completions or Responses
// format) as JSON on stdin; prints one line per tool, "ok <name>" or
// "FAIL <name>: <why>".
const { toStrictJsonSchema } = require("openai/lib/transform");
const { isDeepStrictEqual } = require("node:util");

let input = "";
process.stdin.on("data", (d) => (input += d));
process.stdin.on("end", () => {
  for (const def of JSON.parse(input)) {
    const fn = def.function ?? def;
    if (fn.strict !== true) {
      console.log(`FAIL ${fn.name}: not marked strict`);
      continue;
    }
    try {
      const strict = toStrictJsonSchema(fn.parameters);
      if (!isDeepStrictEqual(strict, fn.parameters)) {
        console.log(`FAIL ${fn.name}: the helper changed it: ${JSON.stringify(strict)}`);
        continue;
      }
      console.log(`ok ${fn.name}`);
    } catch (e) {
      console.log(`FAIL ${fn.name}: ${e.message}`);
    }
  }
});

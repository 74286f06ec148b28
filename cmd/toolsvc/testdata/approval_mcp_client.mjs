// An MCP client built on the official TypeScript SDK (v2), run by
// TestApprovalMCPTypeScriptClient against /mcp: argv[2] is the endpoint,
// argv[3] the API key, argv[4] "2026-07-28" (pinned, multi round-trip) or
// "legacy" (the 2025 initialize handshake). Its elicitation handler is
// what a user's answer would be: it approves the call whose question
// names "echo approved", rejects every other with a reason, and records
// each question it was asked. It prints one JSON object: the questions
// and each call's result (or error).
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url, key, mode] = process.argv.slice(2);
const asked = [];
const client = new Client(
  { name: "toolsvc-approval-e2e", version: "1.0.0" },
  {
    capabilities: { elicitation: { form: {} } },
    versionNegotiation: { mode: mode === "legacy" ? "legacy" : { pin: mode } },
  },
);
client.setRequestHandler("elicitation/create", async (request) => {
  const message = request.params.message;
  asked.push({ message, schema: request.params.requestedSchema });
  if (message.includes("echo approved")) {
    return { action: "accept", content: { approve: true } };
  }
  return { action: "accept", content: { approve: false, reason: "not this one, says the e2e user" } };
});
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
await client.connect(transport);
const out = { era: client.getNegotiatedProtocolVersion?.() ?? null, asked, results: {} };
for (const command of ["echo approved >> approved.txt", "echo rejected >> rejected.txt"]) {
  try {
    out.results[command] = await client.callTool({ name: "exec", arguments: { command } });
  } catch (err) {
    out.results[command] = { thrown: String(err && err.stack || err) };
  }
}
await client.close();
process.stdout.write(JSON.stringify(out));

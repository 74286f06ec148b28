// What LangChain.js hands its model from toolsvc's tools over MCP: each
// call goes through the tool LangChain's MCP adapter makes
// (@langchain/mcp-adapters), as an agent's tool node runs it, and the
// ToolMessage's content (what the model reads) is printed as JSON.
// Usage: node langchain_mcp.mjs <mcp url> <calls as JSON: [[name, args], ...]>
import { MultiServerMCPClient } from "@langchain/mcp-adapters";

const [url, callsJSON] = process.argv.slice(2);
const client = new MultiServerMCPClient({
  mcpServers: { toolsvc: { transport: "http", url } },
});
const tools = await client.getTools();
const out = [];
for (const [name, args] of JSON.parse(callsJSON)) {
  const tool = tools.find((t) => t.name === name || t.name.endsWith("__" + name));
  if (!tool) throw new Error(`no tool ${name} among ${tools.map((t) => t.name)}`);
  let content;
  try {
    const msg = await tool.invoke({ type: "tool_call", id: "call_" + out.length, name: tool.name, args });
    content = msg.content;
  } catch (e) {
    content = { thrown: String(e.message ?? e) };
  }
  out.push({ name, content });
}
console.log(JSON.stringify(out));
await client.close();

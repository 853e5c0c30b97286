// The official TypeScript MCP client (@modelcontextprotocol/sdk) against `ask-another serve
// --http`: node client.mjs URL TOKEN prints one JSON line on stdout with what it saw (the
// protocol version, the tools, a completion and its progress messages, and what a wrong token
// got). Run by tests/ask_another/server/test_http_typescript.py.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token] = process.argv.slice(2);

function connect(bearer) {
  const client = new Client({ name: "ts-client-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${bearer}` } },
  });
  return { client, transport };
}

const seen = {};
const { client, transport } = connect(token);
await client.connect(transport);
seen.protocolVersion = transport.protocolVersion;
seen.sessionId = Boolean(transport.sessionId);
seen.tools = (await client.listTools()).tools.map((t) => t.name).sort();
const progress = [];
const result = await client.callTool(
  { name: "completion", arguments: { model: "sim", prompt: "from TypeScript" } },
  undefined,
  { onprogress: (p) => progress.push(p.message ?? "") },
);
seen.completion = { isError: Boolean(result.isError), text: result.content[0].text };
seen.progress = progress.join("");
await transport.terminateSession();
await client.close();

const wrong = connect(`${token}-wrong`);
try {
  await wrong.client.connect(wrong.transport);
  seen.wrongToken = "connected";
} catch (error) {
  seen.wrongToken = String(error.message ?? error);
}
console.log(JSON.stringify(seen));

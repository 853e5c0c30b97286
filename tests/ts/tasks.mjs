// The official TypeScript MCP client's tasks client (client.experimental.tasks, 2025-11-25)
// against `ask-another serve --http`: node tasks.mjs URL TOKEN prints one JSON line on stdout
// with what it saw. Run by tests/ask_another/server/test_tasks_http.py.
//
// 1. start_research as a task (callToolStream): the messages it yielded and the result.
// 2. An agent job whose read needs approval: the elicitation it was asked (answered "allow")
//    while blocked in tasks/result, and the result.
// 3. A job cancelled with cancelTask while the provider works on it.
// 4. listTasks, and getTask of an id that is not the user's.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, token, othersTask] = process.argv.slice(2);
const seen = { elicited: [] };

const client = new Client({ name: "ts-tasks-test", version: "1.0.0" },
                          { capabilities: { elicitation: { form: {} } } });
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  seen.elicited.push({ message: request.params.message,
                       related: request.params._meta?.["io.modelcontextprotocol/related-task"] });
  return { action: "accept", content: { decision: "allow" } };
});
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
seen.protocolVersion = transport.protocolVersion;
seen.capabilities = client.getServerCapabilities().tasks;
await client.listTools(); // caches which tools are tasks (execution.taskSupport)

async function stream(args) {
  const messages = [];
  for await (const message of client.experimental.tasks.callToolStream(
      { name: "start_research", arguments: args })) {
    messages.push({ type: message.type, status: message.task?.status,
                    taskId: message.task?.taskId,
                    text: message.result?.content?.[0]?.text,
                    error: message.error ? String(message.error.message) : undefined });
  }
  return messages;
}

console.error("research");
seen.research = await stream({ model: "gdr", query: "tides from typescript" });
console.error("agent");
seen.agent = await stream({ model: "sim", query: "tides?", method: "agent" });

console.error("forever");
const created = await client.request(
  { method: "tools/call", params: { name: "start_research", task: {},
                                    arguments: { model: "gdr", query: "forever ts" } } },
  (await import("@modelcontextprotocol/sdk/types.js")).CreateTaskResultSchema);
const forever = created.task.taskId;
await new Promise((resolve) => setTimeout(resolve, 1500)); // the provider has it by then
console.error("cancel");
seen.cancelled = await client.experimental.tasks.cancelTask(forever);
seen.afterCancel = (await client.experimental.tasks.getTask(forever)).status;

console.error("list");
seen.listed = (await client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId);
try {
  await client.experimental.tasks.getTask(othersTask);
  seen.others = "read";
} catch (error) {
  seen.others = { code: error.code, message: String(error.message) };
}
await transport.terminateSession();
await client.close();
console.log(JSON.stringify(seen));

// The update reducer on hand-made updates: chunks join, prompts stay apart, a tool call's content is replaced
// (ACP semantics) while its other fields merge, and the input transcript is never mutated.

import assert from "node:assert/strict";
import { test } from "node:test";
import type { SessionUpdate } from "@agentclientprotocol/sdk";
import { reduceUpdate } from "../core/update-reducer.js";
import { emptyTranscript } from "../core/view-state.js";

const text = (sessionUpdate: "agent_message_chunk" | "user_message_chunk" | "agent_thought_chunk", t: string): SessionUpdate => ({ sessionUpdate, content: { type: "text", text: t } });

test("chunks of one kind join; each user prompt is its own item", () => {
  const updates = [text("user_message_chunk", "one"), text("user_message_chunk", "two"), text("agent_thought_chunk", "hm"), text("agent_message_chunk", "Hel"), text("agent_message_chunk", "lo")];
  const transcript = updates.reduce(reduceUpdate, emptyTranscript());
  assert.deepEqual(transcript.items, [
    { kind: "user", text: "one" },
    { kind: "user", text: "two" },
    { kind: "thought", text: "hm" },
    { kind: "agent", text: "Hello" },
  ]);
});

test("tool calls: updates merge fields, content replaces the output, diffs become diff views", () => {
  const start = reduceUpdate(emptyTranscript(), { sessionUpdate: "tool_call", toolCallId: "c1", title: "Run make", kind: "execute", status: "pending" });
  const steps: SessionUpdate[] = [
    { sessionUpdate: "tool_call_update", toolCallId: "c1", status: "in_progress" },
    { sessionUpdate: "tool_call_update", toolCallId: "c1", content: [{ type: "content", content: { type: "text", text: "building" } }] },
    { sessionUpdate: "tool_call_update", toolCallId: "c1", status: "completed", content: [{ type: "content", content: { type: "text", text: "built" } }, { type: "diff", path: "/w/a", oldText: "x\n", newText: "y\n" }] },
  ];
  const done = steps.reduce(reduceUpdate, start);
  assert.equal(start.items.length, 1);
  assert.deepEqual((start.items[0] as { status: string }).status, "pending"); // not mutated by the later updates
  const [tool] = done.items;
  assert.ok(tool?.kind === "tool");
  assert.deepEqual([tool.title, tool.toolKind, tool.status, tool.output], ["Run make", "execute", "completed", "built"]);
  assert.deepEqual(tool.diffs[0]!.hunks[0]!.lines, [{ type: "removed", text: "x" }, { type: "added", text: "y" }]);
});

test("plan, usage, mode and title updates", () => {
  const transcript = ([
    { sessionUpdate: "plan", entries: [{ content: "step", status: "pending", priority: "low" }] },
    { sessionUpdate: "usage_update", used: 10, size: 100 },
    { sessionUpdate: "current_mode_update", currentModeId: "auto" },
    { sessionUpdate: "session_info_update", title: "Fix add" },
  ] satisfies SessionUpdate[]).reduce(reduceUpdate, emptyTranscript());
  assert.deepEqual(transcript, { ...emptyTranscript(), plan: [{ content: "step", status: "pending", priority: "low" }], usage: { used: 10, size: 100 }, title: "Fix add", modeId: "auto" });
});

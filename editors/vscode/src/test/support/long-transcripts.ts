// Long chat view states for the render-time checks: a session of N tool calls (reads with output, edits with
// diffs, commands with output, the agent's markdown between them), the updates a live turn streams onto it, and
// one agent message of a given size in markdown.

import { diffView } from "../../core/diff-model.js";
import type { ChatViewState, ToolItem, TranscriptItem } from "../../core/view-state.js";

export function sessionState(items: TranscriptItem[], running = false, sessionId = "long"): ChatViewState {
  return {
    connection: { state: "connected", url: "ws://127.0.0.1:8765/acp", agent: "warpcode" },
    session: {
      sessionId,
      cwd: "/repo",
      transcript: { items, plan: [{ content: "Fix the failing tests", status: "in_progress", priority: "high" }], usage: { used: 12000, size: 32768 }, title: "A long session", modeId: "auto", commands: [], configOptions: [] },
      modes: [{ id: "auto", name: "Auto", description: "" }],
      running,
      stopReason: null,
      error: null,
    },
    permissions: [],
    sessions: null,
    canDeleteSessions: false,
  };
}

function agentText(i: number): string {
  return `Step ${i}: the test \`test_${i}\` fails because **parse_line** drops the last field. Next:\n\n- read \`src/module_${i}.py\`\n- fix the loop and run the tests again\n`;
}

function numbered(lines: number, line: (n: number) => string): string {
  return Array.from({ length: lines }, (_, n) => line(n)).join("\n") + "\n";
}

export function toolCall(i: number, status: ToolItem["status"] = "completed"): ToolItem {
  const path = `src/module_${i}.py`;
  const base = { kind: "tool" as const, id: `call_${i}`, status, paths: [path] };
  switch (i % 3) {
    case 0:
      return { ...base, title: `Read ${path}`, toolKind: "read", output: numbered(40, (n) => `${n + 1}: def function_${n}(value):  # returns the value parsed`), diffs: [] };
    case 1: {
      const before = numbered(30, (n) => `    total = total + field_${n}`);
      const after = before.replace("field_3\n", "field_3 + 1\n").replace("field_20\n", "field_20 * 2\n");
      return { ...base, title: `Edit ${path}`, toolKind: "edit", output: "", diffs: [diffView(path, before, after)] };
    }
    default:
      return { ...base, title: "Run tests python3 -m pytest -q", toolKind: "execute", output: numbered(30, (n) => `tests/test_module.py::test_case_${n} PASSED`), diffs: [], paths: [] };
  }
}

// A session of `calls` tool calls, each after a paragraph of the agent's markdown.
export function toolCallSession(calls: number): TranscriptItem[] {
  const items: TranscriptItem[] = [{ kind: "user", text: "The tests fail: fix them." }];
  for (let i = 0; i < calls; i++) items.push({ kind: "agent", text: agentText(i) }, toolCall(i));
  return items;
}

// The states a live turn goes through after `items`: text streams in, a tool call starts, runs, completes.
export function liveUpdates(items: TranscriptItem[], count: number): ChatViewState[] {
  const states: ChatViewState[] = [];
  let current = [...items, { kind: "agent" as const, text: "Now " }];
  for (let step = 0; step < count; step++) {
    const i = 1000 + Math.floor(step / 4);
    const last = current[current.length - 1]!;
    switch (step % 4) {
      case 0: // more of the agent's text
        current = [...current.slice(0, -1), { kind: "agent", text: `${(last as { text: string }).text}the next step, **${step}**. ` }];
        break;
      case 1:
        current = [...current, toolCall(i, "pending")];
        break;
      case 2:
        current = [...current.slice(0, -1), { ...(last as ToolItem), status: "in_progress" }];
        break;
      case 3:
        current = [...current.slice(0, -1), toolCall(i, "completed"), { kind: "agent", text: "Then " }];
        break;
    }
    states.push(sessionState(current, true));
  }
  return states;
}

// Markdown of `size` characters: paragraphs with inline code, emphasis and links, lists and code blocks.
export function longMarkdown(size: number): string {
  const blocks: string[] = [];
  let length = 0;
  for (let i = 0; length < size; i++) {
    const block =
      `Paragraph ${i} has **bold** text, \`inline code\`, a [link](https://example.com/${i}) and enough words to wrap the line once.\n\n` +
      `- item ${i}.1 with \`x\`\n- item ${i}.2\n\n` +
      "```python\n" + `def f_${i}(a, b):\n    return a + b\n` + "```\n\n";
    blocks.push(block);
    length += block.length;
  }
  return blocks.join("").slice(0, size);
}

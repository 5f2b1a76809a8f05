// The update reducer: one session/update notification applied to a transcript, returning a new one (the input is
// never mutated). Live streaming and session/load's replay go through the same function, so a reloaded session
// shows what the live one showed.

import type { ContentBlock, SessionUpdate, ToolCallContent, ToolCallUpdate } from "@agentclientprotocol/sdk";
import { configChoices } from "./config-options.js";
import { diffFromContent } from "./diff-model.js";
import { commandChoices } from "./slash-commands.js";
import type { ToolItem, Transcript, TranscriptItem } from "./view-state.js";

export function reduceUpdate(transcript: Transcript, update: SessionUpdate): Transcript {
  switch (update.sessionUpdate) {
    case "user_message_chunk":
      return appendText(transcript, "user", update.content);
    case "agent_message_chunk":
      return appendText(transcript, "agent", update.content);
    case "agent_thought_chunk":
      return appendText(transcript, "thought", update.content);
    case "tool_call":
      return upsertTool(transcript, { ...update, status: update.status ?? "pending" });
    case "tool_call_update":
      return upsertTool(transcript, update);
    case "plan":
      return { ...transcript, plan: update.entries.map(({ content, status, priority }) => ({ content, status, priority })) };
    case "usage_update":
      return { ...transcript, usage: { used: update.used, size: update.size } };
    case "current_mode_update":
      return { ...transcript, modeId: update.currentModeId };
    case "session_info_update":
      return update.title === undefined ? transcript : { ...transcript, title: update.title };
    case "available_commands_update":
      return { ...transcript, commands: commandChoices(update.availableCommands) };
    case "config_option_update":
      return { ...transcript, configOptions: configChoices(update.configOptions) };
    default:
      return transcript; // notices of other kinds: nothing this view shows
  }
}

function appendText(transcript: Transcript, kind: "user" | "agent" | "thought", content: ContentBlock): Transcript {
  const text = blockText(content);
  const items = transcript.items;
  const last = items[items.length - 1];
  if (last !== undefined && last.kind === kind && kind !== "user") { // each prompt is a message of its own
    return { ...transcript, items: [...items.slice(0, -1), { kind, text: last.text + text }] };
  }
  return { ...transcript, items: [...items, { kind, text }] };
}

export function blockText(content: ContentBlock): string {
  switch (content.type) {
    case "text":
      return content.text;
    case "resource_link":
      return `[${content.name}](${content.uri})`;
    case "resource":
      return "text" in content.resource ? content.resource.text : `[${content.resource.uri}]`;
    default:
      return `[${content.type}]`;
  }
}

// ACP: a tool_call_update carries only what changed; its `content` replaces the call's whole content.
function upsertTool(transcript: Transcript, update: ToolCallUpdate): Transcript {
  const index = transcript.items.findIndex((item) => item.kind === "tool" && item.id === update.toolCallId);
  const before: ToolItem =
    index === -1
      ? { kind: "tool", id: update.toolCallId, title: "", toolKind: "other", status: "pending", output: "", diffs: [], paths: [] }
      : (transcript.items[index] as ToolItem);
  const after: ToolItem = {
    ...before,
    title: update.title ?? before.title,
    toolKind: update.kind ?? before.toolKind,
    status: update.status ?? before.status,
    paths: update.locations ? update.locations.map((location) => location.path) : before.paths,
    ...(update.content ? contentParts(update.content) : {}),
  };
  const items: TranscriptItem[] = [...transcript.items];
  if (index === -1) items.push(after);
  else items[index] = after;
  return { ...transcript, items };
}

export function contentParts(content: ToolCallContent[]): Pick<ToolItem, "output" | "diffs"> {
  const output: string[] = [];
  const diffs = [];
  for (const part of content) {
    if (part.type === "content") output.push(blockText(part.content));
    else if (part.type === "diff") diffs.push(diffFromContent(part));
    else output.push(`[terminal ${part.terminalId}]`); // never advertised: the agent runs its own commands
  }
  return { output: output.join("\n"), diffs };
}

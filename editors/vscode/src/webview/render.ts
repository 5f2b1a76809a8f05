// The chat view's HTML, part by part: status bar, session list, transcript items (collapsed thoughts, tool calls
// with status, output and diffs), stop reason, plan and permission questions. Pure string building with every
// text escaped (the agent's markdown is markdown-message.ts's); buttons carry `data-action` for main.ts.

import type { ConfigChoice } from "../core/config-options.js";
import type { DiffView } from "../core/diff-model.js";
import type { CommandChoice } from "../core/slash-commands.js";
import type { ChatViewState, ConnectionStatus, ModeChoice, PermissionView, PlanItem, SessionSummary, ToolItem, TranscriptItem } from "../core/view-state.js";
import { escape } from "./escape.js";

const STOP_REASONS: Record<string, string> = {
  end_turn: "Done",
  cancelled: "Cancelled",
  max_tokens: "Stopped: the model reached its token limit",
  max_turn_requests: "Stopped: the turn reached its limit of model requests",
  refusal: "The model refused to go on",
};
const STATUS_ICONS: Record<string, string> = { pending: "○", in_progress: "◐", completed: "✓", failed: "✗" };
const PLAN_ICONS: Record<string, string> = { pending: "○", in_progress: "◐", completed: "✓" };

// The parts of the view, each rendered on its own so that an update redraws only what changed (chat-view.ts).
// None of them reads the transcript's items (which come in as posted: core/view-posts.ts).
type AnyItems = ChatViewState<unknown>;

export function renderHeader(state: AnyItems): string {
  const session = state.session;
  return (
    renderStatus(state.connection, session === null ? "" : renderPickers(session)) +
    (session?.transcript.title ? `<h2 class="session-heading">${escape(session.transcript.title)}</h2>` : "") +
    (state.sessions === null ? "" : renderSessionList(state.sessions, session?.sessionId ?? null, state.canDeleteSessions))
  );
}

// What follows the transcript's items inside it: the welcome before a session, the turn's state, the usage.
export function renderTurnEnd(session: AnyItems["session"]): string {
  if (session === null) return renderWelcome();
  return [
    session.running ? `<div class="working">Working…</div>` : "",
    session.stopReason ? `<div class="stop-reason stop-${escape(session.stopReason)}">${escape(STOP_REASONS[session.stopReason] ?? session.stopReason)}</div>` : "",
    session.error ? `<div class="error">${escape(session.error)}</div>` : "",
    session.transcript.usage ? renderUsage(session.transcript.usage) : "",
  ].join("");
}

// After the transcript: the plan and the permission questions.
export function renderQuestions(state: AnyItems): string {
  const plan = state.session?.transcript.plan ?? [];
  return (plan.length > 0 ? renderPlan(plan) : "") + state.permissions.map(renderPermission).join("");
}

function renderStatus(connection: ConnectionStatus, pickers: string): string {
  const connect = connection.state === "disconnected" ? `<button data-action="connect">Connect</button>` : "";
  return (
    `<header class="status status-${connection.state}" title="${escape(connection.url)}">` +
    `<span class="dot"></span><span class="status-text">${escape(statusText(connection))}</span>${connect}</header>` +
    `<nav class="toolbar"><button data-action="new-session" title="Start a new session">New</button>` +
    `<button data-action="list-sessions" title="Reopen or delete a stored session">Sessions</button>${pickers}</nav>`
  );
}

// The agent's config options (mode, model...) as pickers, in its order; from an agent without them, the modes.
function renderPickers(session: NonNullable<AnyItems["session"]>): string {
  const options = session.transcript.configOptions;
  if (options.length > 0) return `<span class="pickers">${options.map(renderConfigPicker).join("")}</span>`;
  return session.modes.length === 0 ? "" : renderModePicker(session.modes, session.transcript.modeId, session.running);
}

function renderConfigPicker(choice: ConfigChoice): string {
  let html = "";
  let group: string | null = null;
  for (const value of choice.values) {
    if (value.group !== group) html += `${group === null ? "" : "</optgroup>"}${value.group === null ? "" : `<optgroup label="${escape(value.group)}">`}`;
    group = value.group;
    html += `<option value="${escape(value.value)}" title="${escape(value.description)}"${value.value === choice.currentValue ? " selected" : ""}>${escape(value.name)}</option>`;
  }
  if (group !== null) html += "</optgroup>";
  const title = choice.description ? `${choice.name}: ${choice.description}` : choice.name;
  const category = choice.category ?? "other";
  return `<select class="config config-${escape(category)}" data-action="set-config" data-config="${escape(choice.id)}" title="${escape(title)}" aria-label="${escape(choice.name)}">${html}</select>`;
}

function renderModePicker(modes: ModeChoice[], modeId: string | null, running: boolean): string {
  return `<select class="mode" data-action="set-mode" title="Permission mode"${running ? " disabled" : ""}>${modes
    .map((m) => `<option value="${escape(m.id)}" title="${escape(m.description)}"${m.id === modeId ? " selected" : ""}>${escape(m.name)}</option>`)
    .join("")}</select>`;
}

function statusText(connection: ConnectionStatus): string {
  switch (connection.state) {
    case "connecting":
      return `Connecting to ${connection.url}…`;
    case "connected":
      return `Connected: ${connection.agent}`;
    case "reconnecting":
      return `Reconnecting (attempt ${connection.attempt}): ${connection.error}`;
    case "disconnected":
      return connection.error;
  }
}

function renderSessionList(sessions: SessionSummary[], current: string | null, deletable: boolean): string {
  const rows = sessions.map(
    (s) =>
      `<li><button class="session${s.sessionId === current ? " current" : ""}" data-action="open-session" data-session="${escape(s.sessionId)}" data-cwd="${escape(s.cwd)}">` +
      `<span class="session-title">${escape(s.title ?? "(untitled)")}</span><span class="session-when">${escape(s.updatedAt ?? "")}</span></button>` +
      (deletable ? `<button class="session-delete" data-action="delete-session" data-session="${escape(s.sessionId)}" data-title="${escape(s.title ?? "(untitled)")}" title="Delete this session" aria-label="Delete this session">×</button>` : "") +
      `</li>`,
  );
  return (
    `<section class="sessions"><div class="sessions-head">Stored sessions<button data-action="close-sessions" title="Close the list">×</button></div>` +
    (rows.length === 0 ? `<p class="muted">No stored sessions yet.</p>` : `<ul>${rows.join("")}</ul>`) +
    `</section>`
  );
}

// Under the prompt box while it holds `/` and part of a name: the agent's commands that start so (the picked one
// marked); once a name is complete, the input the command expects.
export function renderCompletions(matches: CommandChoice[], selected: number, hint: string | null): string {
  if (matches.length === 0) return hint === null ? "" : `<li class="command-hint" role="presentation">${escape(hint)}</li>`;
  return matches
    .map(
      (command, index) =>
        `<li role="option" class="command${index === selected ? " selected" : ""}" aria-selected="${index === selected}" data-index="${index}">` +
        `<span class="command-name">/${escape(command.name)}</span>${command.hint === null ? "" : ` <span class="command-input">${escape(command.hint)}</span>`}` +
        `<span class="command-description">${escape(command.description)}</span></li>`,
    )
    .join("");
}

function renderWelcome(): string {
  return `<p class="muted welcome">Ask warpcode to change your code. It reads, edits and runs tests in this workspace; in mode Ask, every edit and command waits for your permission.</p>`;
}

// One transcript item; the agent's text is rendered by MarkdownMessage (markdown-message.ts), as it streams.
export function renderItem(item: Exclude<TranscriptItem, { kind: "agent" }>, index: number): string {
  switch (item.kind) {
    case "user":
      return `<div class="message user"><div class="who">You</div><div class="text">${escape(item.text)}</div></div>`;
    case "thought":
      return `<details class="thought" data-key="thought-${index}"><summary>Thought</summary><div class="text">${escape(item.text)}</div></details>`;
    case "tool":
      return renderTool(item);
  }
}

function renderTool(tool: ToolItem): string {
  const diffs = tool.diffs.map((diff, index) => renderDiff(diff, `data-tool="${escape(tool.id)}" data-index="${index}"`)).join("");
  const output = tool.output === "" ? "" : tool.toolKind === "execute"
    ? `<pre class="output">${escape(tool.output)}</pre>`
    : `<details class="output-box" data-key="output-${escape(tool.id)}"><summary>Output</summary><pre class="output">${escape(tool.output)}</pre></details>`;
  return (
    `<div class="tool tool-${escape(tool.status)} kind-${escape(tool.toolKind)}" data-tool-id="${escape(tool.id)}">` +
    `<div class="tool-head"><span class="tool-icon">${STATUS_ICONS[tool.status] ?? "·"}</span>` +
    (tool.paths.length > 0
      ? `<button class="tool-title" data-action="open-file" data-path="${escape(tool.paths[0]!)}" title="Open ${escape(tool.paths[0]!)}">${escape(tool.title)}</button>`
      : `<span class="tool-title">${escape(tool.title)}</span>`) +
    `<span class="tool-status">${escape(tool.status.replace("_", " "))}</span></div>` +
    diffs +
    output +
    `</div>`
  );
}

function renderDiff(diff: DiffView, target: string): string {
  const name = diff.path.split(/[\\/]/).pop() ?? diff.path;
  const hunks = diff.hunks
    .map(
      (hunk) =>
        `<div class="hunk-head">@@ -${hunk.oldStart} +${hunk.newStart} @@</div>` +
        hunk.lines.map((line) => `<div class="line ${line.type}"><span class="sign">${line.type === "added" ? "+" : line.type === "removed" ? "−" : " "}</span>${escape(line.text)}</div>`).join(""),
    )
    .join("");
  return (
    `<div class="diff"><div class="diff-head" title="${escape(diff.path)}"><span class="diff-path">${escape(name)}</span>` +
    `${diff.isNew ? `<span class="diff-new">new</span>` : ""}${diff.excerpt ? `<span class="diff-excerpt">${diff.excerpt.cut ? "excerpt, cut" : "excerpt"}</span>` : ""}<span class="diff-stat"><span class="plus">+${diff.added}</span> <span class="minus">−${diff.removed}</span></span>` +
    `<button class="link" data-action="open-diff" ${target}>Open diff</button></div><div class="diff-body">${hunks}</div></div>`
  );
}

function renderUsage({ used, size }: { used: number; size: number }): string {
  return `<div class="usage" title="The context window the next model request uses">Context: ${used.toLocaleString("en")} of ${size.toLocaleString("en")} tokens</div>`;
}

function renderPlan(plan: PlanItem[]): string {
  const entries = plan.map((entry) => `<li class="plan-${entry.status}"><span class="plan-icon">${PLAN_ICONS[entry.status]}</span>${escape(entry.content)}</li>`);
  return `<section class="plan" data-region="plan"><div class="plan-head">Plan</div><ul>${entries.join("")}</ul></section>`;
}

function renderPermission(question: PermissionView): string {
  const subject = question.command !== null
    ? `<pre class="command">$ ${escape(question.command)}</pre>`
    : question.diffs.map((diff, index) => renderDiff(diff, `data-permission="${question.requestId}" data-index="${index}"`)).join("");
  const buttons = question.options.map(
    (option) => `<button class="answer answer-${escape(option.kind)}" data-action="answer" data-request="${question.requestId}" data-option="${escape(option.optionId)}">${escape(option.name)}</button>`,
  );
  return (
    `<section class="permission kind-${escape(question.toolKind)}" data-region="permission"><div class="permission-head">Allow <b>${escape(question.title)}</b>?</div>` +
    `${subject}<div class="answers">${buttons.join("")}</div></section>`
  );
}

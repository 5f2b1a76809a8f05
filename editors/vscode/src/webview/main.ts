// The chat webview's script (bundled to dist/webview.js): shows each state the extension posts (ChatView updates
// the DOM in place), keeps the open/closed state of <details> and follows the end of the transcript, completes
// the agent's slash commands in the prompt box, and turns clicks, the pickers and the prompt box into messages for
// the extension.

import type { ToExtension, ToWebview } from "../core/chat-messages.js";
import type { PostedState } from "../core/view-posts.js";
import { ChatView } from "./chat-view.js";
import { CommandCompletion } from "./command-completion.js";

declare function acquireVsCodeApi(): { postMessage(message: ToExtension): void };

const vscode = acquireVsCodeApi();
const chat = document.getElementById("chat")!;
const composer = document.getElementById("composer") as HTMLFormElement;
const prompt = document.getElementById("prompt") as HTMLTextAreaElement;
const send = document.getElementById("send") as HTMLButtonElement;
const stop = document.getElementById("stop") as HTMLButtonElement;
const toggled = new Map<string, boolean>(); // <details data-key> the user opened or closed
const view = new ChatView(chat, toggled);
const completion = new CommandCompletion(prompt, document.getElementById("completions")!);

window.addEventListener("message", (event: MessageEvent<ToWebview>) => {
  if (event.data.type === "state") render(event.data.state);
});

function render(state: PostedState): void {
  const following = chat.scrollHeight - chat.scrollTop - chat.clientHeight < 40;
  view.update(state);
  completion.setCommands(state.session?.transcript.commands ?? []);
  const running = state.session?.running ?? false;
  send.disabled = running || state.connection.state === "reconnecting";
  stop.hidden = !running;
  if (following) chat.scrollTop = chat.scrollHeight;
}

chat.addEventListener(
  "toggle",
  (event) => {
    const details = event.target as HTMLDetailsElement;
    if (details.dataset.key) toggled.set(details.dataset.key, details.open);
  },
  true, // toggle does not bubble
);

chat.addEventListener("click", (event) => {
  const target = (event.target as Element).closest<HTMLElement>("[data-action]");
  if (target === null || target.tagName === "SELECT") return;
  const data = target.dataset;
  const message = ((): ToExtension | null => {
    switch (data.action) {
      case "answer":
        return { type: "answer", requestId: Number(data.request), optionId: data.option! };
      case "open-diff":
        return data.permission !== undefined
          ? { type: "open-permission-diff", requestId: Number(data.permission), index: Number(data.index) }
          : { type: "open-diff", toolCallId: data.tool!, index: Number(data.index) };
      case "open-file":
        return { type: "open-file", path: data.path! };
      case "open-link":
        return { type: "open-link", url: data.url! };
      case "open-session":
        return { type: "open-session", sessionId: data.session!, cwd: data.cwd! };
      case "delete-session":
        return { type: "delete-session", sessionId: data.session!, title: data.title! };
      case "new-session":
      case "list-sessions":
      case "close-sessions":
      case "connect":
        return { type: data.action };
      default:
        return null;
    }
  })();
  if (message !== null) vscode.postMessage(message);
});

// Links have no href (markdown.ts): Enter on a focused one opens it, as on a real link.
chat.addEventListener("keydown", (event) => {
  const target = event.target as HTMLElement;
  if (event.key === "Enter" && target.dataset.action === "open-link") target.click();
});

chat.addEventListener("change", (event) => {
  const select = event.target as HTMLSelectElement;
  if (select.dataset.action === "set-mode") vscode.postMessage({ type: "set-mode", modeId: select.value });
  if (select.dataset.action === "set-config") vscode.postMessage({ type: "set-config", configId: select.dataset.config!, value: select.value });
});

composer.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = prompt.value.trim();
  if (text === "" || send.disabled) return;
  vscode.postMessage({ type: "prompt", text });
  prompt.value = "";
  prompt.dispatchEvent(new Event("input")); // the completion list follows the box
});

prompt.addEventListener("keydown", (event) => {
  if (completion.handleKey(event)) return;
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    composer.requestSubmit();
  }
});

stop.addEventListener("click", () => vscode.postMessage({ type: "stop" }));

vscode.postMessage({ type: "ready" });

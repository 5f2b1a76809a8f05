// The messages between the chat webview and the extension (the webview script and the chat controller).

import type { PostedState } from "./view-posts.js";

export type ToExtension =
  | { type: "ready" }
  | { type: "prompt"; text: string }
  | { type: "stop" }
  | { type: "set-mode"; modeId: string }
  | { type: "set-config"; configId: string; value: string } // a config option's picker (mode, model)
  | { type: "answer"; requestId: number; optionId: string }
  | { type: "open-diff"; toolCallId: string; index: number }
  | { type: "open-file"; path: string }
  | { type: "open-link"; url: string } // a link in the agent's text, clicked
  | { type: "open-permission-diff"; requestId: number; index: number }
  | { type: "new-session" }
  | { type: "list-sessions" }
  | { type: "close-sessions" }
  | { type: "open-session"; sessionId: string; cwd: string }
  | { type: "delete-session"; sessionId: string; title: string }
  | { type: "connect" };

export type ToWebview = { type: "state"; state: PostedState };

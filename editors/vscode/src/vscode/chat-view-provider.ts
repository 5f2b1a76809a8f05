// The sidebar's chat webview: its page (webview/page.ts) with the bundled script and stylesheet, the controller's
// state posted to it (at most one post per frame while updates stream, with only the transcript items that
// changed: core/view-posts.ts), and its messages handed to the controller.

import { randomBytes } from "node:crypto";
import * as vscode from "vscode";
import type { ChatController } from "../core/chat-controller.js";
import type { ToExtension, ToWebview } from "../core/chat-messages.js";
import { ViewPosts } from "../core/view-posts.js";
import { chatPageHtml } from "../webview/page.js";

const POST_INTERVAL_MS = 30;

export class ChatViewProvider implements vscode.WebviewViewProvider {
  static readonly viewId = "warpcode.chat";
  private view: vscode.WebviewView | undefined;
  private postTimer: NodeJS.Timeout | undefined;
  private readonly posts = new ViewPosts();

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly controller: () => ChatController, // the current one: settings changes replace it
  ) {}

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const dist = vscode.Uri.joinPath(this.extensionUri, "dist");
    const media = vscode.Uri.joinPath(this.extensionUri, "media");
    view.webview.options = { enableScripts: true, localResourceRoots: [dist, media] };
    view.webview.html = chatPageHtml({
      cspSource: view.webview.cspSource,
      nonce: randomBytes(16).toString("base64url"),
      scriptUri: view.webview.asWebviewUri(vscode.Uri.joinPath(dist, "webview.js")).toString(),
      styleUri: view.webview.asWebviewUri(vscode.Uri.joinPath(media, "chat.css")).toString(),
    });
    view.webview.onDidReceiveMessage((message: ToExtension) => {
      if (message.type === "ready") {
        this.posts.reset(); // a new page: it has nothing yet
        this.refresh();
      }
      void this.controller().receive(message);
    });
    view.onDidDispose(() => (this.view = undefined));
  }

  // Posts the state soon, coalescing a burst of updates into one post.
  refresh(): void {
    if (this.view === undefined || this.postTimer !== undefined) return;
    this.postTimer = setTimeout(() => {
      this.postTimer = undefined;
      const message: ToWebview = { type: "state", state: this.posts.next(this.controller().state()) };
      void this.view?.webview.postMessage(message).then((delivered) => delivered || this.posts.reset());
    }, POST_INTERVAL_MS);
  }
}

// The chat view's DOM, updated in place: each part (header, transcript items, turn end, plan and questions) is
// redrawn only when it changed. The extension posts only the transcript items that changed (null for the others,
// core/view-posts.ts): an unchanged item is not touched, a changed tool call is replaced, and growing text (the
// agent's markdown, a thought) is appended to. So an update costs what changed, not the length of the session,
// and the <details> the user opened stay open.

import type { PostedState } from "../core/view-posts.js";
import type { TranscriptItem } from "../core/view-state.js";
import { MarkdownMessage } from "./markdown-message.js";
import { renderHeader, renderItem, renderQuestions, renderTurnEnd } from "./render.js";

interface ItemView {
  key: string;
  item: TranscriptItem; // as last rendered
  element: HTMLElement;
  message: MarkdownMessage | null; // for the agent's text
}

export class ChatView {
  private readonly header: HTMLElement;
  private readonly items: HTMLElement;
  private readonly turnEnd: HTMLElement;
  private readonly questions: HTMLElement;
  private readonly shown = new Map<HTMLElement, string>(); // each part's HTML as last set
  private views: ItemView[] = [];
  private sessionId: string | null = null;

  constructor(
    root: HTMLElement,
    private readonly toggled: Map<string, boolean>, // <details data-key> the user opened or closed
  ) {
    this.header = part("header");
    const transcript = document.createElement("section");
    transcript.className = "transcript";
    transcript.dataset.region = "transcript";
    this.items = part("items");
    this.turnEnd = part("turn-end");
    transcript.append(this.items, this.turnEnd);
    this.questions = part("questions");
    root.replaceChildren(this.header, transcript, this.questions);
  }

  update(state: PostedState): void {
    this.setHtml(this.header, renderHeader(state));
    this.updateItems(state.session?.sessionId ?? null, state.session?.transcript.items ?? []);
    this.setHtml(this.turnEnd, renderTurnEnd(state.session));
    this.setHtml(this.questions, renderQuestions(state));
  }

  private updateItems(sessionId: string | null, items: (TranscriptItem | null)[]): void {
    if (sessionId !== this.sessionId) this.truncate(0);
    this.sessionId = sessionId;
    for (const [index, item] of items.entries()) {
      if (item === null) continue; // as in the last post
      const view = this.views[index];
      const key = item.kind === "tool" ? `tool ${item.id}` : `${item.kind} ${index}`;
      if (view === undefined) {
        const created = this.create(key, item, index);
        this.items.append(created.element);
        this.views.push(created);
      } else if (view.key === key) {
        this.change(view, item, index);
      } else {
        const replacement = this.create(key, item, index);
        view.element.replaceWith(replacement.element);
        this.views[index] = replacement;
      }
    }
    this.truncate(items.length);
  }

  private create(key: string, item: TranscriptItem, index: number): ItemView {
    if (item.kind !== "agent") {
      return { key, item, element: this.fromHtml(renderItem(item, index)), message: null };
    }
    const message = new MarkdownMessage();
    message.update(item.text);
    return { key, item, element: message.element, message };
  }

  private change(view: ItemView, item: TranscriptItem, index: number): void {
    const before = view.item;
    view.item = item;
    if (item.kind === "agent") {
      view.message!.update(item.text); // the key holds the kind: an agent item's view has its message
    } else if (item.kind === "thought" && before.kind === "thought" && item.text.startsWith(before.text)) {
      view.element.querySelector(".text")!.append(item.text.slice(before.text.length));
    } else {
      const element = this.fromHtml(renderItem(item, index));
      view.element.replaceWith(element);
      view.element = element;
    }
  }

  private truncate(length: number): void {
    for (const view of this.views.splice(length)) view.element.remove();
  }

  private setHtml(element: HTMLElement, html: string): void {
    if (this.shown.get(element) === html) return;
    this.shown.set(element, html);
    element.innerHTML = html;
    this.restoreToggles(element);
  }

  private fromHtml(html: string): HTMLElement {
    const template = document.createElement("template");
    template.innerHTML = html;
    const element = template.content.firstElementChild as HTMLElement;
    this.restoreToggles(element);
    return element;
  }

  private restoreToggles(within: HTMLElement): void {
    const all = within.matches("details[data-key]") ? [within as HTMLDetailsElement] : [];
    for (const details of [...all, ...within.querySelectorAll<HTMLDetailsElement>("details[data-key]")]) {
      const open = this.toggled.get(details.dataset.key!);
      if (open !== undefined) details.open = open;
    }
  }
}

// A wrapper that adds no box of its own: the layout is that of its children.
function part(name: string): HTMLElement {
  const element = document.createElement("div");
  element.className = `part part-${name}`;
  return element;
}

// One agent message in the DOM, updated as it streams in bounded time. Its markdown is cut into top-level blocks:
// once a later block has begun, the ones before it are final (markdown never reopens a closed block), so they stay
// in the DOM and each update re-renders only from the last block on. Past MARKDOWN_LIMIT characters the rest of
// the message is shown as plain text, appended as it arrives, in pieces the browser lays out only when they are
// scrolled into view: a message of megabytes costs one markdown render of MARKDOWN_LIMIT characters at most.

import type { Env, Token } from "markdown-it";
import { markdown } from "./markdown.js";

export const MARKDOWN_LIMIT = 32 * 1024;
const PLAIN_PIECE = 16 * 1024; // characters per piece of the plain-text rest

type References = NonNullable<Env["references"]>; // the [label]: url definitions markdown-it found

// Its element holds the final blocks, then the last ones, then the plain-text rest: one parent, so that the CSS
// applies to the blocks as to any markdown (the first one's top margin, say).
export class MarkdownMessage {
  readonly element: HTMLElement;
  private lastBlocks: ChildNode[] = []; // re-rendered at each update
  private readonly plain: HTMLElement; // the text past the markdown part
  private source = ""; // the text shown, newlines normalized as markdown-it does
  private settled = 0; // source[0, settled) is in the final blocks
  private markdownShown = 0; // source[settled, markdownShown) is in the last blocks
  private settledReferences: References = {}; // the link definitions in source[0, settled)
  private referencesSeen = "{}"; // every definition the settled blocks were rendered with, as JSON
  private plainShown = 0; // source[markdownEnd, plainShown) is in `plain`

  constructor() {
    this.element = document.createElement("div");
    this.element.className = "message agent markdown";
    this.plain = document.createElement("div");
    this.plain.className = "plain-rest";
    this.element.append(this.plain);
  }

  update(text: string): void {
    const source = text.includes("\r") ? text.replace(/\r\n?/g, "\n") : text;
    if (source === this.source) return;
    if (!source.startsWith(this.source)) this.reset(); // replaced, not grown
    const markdownEnd = markdownEndOf(source);
    // (The markdown part can also shrink: to the line before MARKDOWN_LIMIT, once the text goes past it.)
    if (markdownEnd !== this.markdownShown) this.renderMarkdown(source, markdownEnd);
    this.source = source;
    if (markdownEnd < source.length) this.appendPlain(source, markdownEnd);
  }

  private renderMarkdown(source: string, markdownEnd: number): void {
    const segment = source.slice(this.settled, markdownEnd);
    const env: Env = { references: { ...this.settledReferences } };
    const tokens = markdown.parse(segment, env);
    const referencesNow = JSON.stringify(env.references ?? {});
    if (this.settled > 0 && referencesNow !== this.referencesSeen) {
      // A definition that the final blocks may use appeared or changed: render the markdown part again, whole.
      this.reset();
      this.renderMarkdown(source, markdownEnd);
      return;
    }
    // All of it is final once the text goes on past the markdown part; else everything before the last block.
    const complete = markdownEnd < source.length;
    const last = complete ? tokens.length : lastBlockStart(tokens);
    if (last > 0) {
      const settledLength = last === tokens.length ? segment.length : lineOffset(segment, tokens[last]!.map![0]);
      (this.lastBlocks[0] ?? this.plain).before(fragment(markdown.renderer.render(tokens.slice(0, last), markdown.options, env)));
      if (env.references !== undefined && Object.keys(env.references).length > 0) {
        const newlySettled: Env = {};
        markdown.parse(segment.slice(0, settledLength), newlySettled); // which definitions are in the settled text
        this.settledReferences = { ...newlySettled.references, ...this.settledReferences }; // the first one wins
      }
      this.settled += settledLength;
      this.referencesSeen = referencesNow;
    }
    for (const node of this.lastBlocks) node.remove();
    const lastBlocks = fragment(markdown.renderer.render(tokens.slice(last), markdown.options, env));
    this.lastBlocks = [...lastBlocks.childNodes];
    this.plain.before(lastBlocks);
    this.markdownShown = markdownEnd;
  }

  private appendPlain(source: string, markdownEnd: number): void {
    if (this.plainShown < markdownEnd) {
      this.plainShown = markdownEnd;
      const notice = document.createElement("div");
      notice.className = "plain-notice";
      notice.textContent = `This message is long: past its first ${MARKDOWN_LIMIT / 1024} KB it is shown as plain text.`;
      this.plain.append(notice);
    }
    while (this.plainShown < source.length) {
      const last = this.plain.lastElementChild;
      let text = last?.className === "plain-piece" ? (last.firstChild as Text) : null;
      if (text === null || text.length >= PLAIN_PIECE) {
        const piece = document.createElement("div");
        piece.className = "plain-piece";
        text = document.createTextNode("");
        piece.append(text);
        this.plain.append(piece);
      }
      const added = source.slice(this.plainShown, this.plainShown + PLAIN_PIECE - text.length);
      text.appendData(added);
      this.plainShown += added.length;
    }
  }

  private reset(): void {
    this.plain.replaceChildren();
    this.element.replaceChildren(this.plain);
    this.lastBlocks = [];
    this.source = "";
    this.settled = 0;
    this.markdownShown = 0;
    this.settledReferences = {};
    this.referencesSeen = "{}";
    this.plainShown = 0;
  }
}

function fragment(html: string): DocumentFragment {
  const template = document.createElement("template");
  template.innerHTML = html;
  return template.content;
}

// Where the markdown part ends: the whole text up to MARKDOWN_LIMIT, else the last line break before it (a line
// cut in two would render as something else), so the cut stays put as the text grows.
function markdownEndOf(source: string): number {
  if (source.length <= MARKDOWN_LIMIT) return source.length;
  const lineEnd = source.lastIndexOf("\n", MARKDOWN_LIMIT - 1);
  return lineEnd > 0 ? lineEnd + 1 : MARKDOWN_LIMIT;
}

// The index of the token that opens the last top-level block (0 when there is one block or none).
function lastBlockStart(tokens: Token[]): number {
  for (let i = tokens.length - 1; i > 0; i--) {
    if (tokens[i]!.level === 0 && tokens[i]!.nesting !== -1 && tokens[i]!.map) return i;
  }
  return 0;
}

function lineOffset(text: string, line: number): number {
  let offset = 0;
  for (let n = 0; n < line; n++) offset = text.indexOf("\n", offset) + 1;
  return offset;
}

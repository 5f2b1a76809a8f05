// The agent's markdown as HTML that loads nothing (the model's text may be steered by whatever it read): raw HTML
// is text (markdown-it with `html: false`); an image becomes a link that shows its description and URL; a link,
// an autolink and a bare URL keep no href, so the page never fetches, prefetches or navigates: a click asks the
// extension to open the URL (main.ts, "open-link"), which goes through VS Code's external-link confirmation.
// Only web and mail addresses become links; any other target (javascript:, data:, file:) stays plain text.

import MarkdownIt from "markdown-it";
import { externalLink } from "../core/external-links.js";
import { escape } from "./escape.js";

export const markdown = new MarkdownIt({ html: false, linkify: true });

markdown.validateLink = (url) => externalLink(url) !== null;

markdown.renderer.rules.link_open = (tokens, index) => {
  const url = String(tokens[index]!.attrGet("href"));
  const title = tokens[index]!.attrGet("title")?.toString();
  return `<a class="link" data-action="open-link" data-url="${escape(url)}" title="${escape(title ? `${title}\n${url}` : url)}" role="link" tabindex="0">`;
};

markdown.renderer.rules.image = (tokens, index, options, env, renderer) => {
  const url = String(tokens[index]!.attrGet("src"));
  // The URL as it would be opened (percent-encoded, punycode): what it carries is in plain sight.
  const text = `[image: ${escape(renderer.renderInlineAsText(tokens[index]!.children ?? [], options, env))}] ${escape(url)}`;
  const insideLink = tokens.slice(0, index).findLastIndex((t) => t.type === "link_open") > tokens.slice(0, index).findLastIndex((t) => t.type === "link_close");
  return insideLink // a click opens the surrounding link
    ? `<span class="image-link">${text}</span>`
    : `<a class="link image-link" data-action="open-link" data-url="${escape(url)}" title="${escape(url)}" role="link" tabindex="0">${text}</a>`;
};

// Text as HTML: the five characters that could open a tag or leave an attribute, as character references.

export function escape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

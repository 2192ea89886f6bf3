// Python syntax highlighting for the entry detail: keywords, builtins, strings, numbers, comments, def/class names.
// Builds DOM nodes (text nodes and spans) and never parses markup, so program text is always shown as text.

const PY_KEYWORDS = new Set([
  "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
  "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal",
  "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
]);  // Python's keyword.kwlist; the soft keywords (match, case, type, _) are names more often than not

const PY_BUILTINS = new Set([
  "abs", "all", "any", "bool", "chr", "dict", "divmod", "enumerate", "filter", "float", "frozenset", "int",
  "isinstance", "len", "list", "map", "max", "min", "ord", "print", "range", "reversed", "round", "set", "sorted",
  "str", "sum", "tuple", "type", "zip", "self",
]);

// One alternation, tried at each position in order: a comment, a (prefixed, possibly triple-quoted) string,
// a number, a name. Unterminated strings run to the end of the line (or of the text for triple quotes).
const PY_TOKEN = new RegExp([
  "(?<comment>#[^\\n]*)",
  "(?<string>(?:[rRbBuUfF]|[rR][bBfF]|[bBfF][rR])?(?:'''[\\s\\S]*?(?:'''|$)|\"\"\"[\\s\\S]*?(?:\"\"\"|$)" +
    "|'(?:\\\\.|[^'\\\\\\n])*'?|\"(?:\\\\.|[^\"\\\\\\n])*\"?))",
  "(?<number>\\b(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+" +
    "|(?:\\d[\\d_]*(?:\\.[\\d_]*)?|\\.\\d[\\d_]*)(?:[eE][+-]?\\d+)?[jJ]?))",
  "(?<name>[A-Za-z_][A-Za-z0-9_]*)",
].join("|"), "gy");

/** Split Python source into [kind, text] tokens; kind is null for plain text. */
function tokenizePython(source) {
  const tokens = [];
  let plain = "";
  let position = 0;
  let previousName = "";
  const flush = () => { if (plain) { tokens.push([null, plain]); plain = ""; } };
  while (position < source.length) {
    PY_TOKEN.lastIndex = position;
    const match = PY_TOKEN.exec(source);
    if (!match || match[0].length === 0) {
      plain += source[position];
      position += 1;
      continue;
    }
    const text = match[0];
    const groups = match.groups;
    let kind = null;
    if (groups.comment !== undefined) kind = "com";
    else if (groups.string !== undefined) kind = "str";
    else if (groups.number !== undefined) kind = "num";
    else if (PY_KEYWORDS.has(text)) kind = "kw";
    else if (previousName === "def" || previousName === "class") kind = "def";
    else if (PY_BUILTINS.has(text)) kind = "builtin";
    if (groups.name !== undefined) previousName = text;
    else if (text.trim()) previousName = "";
    if (kind === null) {
      plain += text;
    } else {
      flush();
      tokens.push([kind, text]);
    }
    position += text.length;
  }
  flush();
  return tokens;
}

/** A DocumentFragment of `source` with `span.tok-<kind>` around each highlighted token. */
function highlightPython(source) {
  const fragment = document.createDocumentFragment();
  for (const [kind, text] of tokenizePython(source)) {
    if (kind === null) {
      fragment.appendChild(document.createTextNode(text));
    } else {
      const span = document.createElement("span");
      span.className = "tok-" + kind;
      span.textContent = text;
      fragment.appendChild(span);
    }
  }
  return fragment;
}

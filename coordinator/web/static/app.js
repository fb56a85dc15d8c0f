// The specrun web view. Everything the service sends is untrusted text (model output,
// file names, diffs): it only ever becomes a DOM text node (textContent /
// createTextNode), never markup, and control characters are shown as escapes. No inline
// script, no eval, no innerHTML: the Content-Security-Policy forbids the first two, and
// this file never uses the others, but in ``putSanitized`` (the model's markdown, made
// HTML and sanitized by the web process).
"use strict";

const SVG = "http://www.w3.org/2000/svg";
// `specrun --verbose web` serves the page with <body data-verbose>: it then shows the
// internals too (each worker's pid), as the command line does with --verbose.
const VERBOSE = document.body.dataset.verbose === "1";

// The key every request to /api/ must carry (coordinator/web/guard.py). The first load
// trades the one-time code first.js took out of the address bar for it (the key itself
// is never in a URL, so no history holds it); once the event stream accepted it, it is
// kept in this origin's storage (which, unlike a cookie, no other port of 127.0.0.1 can
// see), where a reload or another tab finds it. Only a key that worked is kept: a link to
// this page with some other code (from a page on another port) must not replace the good
// one.
let KEY_GIVEN = "";
const KEY_STORED = (() => {
  try { return localStorage.getItem("specrun_key") || ""; } catch (error) { return ""; }
})();
let KEY = KEY_GIVEN || KEY_STORED;

function keepKey(key) {
  KEY = key;
  try { localStorage.setItem("specrun_key", key); } catch (error) { /* private mode */ }
}

const SIGNED_OUT = "signed out: open the URL `specrun web` printed";
const state = {
  status: null, convo: [], turns: new Map(), turnNodes: new Map(), suggestion: null,
  steps: {}, diffs: {}, workers: null, stats: null, seq: 0,
};

// -- inert text ----------------------------------------------------------------------

// The web process already sent every string through the terminal's rule
// (protocol/inert_text.py); this is a second net for exactly the same characters (a test
// compares the two sets): C0/C1 controls (but newline and tab), DEL, soft hyphen, bidi
// marks, overrides and isolates, zero-width and other invisible format characters and
// fillers, line separators, BOM, tag characters and lone surrogates, each shown as the
// same visible escape the terminal shows.
const HIDDEN = new RegExp("[\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f\\u00ad\\u034f" +
  "\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u0890\\u0891\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180e" +
  "\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u3164\\ud800-\\udfff\\ufeff\\uffa0" +
  "\\ufff0-\\ufffb\\u{110bd}\\u{110cd}\\u{13430}-\\u{1343f}\\u{1bca0}-\\u{1bca3}" +
  "\\u{1d173}-\\u{1d17a}\\u{e0000}-\\u{e007f}]", "gu");

function visible(text) {
  return String(text ?? "").replace(HIDDEN, (c) => {
    if (c === "\r") return "\\r";
    const code = c.codePointAt(0);
    if (code < 0x100) return "\\x" + code.toString(16).padStart(2, "0");
    if (code < 0x10000) return "\\u" + code.toString(16).padStart(4, "0");
    return "\\U" + code.toString(16).padStart(8, "0");
  });
}

// el("div", {class: "x"}, "text", child...): text arguments become text nodes.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(visible(child)));
  }
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = visible(text);
  return node;
}

function fill(id, ...children) {
  const target = document.getElementById(id);
  target.replaceChildren(...children.filter((c) => c));
  return target;
}

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
}

// -- conversation ----------------------------------------------------------------------

// A tool call's outcome in words, with a mark that does not rely on colour alone: a
// command that exited non-zero is a failure (its exit code said), never a success.
const TOOL_MARKS = {running: "…", success: "✓", error: "✗", refused: "⊘", cancelled: "−"};
const TOOL_WORDS = {running: "running", success: "success", error: "failed", refused: "refused",
                    cancelled: "cancelled"};

// A tool's result: its first lines, and the rest folded (a file read or a test run's
// output is long, and the conversation is read for what the model did).
const RESULT_LINES = 3;

function resultNode(resultText) {
  // a command's result opens with its exit code, which the line above says already
  const text = (resultText || "").replace(/^Exit code: 0\nStdout:\n/, "")
    .replace(/\nStderr: \(empty\)\n?$/, "");
  if (!text) return "";
  const lines = text.split("\n");
  if (lines.length <= RESULT_LINES + 1) return "\n  → " + text;
  const rest = lines.slice(RESULT_LINES);
  return el("span", {class: "result"}, "\n  → " + lines.slice(0, RESULT_LINES).join("\n"),
            el("details", {}, el("summary", {}, `${rest.length} more line(s)`),
               el("span", {}, rest.join("\n"))));
}

function toolNode(name, args, status, exitCode, resultText, diff, path) {
  const mark = TOOL_MARKS[status] || "•";
  let word = TOOL_WORDS[status] || status;
  if (exitCode !== null && exitCode !== undefined && exitCode !== 0) word += `, exit ${exitCode}`;
  const result = resultNode(resultText);
  if (diff && path) {  // an edit or a write: its file and its change, not its arguments
    const lines = diff.split("\n").map((line) => el("span", {
      class: line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : ""}, line + "\n"));
    return el("div", {class: `tool tool-${status}`}, `${mark} ${name} ${path} [${word}]\n`,
              el("pre", {class: "diff"}, ...lines), status === "success" ? "" : result);
  }
  return el("div", {class: `tool tool-${status}`}, `${mark} ${name}(${args}) [${word}]`, result);
}

// An approval question of a turn: the call whole (the model wrote it), why it needs a
// yes, and the answers the terminal offers. A question asked of a terminal is answered
// there; the page then says so.
function approvalNode(item) {
  const box = el("div", {class: "approval", dataset: {call: item.id}},
                 el("div", {class: "approval-question"}, `Allow ${item.name}? (${item.reason})`),
                 el("pre", {class: "approval-call"}, item.args));
  if (item.answered) {
    box.append(el("div", {class: "muted"}, item.answered));
    return box;
  }
  const what = item.name === "run_shell_command" ? "this command" : item.name;
  box.append(el("button", {type: "button", class: "approve", dataset: {answer: "once"}}, "Yes, once"));
  if (item.rememberable) {
    box.append(el("button", {type: "button", class: "approve", dataset: {answer: "session"}},
                  `Yes, and allow ${what} for this session`));
  }
  box.append(el("button", {type: "button", class: "approve deny", dataset: {answer: "no"}}, "No"),
             el("input", {type: "text", class: "approval-reason", maxlength: "2000",
                          placeholder: "why not (optional; the model reads it)"}));
  return box;
}

async function answerApproval(button) {
  const box = button.closest(".approval");
  const callId = box.dataset.call;
  const reason = box.querySelector(".approval-reason");
  const answer = button.dataset.answer;
  const said = await post("/api/approve", {call_id: callId, answer,
                                           reason: reason ? reason.value : ""});
  for (const [number, turn] of state.turns) {
    const item = turn.items.find((i) => i.k === "approval" && i.id === callId);
    if (!item) continue;
    item.answered = said && said.ok ? `answered: ${said.message}` : (said && said.message) || "";
    renderTurn(number);
  }
}

// The one place markup is made from what the service sent: model text the web process
// rendered as markdown and passed through nh3 (coordinator/web/markdown_view.py: structure
// only, no attributes, so no link, image, style or script; the text made inert first).
// ``html`` is only ever an ``html``, ``markdown`` or ``reply_html`` field of its JSON.
function putSanitized(node, html, append = false) {
  if (append) node.insertAdjacentHTML("beforeend", html);
  else node.innerHTML = html;
}

function markdownNode(html) {
  const node = el("div", {class: "model markdown"});
  putSanitized(node, html);
  return node;
}

// A reply while it streams (coordinator/web/streamed_reply.py): the blocks that ended,
// appended once; the open block, replaced when it is rendered again; the text that came
// after its last rendering, as text. One node per reply, updated in place: a long reply
// is never drawn again whole at each chunk. The ended blocks go into boxes of
// PART_PIECES each, so the layout after a chunk walks the newest box and the list of
// boxes, not every block of the reply. When the reply ends, its whole rendering replaces
// the pieces, unless the pieces already are exactly it (the usual case).
const PART_PIECES = 32;

function streamedNode(item) {
  if (item.node) return item.node;
  const node = el("div", {class: "text model markdown streaming"});
  item.closedBox = el("div", {class: "md-closed"});
  item.openBox = el("div", {class: "md-open"});
  item.pending = document.createTextNode("");
  item.part = null;
  item.pieces = 0;
  item.closedHtml = "";
  item.openHtml = "";
  node.append(item.closedBox, item.openBox, el("span", {class: "md-pending"}, item.pending));
  item.node = node;
  return node;
}

function streamText(item, text, markdown) {
  streamedNode(item);
  if (!markdown) { item.pending.appendData(visible(text)); return; }
  if (markdown.closed) {
    if (!item.part || item.pieces >= PART_PIECES) {
      item.part = el("div", {class: "md-part"});
      item.closedBox.append(item.part);
      item.pieces = 0;
    }
    putSanitized(item.part, markdown.closed, true);
    item.pieces += 1;
    item.closedHtml += markdown.closed;
  }
  if (markdown.open !== null && markdown.open !== undefined) {
    putSanitized(item.openBox, markdown.open);
    item.openHtml = markdown.open;
    item.pending.data = "";
  } else item.pending.appendData(visible(text));
}

function finishText(item, html) {
  const node = streamedNode(item);
  node.classList.remove("streaming");
  if (item.pending.data || html !== item.closedHtml + item.openHtml) putSanitized(node, html);
  item.closedBox = item.openBox = item.pending = item.part = null;
  item.closedHtml = item.openHtml = "";
  item.done = true;
}

function entryNode(entry) {
  if (entry.kind === "user") return el("div", {class: "user"}, entry.text);
  if (entry.kind === "model") {
    if (!entry.html) return el("div", {class: "model"}, entry.text);
    return markdownNode(entry.html);
  }
  return toolNode(entry.tool, entry.args, entry.status, entry.exit_code, entry.text,
                  entry.diff, entry.path);
}

function turnNode(turn) {
  const box = el("div", {class: "turn"});
  for (const item of turn.items) {
    if (item.k === "user") box.append(el("div", {class: "user"}, item.text));
    else if (item.k === "text") box.append(streamedNode(item));
    else if (item.k === "tool") {
      box.append(toolNode(item.name, item.args, item.status, item.exit_code, item.result,
                          item.diff, item.path));
    } else if (item.k === "entry") box.append(entryNode(item.entry));
    else if (item.k === "notice") box.append(el("div", {class: "notice"}, item.text));
    else if (item.k === "approval") box.append(approvalNode(item));
    else if (item.k === "end") {
      const saved = item.speculated ? " (from the speculation)" : "";
      box.append(el("div", {class: "end"}, `turn ${item.reason}${saved} ${item.message}`));
    }
  }
  return box;
}

// A long session must not make the page grow or slow down with it: the conversation keeps
// its newest MAX_BLOCKS turns (the history has them all), an event redraws only its own
// turn, and the steps and diffs of at most MAX_SPECS speculations are kept.
const MAX_BLOCKS = 200;
const MAX_SPECS = 16;
const MAX_STEPS = 200;  // per speculation, as the service keeps them
const EMPTY = "Nothing yet: send a prompt below, or use `specrun ask` or `specrun chat`; it shows here as it streams.";

function atBottom(target) {
  return target.scrollTop + target.clientHeight >= target.scrollHeight - 20;
}

function renderConversation() {
  const target = document.getElementById("conversation");
  const follow = atBottom(target);
  const nodes = [];
  let block = null;
  for (const entry of state.convo) {
    if (entry.kind === "user" || block === null) {
      block = el("div", {class: "turn"});
      nodes.push(block);
    }
    block.append(entryNode(entry));
  }
  state.turnNodes = new Map();
  for (const [number, turn] of state.turns) {
    const node = turnNode(turn);
    state.turnNodes.set(number, node);
    nodes.push(node);
  }
  if (nodes.length === 0) nodes.push(el("div", {class: "muted empty"}, EMPTY));
  target.replaceChildren(...nodes);
  trimConversation(target);
  if (follow) target.scrollTop = target.scrollHeight;
}

// ``follow``: the view was at the end before the event (a reply growing in place
// changed the height since), so it stays there.
function renderTurn(number, follow = atBottom(document.getElementById("conversation"))) {
  const target = document.getElementById("conversation");
  const fresh = turnNode(turnOf(number));
  const old = state.turnNodes.get(number);
  if (old && old.isConnected) old.replaceWith(fresh);
  else {
    for (const empty of target.querySelectorAll(":scope > .empty")) empty.remove();
    target.append(fresh);
  }
  state.turnNodes.set(number, fresh);
  trimConversation(target);
  if (follow) target.scrollTop = target.scrollHeight;
}

function trimConversation(target) {
  while (target.children.length > MAX_BLOCKS) {
    const first = target.firstElementChild;
    first.remove();
    for (const [number, node] of state.turnNodes) {
      if (node === first) {
        state.turnNodes.delete(number);
        state.turns.delete(number);
        break;
      }
    }
  }
}

function pruneSpeculations(byId) {
  // Oldest first (insertion order); the branches shown now are always kept.
  const shown = new Set(((state.suggestion && state.suggestion.branches) || [])
    .map((b) => b.speculation && b.speculation.id).filter(Boolean));
  const ids = Object.keys(byId);
  let extra = ids.length - MAX_SPECS;
  for (const id of ids) {
    if (extra <= 0) break;
    if (!shown.has(id)) { delete byId[id]; extra -= 1; }
  }
}

function turnOf(number) {
  let turn = state.turns.get(number);
  if (!turn) {
    turn = {items: []};
    state.turns.set(number, turn);
  }
  return turn;
}

// Applies a turn's event; false when it only extended the reply streaming in place (its
// node is on the page already), true when the turn is to be drawn again.
function onTurnEvent(number, event, change) {
  const turn = turnOf(number);
  const last = turn.items[turn.items.length - 1];
  if (change.reply_html !== undefined && last && last.k === "text" && !last.done) {
    finishText(last, change.reply_html);  // the text before this event ended
  }
  switch (event.type) {
    case "text": {
      const extends_ = last && last.k === "text" && !last.done;
      const item = extends_ ? last : {k: "text", text: ""};
      if (!extends_) turn.items.push(item);
      item.text += event.text;
      streamText(item, event.text, change.markdown);
      return !(extends_ && item.node.isConnected);
    }
    case "tool": {
      const item = turn.items.find((i) => i.k === "tool" && i.id === event.call_id);
      const fresh = {k: "tool", id: event.call_id, name: event.name, args: event.args,
                     status: event.status, exit_code: event.exit_code, result: event.result,
                     diff: event.diff, path: event.path};
      if (item) Object.assign(item, fresh); else turn.items.push(fresh);
      break;
    }
    case "notice": turn.items.push({k: "notice", text: event.text}); break;
    case "approval_needed":
      turn.items.push({k: "approval", id: event.call.id, name: event.call.name,
                       args: event.call.arguments, reason: event.reason,
                       rememberable: Boolean(event.rememberable), answered: ""});
      break;
    case "transcript":
      // Its first entry is the prompt, already shown.
      for (const entry of event.entries.slice(1)) turn.items.push({k: "entry", entry});
      break;
    case "turn_ended":
      turn.items.push({k: "end", reason: event.reason, message: event.message,
                       speculated: event.speculated});
      break;
  }
  return true;
}

// -- suggestion, its speculations and their diffs ---------------------------------------

function diffNode(diff) {
  // ``diff`` is what `specrun diff` shows: the same computation Tab uses.
  if (!diff) return el("div", {class: "muted"}, "no files changed yet");
  const box = el("div", {class: "files"});
  if (diff.refused) box.append(el("div", {class: "conflict"}, `Tab would apply nothing: ${diff.refused}`));
  if (diff.files.length === 0 && !diff.refused) box.append(el("div", {class: "muted"}, "no files changed yet"));
  // As the terminal says it: one file changed meanwhile makes Tab refuse all of it (a
  // file git ignores is only left as the person has it).
  const refusing = diff.files.filter((f) => f.change.conflict && !f.change.ignored).map((f) => f.change.path);
  if (refusing.length) {
    box.append(el("div", {class: "conflict refusing"},
      `Tab would refuse all of it now: ${refusing.join(", ")} changed in the project since the speculation read it`));
  }
  for (const file of diff.files) {
    const change = file.change;
    const mode = change.mode ? ` (${change.mode})` : "";
    const counts = file.binary || file.too_large ? "" : ` +${file.added} -${file.removed}`;
    const name = change.link ? `${change.path} -> ${change.link}` : change.path;
    const kind = change.link ? `${change.status} link` : change.status;
    const head = el("div", {class: "file-head"}, `${kind}${mode}: ${name}${change.link ? "" : counts}`);
    const part = el("div", {class: "file"}, head);
    if (change.runs_later) part.append(el("div", {class: "warn"}, "runs later: something runs this file later without a key press"));
    if (change.ignored) part.append(el("div", {class: "muted"}, "ignored by git (a cache or build output)"));
    if (change.conflict && change.ignored) {
      part.append(el("div", {class: "muted"}, `changed in the project meanwhile (${change.conflict}): Tab leaves the real file as it is`));
    } else if (change.conflict) {
      part.append(el("div", {class: "conflict"}, `conflict: the real file was ${change.conflict} since; Tab would refuse the whole accept`));
    }
    if (file.binary) part.append(el("div", {class: "muted"}, "binary file"));
    else if (file.too_large) part.append(el("div", {class: "muted"}, file.size >= 0
      ? `too large to diff in time: ${file.size} bytes, sha256 ${file.sha256}`
      : "not a plain file"));
    else if (file.diff) {
      const pre = el("pre", {class: "diff"});
      // Only the lines before the first hunk are file lines: after it, a removed
      // "-- comment" reads "--- comment" and must still show as a removal.
      let inHunks = false;
      for (const line of file.diff.split("\n")) {
        if (line === "") continue;
        let kind = "";
        if (line.startsWith("@@")) { inHunks = true; kind = "hunk"; }
        else if (!inHunks && (line.startsWith("+++") || line.startsWith("---"))) kind = "meta";
        else if (line.startsWith("+")) kind = "add";
        else if (line.startsWith("-")) kind = "del";
        pre.append(el("span", {class: kind}, line));
      }
      part.append(pre);
    }
    if (file.cut_lines) {
      part.append(el("div", {class: "muted"},
        `… and ${file.cut_lines} more line(s) of this diff, not sent to the page: \`specrun diff\` shows them all`));
    }
    box.append(part);
  }
  // Symlinks the speculation's commands made that Tab would not create, with why.
  for (const held of diff.links_held || []) {
    box.append(el("div", {class: "muted"}, `not created at Tab: symlink ${held}`));
  }
  return box;
}

// A diff is drawn once per version of it: a running speculation's every step redraws
// its branch, and a diff may be thousands of lines.
const drawnDiffs = new WeakMap();

function cachedDiffNode(diff) {
  if (!diff) return diffNode(diff);
  let node = drawnDiffs.get(diff);
  if (!node) {
    node = diffNode(diff);
    drawnDiffs.set(diff, node);
  }
  return node;
}

function stepsNode(steps) {
  const box = el("div", {class: "steps"});
  for (const step of steps || []) {
    if (step.kind === "text") {
      box.append(step.html ? markdownNode(step.html) : el("div", {class: "model"}, step.text));
    }
    else {
      box.append(toolNode(step.tool, step.args, step.status, step.exit_code, step.text,
                          step.diff, step.path));
    }
  }
  return box;
}

// Why no suggestion is shown, in words (protocol/wire/control.py's SuppressReason).
const SUPPRESSED = {
  empty: "the model guessed nothing", hidden_characters: "the guess held hidden characters",
  done: "the model thinks the work is done", meta_text: "the guess was about guessing",
  meta_wrapped: "the guess was about guessing", error_message: "the guess read like an error",
  prefixed_label: "the guess came with a label", too_few_words: "the guess was too short",
  too_many_words: "the guess was too long", too_long: "the guess was too long",
  multiple_sentences: "the guess was more than one sentence",
  has_formatting: "the guess had formatting", evaluative: "the guess judged instead of asking",
  ai_voice: "the guess spoke as the assistant, not as you",
  early_conversation: "too early in the conversation to guess",
  no_snapshot: "nothing to guess from yet", error: "the request for a guess failed",
  refusal: "the model declined to guess",
  backoff: "paused after several suggestions went unused",
  cold_cache: "skipped while the prompt cache is cold (a guess would cost many uncached tokens)",
  unfocused: "no one is looking (every chat and page is in the background); made on return",
  away: "no one has typed for a while; made on return",
};

function renderSuggestion() {
  const s = state.suggestion;
  if (!s || !s.text) {
    const why = s && s.pending ? "a suggestion is being generated" :
      s && s.suppressed_reason ? `no suggestion: ${SUPPRESSED[s.suppressed_reason] || s.suppressed_reason}`
        : "no suggestion";
    fill("suggestion", el("div", {class: "muted"}, why));
    return;
  }
  const nodes = [];
  for (const branch of s.branches) {
    const spec = branch.speculation;
    const status = spec ? spec.status : branch.skipped ? `skipped: ${branch.skipped}` : "not speculated";
    // The button names what it shows: the service takes it only if it is still that.
    const accept = el("button", {class: "accept", dataset: {
      index: String(branch.rank), text: branch.text, speculation: spec ? spec.id : ""}}, "Accept");
    const head = el("div", {class: "branch-head"},
      el("span", {class: "badge", title: `specrun accept --branch ${branch.rank + 1} takes it`},
         `branch ${branch.rank + 1}`),
      el("span", {class: "branch-text"}, branch.text),
      el("span", {class: `badge status-${spec ? spec.status : "none"}`}, status),
      accept);
    const box = el("div", {class: "branch", dataset: {rank: String(branch.rank)}}, head);
    if (spec) {
      const facts = `${spec.turns} turn(s), ${spec.tool_uses} tool use(s), ${spec.elapsed_s.toFixed(2)} s` +
        "";  // the worker's pid is an internal: the Workers table has it
      box.append(el("div", {class: "muted"}, facts));
      // in words, as the terminal says it; the raw code:detail only on a verbose page
      if (spec.boundary_reason) box.append(el("div", {class: "warn"},
        spec.boundary_words && !VERBOSE ? spec.boundary_words : `stopped at: ${spec.boundary_reason}`));
      box.append(el("h3", {}, "Steps"), stepsNode(state.steps[spec.id]));
      const diff = state.diffs[spec.id];
      const none = !diff || (diff.files.length === 0 && !diff.refused && !(diff.links_held || []).length);
      // "yet" only while it runs: a speculation that ended without writing wrote nothing
      box.append(el("h3", {}, "Diff"), none
        ? el("div", {class: "muted"}, spec.status === "running" ? "no files changed yet" : "no files changed")
        : cachedDiffNode(diff));
    }
    nodes.push(box);
  }
  const reject = el("button", {id: "reject"}, "Reject");
  fill("suggestion", ...nodes, reject);
}

// -- workers and containment -------------------------------------------------------------

function renderWorkers() {
  const w = state.workers;
  if (!w) return;
  // A worker's pid is an internal: shown only on a page served by `specrun --verbose web`.
  const pid = (one) => VERBOSE ? [el("td", {}, String(one.info.pid))] : [];
  const rows = w.workers.map((one) => el("tr", {},
    ...pid(one), el("td", {}, one.info.state),
    el("td", {}, one.info.job_kind || "–"),
    el("td", {}, one.cpu_percent === null ? "–" : `${one.cpu_percent}%`),
    el("td", {}, bytes(one.info.rss_bytes)), el("td", {}, bytes(one.overlay_bytes))));
  const names = [...(VERBOSE ? ["pid"] : []), "state", "job", "CPU", "RSS", "overlay"];
  const head = el("tr", {}, ...names.map((h) => el("th", {}, h)));
  fill("workers", el("table", {}, head, ...rows));
  fill("containment", ...w.containment.map((layer) =>
    el("li", {class: layer.active ? "" : "layer-off"},
      `${layer.name}: ${layer.active ? "active" : "NOT active"}${layer.detail ? " (" + layer.detail + ")" : ""}`)));
}

// -- stats as charts (SVG drawn here, no library) -----------------------------------------

// Every chart says what it shows in a caption under its title; a chart of rates is scaled
// to 1 (all accepted), not to its largest bar.
function barChart(title, caption, bars, scaleTo) {
  const width = 260, row = 18, left = 90, height = Math.max(1, bars.length) * row + 8;
  const max = scaleTo || Math.max(1e-9, ...bars.map((b) => b.value));
  const chart = svg("svg", {viewBox: `0 0 ${width} ${height}`, role: "img"});
  chart.append(svg("title", {}, title));
  bars.forEach((bar, i) => {
    const y = 4 + i * row;
    const w = Math.max(0, (width - left - 50) * bar.value / max);
    chart.append(svg("text", {x: 2, y: y + 12}, bar.label));
    chart.append(svg("rect", {x: left, y: y + 2, width: w.toFixed(1), height: row - 6, class: "bar " + (bar.kind || "")}));
    chart.append(svg("text", {x: left + w + 4, y: y + 12}, bar.text ?? `${bar.value}`));
  });
  if (bars.length === 0) chart.append(svg("text", {x: 2, y: 14}, "nothing yet"));
  return el("div", {class: "chart"}, el("h3", {}, title), el("p", {class: "caption"}, caption), chart);
}

function lineChart(title, caption, values, accepted) {
  const width = 260, height = 90, pad = 14;
  const chart = svg("svg", {viewBox: `0 0 ${width} ${height}`, role: "img"});
  chart.append(svg("title", {}, title));
  chart.append(svg("line", {x1: pad, y1: height - pad, x2: width - 4, y2: height - pad, class: "axis"}));
  if (values.length === 0) {
    // accepts that ran as normal turns (a boundary, a fallback) save no time to draw
    chart.append(svg("text", {x: pad, y: height / 2},
                     accepted ? `${accepted} accepted, none with time saved yet` : "no accepts yet"));
  } else {
    const max = Math.max(1e-9, ...values);
    const step = values.length > 1 ? (width - pad - 8) / (values.length - 1) : 0;
    const points = values.map((v, i) =>
      `${(pad + i * step).toFixed(1)},${(height - pad - (height - 2 * pad) * v / max).toFixed(1)}`);
    chart.append(svg("polyline", {points: points.join(" "), class: "line"}));
    values.forEach((v, i) => {
      const [x, y] = points[i].split(",");
      chart.append(svg("circle", {cx: x, cy: y, r: 3, class: "bar"}));
    });
    // at the right: a first point sits at the left edge, under where this would be
    chart.append(svg("text", {x: width - 4, y: 10, "text-anchor": "end"}, `max ${max.toFixed(2)} s`));
  }
  return el("div", {class: "chart"}, el("h3", {}, title), el("p", {class: "caption"}, caption), chart);
}

function renderStats() {
  const live = state.stats;
  if (!live) return;
  const s = live.stats;
  const total = s.suggestions_accepted;
  const tokens = Object.entries(s.tokens).map(([purpose, t]) =>
    ({label: purpose, value: t.prompt + t.completion}));
  // counts and tokens on separate charts: one scale for both hid the counts
  const acceptedVsThrown = [
    {label: "accepted", value: s.suggestions_accepted},
    {label: "thrown away", value: s.suggestions_ignored + s.speculations_aborted + s.speculations_failed, kind: "bad"},
  ];
  const tokensKept = [
    {label: "kept", value: s.speculation_tokens.accepted},
    {label: "lost", value: s.speculation_tokens.discarded, kind: "bad"},
  ];
  const ranks = Object.keys(live.speculated_by_rank).sort((a, b) => Number(a) - Number(b));
  const byRank = ranks.map((rank) => {
    const tried = live.speculated_by_rank[rank], taken = s.accepted_by_rank[rank] || 0;
    const rate = tried ? taken / tried : 0;
    // numbered as a person reads them everywhere (`specrun accept --branch N`): the wire's
    // rank counts from 0, branch 1 is the top guess
    return {label: `branch ${Number(rank) + 1}`, value: rate, text: `${taken}/${tried}`};
  });
  const typing = s.accepted_by_typing;
  const typed = (typing.prefix_kept || 0) + (typing.exact_match || 0);
  const byTyping = [
    {label: "prefix kept", value: total ? (typing.prefix_kept || 0) / total : 0, text: String(typing.prefix_kept || 0)},
    {label: "typed out", value: total ? (typing.exact_match || 0) / total : 0, text: String(typing.exact_match || 0)},
    {label: "no typing", value: total ? (total - typed) / total : 0, text: String(total - typed), kind: "alt"},
  ];
  const summary = el("p", {class: "muted"},
    `${s.suggestions_shown} shown, ${total} accepted, ${s.time_saved_total_s.toFixed(2)} s saved in all`);
  fill("stats", summary, el("div", {class: "charts"},
    lineChart("Time saved per accept (s)",
              "Seconds each accept saved over running its prompt then, oldest first.",
              s.time_saved_s, total),
    barChart("Tokens by purpose",
             "Prompt + completion tokens, by what the requests were for.", tokens),
    barChart("Suggestions: accepted vs thrown away",
             "Suggestions taken; those ignored and speculations aborted or failed.",
             acceptedVsThrown),
    barChart("Speculation tokens: kept vs lost",
             "Tokens of speculations that were accepted, and of those thrown away.",
             tokensKept),
    barChart("Accept rate by guess",
             "Accepted / speculated, for each guess (branch 1 is the top one); full bar: all.",
             byRank, 1),
    barChart("Accepts by typing",
             "Share of accepts: after typing the beginning, typed out in full, or no typing.",
             byTyping, 1)));
}

// -- applying what the service sends --------------------------------------------------------

function renderAll() {
  const status = state.status;
  if (status) document.getElementById("project").textContent = visible(status.project);
  renderConversation();
  renderSuggestion();
  renderWorkers();
  renderStats();
}

function onSnapshot(snap) {
  state.seq = snap.seq;
  state.status = snap.status;
  state.convo = snap.conversation;
  state.turns = new Map();
  state.suggestion = snap.suggestion;
  state.steps = snap.steps;
  state.diffs = snap.diffs;
  state.workers = snap.workers;
  state.stats = snap.stats;
  renderAll();
}

function onChange(change) {
  switch (change.type) {
    case "prompt":
      turnOf(change.turn).items.push({k: "user", text: change.text});
      renderTurn(change.turn);
      break;
    case "turn_event": {
      const target = document.getElementById("conversation");
      const follow = atBottom(target);
      if (onTurnEvent(change.turn, change.event, change)) renderTurn(change.turn, follow);
      else if (follow) target.scrollTop = target.scrollHeight;
      break;
    }
    case "suggestion": state.suggestion = change.suggestion; renderSuggestion(); break;
    case "speculation_step": {
      const steps = state.steps[change.speculation_id] || (state.steps[change.speculation_id] = []);
      // a tool call comes again with its result, and a text step already in the
      // snapshot comes again as an event: each replaces the one it updates
      const step = change.step;
      const at = steps.findIndex((s) => s.kind === step.kind &&
        (step.kind === "tool" ? s.call_id === step.call_id : s.turn === step.turn));
      if (at >= 0) steps[at] = change.step; else steps.push(change.step);
      if (steps.length > MAX_STEPS) steps.splice(0, steps.length - MAX_STEPS);
      pruneSpeculations(state.steps);
      renderSuggestion();
      break;
    }
    case "diff":
      state.diffs[change.speculation_id] = change;
      pruneSpeculations(state.diffs);
      renderSuggestion();
      break;
    case "workers": state.workers = change; renderWorkers(); break;
    case "stats": state.stats = change; renderStats(); break;
    case "reset": state.convo = []; state.turns = new Map(); renderConversation(); break;
  }
}

function setConnection(text, ok) {
  const badge = document.getElementById("connection");
  badge.textContent = text;
  badge.className = "badge " + (ok ? "ok" : "bad");
}

function connect(key = KEY_GIVEN || KEY,
                 fallback = KEY_GIVEN && KEY_STORED !== KEY_GIVEN ? KEY_STORED : "") {
  if (!key) { setConnection(SIGNED_OUT, false); return; }
  const source = new EventSource("/api/events?key=" + encodeURIComponent(key) +
                                 "&page=" + PAGE_ID);
  source.addEventListener("open", () => {
    keepKey(key);
    setConnection("live", true);
    reportVisibility();
  });
  source.addEventListener("snapshot", (e) => onSnapshot(JSON.parse(e.data)));
  source.addEventListener("change", (e) => onChange(JSON.parse(e.data)));
  source.addEventListener("closed", (e) => {
    // This view ended (with the service, or stopped itself); a new one has a new address
    // and token. The web process says which, and what to run.
    setConnection(visible(JSON.parse(e.data)), false);
    source.close();
  });
  source.addEventListener("error", () => {
    // A refusal (another view now serves this port, or the key is not its key) ends the
    // stream for good: the stored key is tried next, if there is another one; a dropped
    // connection is retried by the browser.
    if (source.readyState !== EventSource.CLOSED) setConnection("reconnecting", false);
    else if (fallback) connect(fallback, "");
    else setConnection(SIGNED_OUT, false);
  });
}

// -- whether this page is looked at: while no page and no chat is, the service does not
// predict the next prompt (and spends no tokens on it); it does when one is again ---------

const PAGE_ID = (crypto.randomUUID ? crypto.randomUUID()
                 : String(Math.random()).slice(2) + String(Date.now()));
const VISIBILITY_REFRESH_MS = 20000;  // the service forgets a report after three of these

async function reportVisibility() {
  if (!KEY) return;
  try {
    await fetch("/api/visibility", {
      method: "POST", headers: {"Content-Type": "application/json", "X-Specrun-Key": KEY},
      body: JSON.stringify({page: PAGE_ID, visible: document.visibilityState === "visible"}),
      credentials: "same-origin",
    });
  } catch (error) { /* the view is gone: the connection line says so */ }
}

document.addEventListener("visibilitychange", reportVisibility);
setInterval(reportVisibility, VISIBILITY_REFRESH_MS);

// -- actions: the same requests as `specrun ask`, `accept --branch N`, `reject`, `undo` ------

async function post(path, body) {
  const result = document.getElementById("action-result");
  result.textContent = "…";
  try {
    const response = await fetch(path, {
      method: "POST", headers: {"Content-Type": "application/json", "X-Specrun-Key": KEY},
      body: JSON.stringify(body), credentials: "same-origin",
    });
    const json = (response.headers.get("Content-Type") || "").startsWith("application/json");
    // A refusal by the guard is one plain sentence, not JSON.
    const answer = json ? await response.json() : {ok: false, message: await response.text()};
    result.textContent = visible(answer.message || answer.reason || (answer.ok ? "done" : "failed"));
    result.dataset.ok = String(Boolean(answer.ok));
    return answer;
  } catch (error) {
    result.textContent = visible(`failed: ${error}`);
    result.dataset.ok = "false";
    return {ok: false, message: `failed: ${error}`};
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("ask").addEventListener("submit", (event) => {
    event.preventDefault();
    const input = document.getElementById("prompt");
    const text = input.value;
    input.value = "";
    if (text.trim()) post("/api/ask", {text});
  });
  document.getElementById("conversation").addEventListener("click", (event) => {
    const target = event.target;
    if (target instanceof HTMLButtonElement && target.classList.contains("approve")) {
      answerApproval(target);
    }
  });
  document.getElementById("undo").addEventListener("click", () => post("/api/undo", {}));
  document.getElementById("suggestion").addEventListener("click", (event) => {
    const target = event.target;
    if (!(target instanceof HTMLButtonElement)) return;
    if (target.classList.contains("accept")) {
      post("/api/accept", {index: Number(target.dataset.index), text: target.dataset.text,
                           speculation: target.dataset.speculation});
    }
    else if (target.id === "reject") post("/api/reject", {});
  });
  tradeHandoff().then(() => connect());
});

async function tradeHandoff() {
  const code = window.specrunHandoff || "";
  window.specrunHandoff = "";
  if (!code) return;
  try {
    const response = await fetch("/handoff", {
      method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({code}), credentials: "same-origin",
    });
    if (response.ok) KEY_GIVEN = (await response.json()).key || "";
  } catch (error) { /* signed out: connect() says so */ }
  if (KEY_GIVEN) KEY = KEY_GIVEN;
}

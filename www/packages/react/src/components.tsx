import { useEffect, useLayoutEffect, useRef, useState, type FormEvent, type KeyboardEvent } from "react";
import type { Risk } from "../wasm/tether_web.js";
import { useApprovalRequests, useRendererLookup, useTether, useTetherState } from "./hooks.js";
import type { ToolCallView } from "./store.js";
import { asText, connectionWords } from "./store.js";

/** `tether-risk tether-risk-<risk>`: each level has its own class. */
const riskClass = (risk: Risk) => `tether-risk tether-risk-${risk}`;

/**
 * The arguments of a call as the approval dialog lists them: for an object, each field with its
 * value (a string as it is, anything else as compact JSON); anything else as one JSON line under
 * an empty name.
 */
export function argsSummary(args: unknown): [string, string][] {
  return isRecord(args) ? Object.entries(args).map(([name, value]) => [name, asText(value)]) : [["", asText(args)]];
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value);

/**
 * The arguments with the fields the user edited: a string field takes the text; a number field
 * the number written (the text, if it is not one); a boolean field `true` or `false` (else the
 * text). Only such fields are editable in the dialog. The same as tether-leptos's `edited_args`.
 */
export function editedArgs(args: Record<string, unknown>, edits: Record<string, string>): Record<string, unknown> {
  const result: Record<string, unknown> = { ...args };
  for (const [name, text] of Object.entries(edits)) {
    const typed = text.trim();
    const old = typeof args[name];
    result[name] =
      old === "number" && typed !== "" && Number.isFinite(Number(typed))
        ? Number(typed)
        : old === "boolean" && (typed === "true" || typed === "false")
          ? typed === "true"
          : text;
  }
  return result;
}

/** How deep `allowedValues` follows a `$ref` into itself. */
const MAX_REF_DEPTH = 8;

/**
 * The values a field of a tool's arguments allows, when its schema lists them: `enum`, `const`,
 * or `oneOf`/`anyOf` of those, through local `$ref`s (`#/$defs/…`, `#/definitions/…`), `null`
 * left out. `null` when the schema does not list them (any value of its type goes).
 */
export function allowedValues(parameters: unknown, field: string): unknown[] | null {
  const root = isRecord(parameters) ? parameters : {};
  const resolve = (node: unknown, depth: number): Record<string, unknown> | null => {
    if (!isRecord(node)) return null;
    const ref = node.$ref;
    if (typeof ref !== "string" || !ref.startsWith("#")) return node;
    if (depth >= MAX_REF_DEPTH) return null;
    let target: unknown = root;
    for (const part of ref.slice(1).split("/").filter(Boolean)) {
      const key = decodeURIComponent(part).replace(/~1/g, "/").replace(/~0/g, "~");
      target = isRecord(target) ? target[key] : undefined;
    }
    return resolve(target, depth + 1);
  };
  const values = (node: unknown, depth: number): unknown[] | null => {
    const schema = resolve(node, depth);
    if (!schema) return null;
    if (Array.isArray(schema.enum)) return schema.enum.filter((v) => v !== null);
    if ("const" in schema) return schema.const === null ? [] : [schema.const];
    const branches = Array.isArray(schema.oneOf) ? schema.oneOf : Array.isArray(schema.anyOf) ? schema.anyOf : null;
    if (!branches) return null;
    const found: unknown[] = [];
    for (const branch of branches) {
      const resolved = resolve(branch, depth + 1);
      if (resolved?.type === "null") continue;
      const listed = values(branch, depth + 1);
      if (listed === null) return null;
      found.push(...listed);
    }
    return found;
  };
  const properties = root.properties;
  return isRecord(properties) && field in properties ? values(properties[field], 0) : null;
}

/** The choices a select offers: the allowed values, and the current one first if it is not among them. */
const choiceList = (allowed: string[], current: string) => (allowed.includes(current) ? allowed : [current, ...allowed]);

/** Whether the dialog lets the user edit a field: a string, a number or a boolean. */
const editable = (value: unknown) => ["string", "number", "boolean"].includes(typeof value);

/**
 * Asks the user to approve `high` and `critical` calls, one at a time: the tool, its risk, its
 * description and the arguments, field by field ({@link argsSummary}). Reject, the safe choice,
 * takes the focus, so Enter never approves by accident; Escape rejects. What the user types in
 * its text field is the reason the model reads with a refusal (`the user said: …`); Enter there
 * refuses. Edit makes each string, number and boolean field of an object's arguments editable;
 * "Approve with changes" then approves the changed call (`approveWithArgs`).
 */
export function ApprovalDialog() {
  const { current, approve, approveWithArgs, reject } = useApprovalRequests();
  const { stop } = useTether();
  const tools = useTetherState((s) => s.tools);
  const rejectButton = useRef<HTMLButtonElement>(null);
  // What the user typed: the reason a refusal gives the model (or what to do instead).
  const [reason, setReason] = useState("");
  // The fields as the user edits them (after Edit), by name.
  const [edits, setEdits] = useState<Record<string, string> | null>(null);
  useEffect(() => {
    setEdits(null);
    if (current) rejectButton.current?.focus();
  }, [current]);
  if (!current) return null;
  const canEdit = isRecord(current.args);
  const parameters = tools.find((tool) => tool.name === current.tool)?.parameters;
  const choicesOf = (name: string) => {
    const values = allowedValues(parameters, name);
    return values && values.length > 0 ? values.map((v) => (typeof v === "string" ? v : JSON.stringify(v))) : null;
  };
  const refuse = (fallback: string) => {
    const typed = reason.trim();
    setReason("");
    reject(current.callId, typed ? `the user said: ${typed}` : fallback);
  };
  const onKeyDown = (event: KeyboardEvent) => {
    if (event.key === "Escape") {
      event.preventDefault();
      refuse("the user pressed Escape");
    }
  };
  return (
    <div className="tether-approval-backdrop">
      <div
        className="tether-approval"
        role="dialog"
        aria-modal="true"
        aria-labelledby="tether-approval-title"
        aria-describedby="tether-approval-description"
        data-testid="approval-dialog"
        onKeyDown={onKeyDown}
      >
        <h2 id="tether-approval-title">
          The assistant wants to run <code>{current.tool}</code>
        </h2>
        <p>
          <span className={riskClass(current.risk)} data-testid="approval-risk">
            {current.risk}
          </span>
        </p>
        <p id="tether-approval-description">{current.description}</p>
        <dl className="tether-approval-args" data-testid="approval-args">
          {argsSummary(current.args).map(([name, value]) => {
            const editing = edits !== null && editable((current.args as Record<string, unknown>)[name]);
            const choices = editing ? choicesOf(name) : null;
            const text = edits?.[name] ?? value;
            const field = {
              "aria-label": name,
              "data-testid": "approval-arg-input",
              "data-field": name,
              value: text,
              onChange: (event: { target: { value: string } }) => setEdits({ ...edits, [name]: event.target.value }),
            };
            return (
              <div key={name} data-testid="approval-arg">
                <dt>{name}</dt>
                <dd>
                  {choices ? (
                    // The values the tool allows: a choice, never a value its schema refuses.
                    <select {...field}>
                      {choiceList(choices, text).map((choice) => (
                        <option key={choice} value={choice}>
                          {choice}
                        </option>
                      ))}
                    </select>
                  ) : editing ? (
                    <input type="text" {...field} />
                  ) : (
                    value
                  )}
                </dd>
              </div>
            );
          })}
        </dl>
        {/* Enter here refuses, with these words as the reason. */}
        <form
          onSubmit={(event) => {
            event.preventDefault();
            refuse("the user pressed Reject");
          }}
        >
          <input
            type="text"
            className="tether-approval-reason"
            aria-label="Reason for refusing, or what to do instead (optional)"
            placeholder="Reason for refusing, or what to do instead (optional)"
            data-testid="approval-reason"
            value={reason}
            onChange={(event) => setReason(event.target.value)}
          />
        </form>
        <div className="tether-approval-buttons">
          <button
            className="tether-approve"
            data-testid="approval-approve"
            onClick={() => {
              setReason("");
              if (edits) approveWithArgs(current.callId, editedArgs(current.args as Record<string, unknown>, edits));
              else approve(current.callId);
            }}
          >
            {edits ? "Approve with changes" : "Approve"}
          </button>
          {canEdit && !edits ? (
            <button className="tether-edit" data-testid="approval-edit" onClick={() => setEdits({})}>
              Edit
            </button>
          ) : null}
          <button
            className="tether-reject"
            data-testid="approval-reject"
            ref={rejectButton}
            onClick={() => refuse("the user pressed Reject")}
          >
            Reject
          </button>
          {/* Ends the whole run, not only this call. */}
          <button className="tether-stop" data-testid="approval-stop" onClick={() => stop()}>
            Stop the run
          </button>
        </div>
      </div>
    </div>
  );
}

/** What each call status says in the chat. */
export const TOOL_CALL_STATUS_WORDS: Record<ToolCallView["status"], string> = {
  streaming: "being written",
  approval: "waiting for your approval",
  running: "running",
  done: "done",
  failed: "failed",
  refused: "refused",
  cancelled: "cancelled",
};

/** A tool call in the chat without a renderer of its own: the tool, its arguments, its status. */
function DefaultToolCall(call: ToolCallView) {
  const args = argsSummary(call.args)
    .map(([name, value]) => (name ? `${name}: ${value}` : value))
    .join(", ");
  return (
    <span className="tether-tool-call">
      <code>{call.tool}</code>
      {args ? ` (${args})` : ""} — {TOOL_CALL_STATUS_WORDS[call.status]}
    </span>
  );
}

/**
 * A chat with the agent; answers stream in. Agent lines carry `data-status` once done. Each tool
 * call has its line at its place between the agent's words (`data-testid="chat-tool-call"`,
 * `data-call-status`), drawn by the tool's `render` if it has one. While not
 * connected it says so, and a message written meanwhile is marked as waiting until it leaves.
 * While a run is in progress, Stop ends it (`data-testid="chat-stop"`). The lines follow the newest
 * one unless the user has scrolled up.
 */
export function ChatPanel() {
  const { sendMessage, stop } = useTether();
  const renderer = useRendererLookup();
  const messages = useTetherState((s) => s.messages);
  // While a run waits for an approval or a question's answer, a message answers it (see `sendMessage`).
  const running = useTetherState((s) => s.running && s.approvals.length === 0 && !s.messages.some((line) => line.call?.respond));
  const connection = useTetherState((s) => s.connection);
  const attempt = useTetherState((s) => s.attempt);
  const open = connection === "open";
  const [draft, setDraft] = useState("");
  const lines = useFollowNewest(messages);
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    if (draft.trim() && !running) {
      sendMessage(draft);
      setDraft("");
    }
  };
  return (
    <section className="tether-chat" aria-label="Assistant" data-testid="chat-panel">
      <ol className="tether-chat-lines" aria-live="polite" ref={lines.ref} onScroll={lines.onScroll}>
        {messages.map((line) =>
          line.call ? (
            <li
              key={line.key}
              className="tether-line tether-line-tool"
              data-testid="chat-tool-call"
              data-tool={line.call.tool}
              data-call-status={line.call.status}
            >
              {(renderer(line.call.tool) ?? DefaultToolCall)(line.call)}
            </li>
          ) : (
          <li
            key={line.key}
            className={`tether-line tether-line-${line.role}`}
            data-testid="chat-message"
            data-status={line.status ?? ""}
            data-waiting={line.waiting ? "true" : undefined}
          >
            {line.text}
            {line.waiting ? <small className="tether-waiting"> (waiting for the connection)</small> : null}
          </li>
          ),
        )}
      </ol>
      {!open && (
        <p className="tether-chat-status" data-testid="chat-status" role="status">
          Not connected to the agent server ({connectionWords(connection, attempt)}). Messages you send wait until the
          connection is back.
        </p>
      )}
      <form className="tether-chat-form" onSubmit={onSubmit}>
        <input
          type="text"
          aria-label="Message to the assistant"
          placeholder="Ask the assistant…"
          data-testid="chat-input"
          value={draft}
          onChange={(event) => setDraft(event.target.value)}
        />
        <button type="submit" data-testid="chat-send" disabled={running}>
          {running ? (open ? "Working…" : "Waiting for the server…") : "Send"}
        </button>
        {running && open ? (
          <button type="button" className="tether-stop" data-testid="chat-stop" onClick={() => stop()}>
            Stop
          </button>
        ) : null}
      </form>
    </section>
  );
}

/** How close to the bottom (in pixels) the chat counts as showing its newest line. */
const NEAR_BOTTOM_PX = 24;

/**
 * Keeps a scrolling list at its newest line as lines arrive or grow, unless the user scrolled up
 * to read older ones (scrolling back to the bottom follows again).
 */
function useFollowNewest(content: unknown) {
  const ref = useRef<HTMLOListElement>(null);
  const following = useRef(true);
  // Where the list was scrolled to last to follow (its own scroll events are not the user's).
  const scrolledTo = useRef(0);
  useLayoutEffect(() => {
    const list = ref.current;
    if (list && following.current) {
      list.scrollTop = list.scrollHeight;
      scrolledTo.current = list.scrollTop;
    }
  }, [content]);
  // Back at the bottom follows again; above where the list last put itself (the user scrolled
  // up) stops following. Lines that grew below change neither.
  const onScroll = () => {
    const list = ref.current;
    if (!list) return;
    if (list.scrollHeight - list.scrollTop - list.clientHeight <= NEAR_BOTTOM_PX) following.current = true;
    else if (list.scrollTop < scrolledTo.current) following.current = false;
  };
  return { ref, onScroll };
}

/**
 * The registry as the model sees it, live: the page's tools (before connecting too), refused ones,
 * the connection in words, and the last calls.
 */
export function ToolInspector() {
  const { tools, refused, calls, connection, attempt, contextUpdates } = useTetherState();
  return (
    <aside className="tether-inspector" aria-label="Tool inspector" data-testid="tool-inspector">
      <h2>
        Tools <span data-testid="inspector-count">{tools.length}</span> ·{" "}
        <span data-testid="inspector-connection" data-state={connection}>
          {connectionWords(connection, attempt)}
        </span>{" "}
        · updates <span data-testid="inspector-context-updates">{contextUpdates}</span>
      </h2>
      {connection !== "open" && (
        <p className="tether-inspector-note" data-testid="inspector-note">
          Registered in this page; the model sees them once connected.
        </p>
      )}
      <ul>
        {tools.map((tool) => (
          <li key={tool.name} data-testid="inspector-tool" data-tool={tool.name}>
            <code>{tool.name}</code> <span className={riskClass(tool.risk)}>{tool.risk}</span>
            {tool.global ? " global" : null}
            <small> {tool.description}</small>
          </li>
        ))}
      </ul>
      {refused.length > 0 && (
        <>
          <h3>Refused</h3>
          <ul>
            {refused.map((r) => (
              <li key={r.tool} data-testid="inspector-refused" data-event={r.event}>
                <code>{r.tool}</code> — {r.reason}
              </li>
            ))}
          </ul>
        </>
      )}
      <h3>Last calls</h3>
      <ol>
        {calls.map((call) => (
          <li key={call.callId} data-testid="inspector-call" data-status={call.status}>
            <code>{call.tool}</code> → {call.status}
            {call.settleMs != null ? ` (settled in ${Math.round(call.settleMs)} ms)` : null}
          </li>
        ))}
      </ol>
    </aside>
  );
}

/**
 * The errors the runtime reported, newest last: refused tools, server errors, connection failures
 * (one line per outage, with the URL and the attempts so far) and a runtime that did not load.
 */
export function RuntimeErrors() {
  const errors = useTetherState((s) => s.errors);
  return (
    <ul className="tether-errors" aria-label="Runtime errors" data-testid="runtime-errors">
      {errors.map((error, i) => (
        <li key={i} data-testid="runtime-error">
          {error.message}
        </li>
      ))}
    </ul>
  );
}

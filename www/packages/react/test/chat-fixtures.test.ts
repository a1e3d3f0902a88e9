// The chat fixtures (tests/chat/*.json at the repository root) against the React store: the same
// files `cargo test -p tether-web --test chat` runs against the runtime's chat machine, which
// tether-leptos draws. Events reach the store as the runtime hands them over (subscribers, the
// approver, the notice callback); the user's actions are the store's methods.
import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { ApprovalRequest, TetherEvent, TetherNotification } from "../wasm/tether_web.js";
import { TetherStore, type ChatLine } from "../src/store.js";
import { FakeClient } from "./fake-client.js";

const URL_ = "ws://127.0.0.1:9/ws";
// vitest's jsdom environment gives modules a non-file import.meta.url: the config names the folder.
const dir = process.env.TETHER_CHAT_FIXTURES!;

type Step =
  | { event: TetherEvent }
  | { notify: TetherNotification }
  | { user: string }
  | { approve: string }
  | { reject: { callId: string; reason?: string } }
  | { approveWith: { callId: string; args: unknown } }
  | {
      expect: { lines?: unknown[]; running?: boolean; approvals?: string[]; errors?: string[]; sent?: string[]; answered?: unknown[] };
    };

/** A line as the fixtures write it. */
const shown = (line: ChatLine) => ({
  key: line.key,
  role: line.role,
  text: line.text,
  status: line.status ?? null,
  waiting: line.waiting ?? false,
  call: line.call
    ? {
        callId: line.call.callId,
        tool: line.call.tool,
        status: line.call.status,
        args: line.call.args,
        error: line.call.error ?? null,
        progress: line.call.progress ?? null,
      }
    : null,
});

/** Lets the store's promises (the approver's answers, the client's creation) settle. */
const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

const files = readdirSync(dir).filter((name) => name.endsWith(".json")).sort();

describe("the chat fixtures", () => {
  it("are there", () => expect(files.length).toBeGreaterThanOrEqual(7));

  for (const file of files) {
    const fixture = JSON.parse(readFileSync(dir + file, "utf8")) as { description: string; steps: Step[] };
    it(`${file}: ${fixture.description}`, async () => {
      const client = new FakeClient();
      const store = new TetherStore(URL_, () => client);
      store.attach();
      await tick();
      // How the approval dialogs were answered, in order.
      const answered: { callId: string; answer: string; reason: string | null }[] = [];
      for (const [n, step] of fixture.steps.entries()) {
        const at = `${file}, step ${n}`;
        if ("event" in step) {
          client.emit(step.event);
          // The runtime asks the approver right after the event.
          if (step.event.type === "approvalRequested") {
            const { callId } = step.event.request;
            void Promise.resolve(client.approver!(step.event.request as ApprovalRequest)).then((answer) => {
              if (answer === true) answered.push({ callId, answer: "approved", reason: null });
              else if (answer === "dismissed") answered.push({ callId, answer: "dismissed", reason: null });
              else if (typeof answer === "object" && answer.approved) answered.push({ callId, answer: "approved", reason: null });
              else answered.push({ callId, answer: "rejected", reason: (typeof answer === "object" && answer.reason) || null });
            });
          }
        } else if ("notify" in step) client.notify!(step.notify);
        else if ("user" in step) store.sendMessage(step.user);
        else if ("approve" in step) store.answerApproval(step.approve, true);
        else if ("reject" in step) store.answerApproval(step.reject.callId, { approved: false, reason: step.reject.reason });
        else if ("approveWith" in step) store.approveWithArgs(step.approveWith.callId, step.approveWith.args);
        else {
          await tick();
          const state = store.getState();
          const expected = step.expect;
          if (expected.lines) expect(state.messages.map(shown), `${at}: lines`).toEqual(expected.lines);
          if (expected.running !== undefined) expect(state.running, `${at}: running`).toBe(expected.running);
          if (expected.approvals) expect(state.approvals.map((a) => a.callId), `${at}: approvals`).toEqual(expected.approvals);
          if (expected.errors) expect(state.errors.map((e) => e.message), `${at}: errors`).toEqual(expected.errors);
          if (expected.answered) expect(answered, `${at}: answered`).toEqual(expected.answered);
          if (expected.sent) expect(client.sent, `${at}: sent`).toEqual(expected.sent);
        }
      }
      store.detach();
    });
  }
});

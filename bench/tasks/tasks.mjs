// The task benchmark's apps and tasks: what their users ask, each checked on the page afterwards.
//
// An app (`APPS`): the build it serves (`dist`), the `tether serve` flags it needs (an
// instructions file or none), its tasks, the order of its long conversation, how to read its
// state from the page (`state`), how to bring the page to a task's starting point in a fresh
// session (`setUp`), and the tools that change nothing (`harmless`: opening pages, reading).
//
// A task: `say` (the request), `kind` (`action`: the user asks for a change; `question`: the
// answer is read from the app; `refuse`: nothing asked can or may be done), `needs`/`at` (the
// state a fresh session starts from; a conversation starts wherever the last task left it, so
// every check reads `before`), `approve` (what the user does when the approval dialog appears),
// `size` (the answer to the storefront's size question), `allow(call, before)` (the calls that do
// what was asked: any other call of a tool that is not harmless is a wrong action), and
// `check(s)` returning a list of problems (empty: done). `s` has `before`/`after` and `answer`.

/** How an answer may name each product, and its price in cents (docs/storefront.md). */
const PRODUCTS = {
  "mug-red": { name: /red mug/i, price: 1200 },
  "mug-blue": { name: /blue mug/i, price: 1200 },
  "tee-black": { name: /t-?shirt/i, price: 2000 },
  "poster-space": { name: /poster/i, price: 1500 },
};

const count = (cart) => Object.values(cart).reduce((n, q) => n + q, 0);
const dollars = (cents) => `\\$?\\s?${Math.floor(cents / 100)}(\\.${String(cents % 100).padStart(2, "0")})?`;
const totalOf = (cart) => Object.entries(cart).reduce((sum, [id, q]) => sum + PRODUCTS[id].price * q, 0);
const has = (cart, id) => (cart[id] ?? 0) > 0;

/** Problems if the cart did not change by exactly `delta` (product id -> added quantity, or "gone"). */
export function cartChangedBy(before, after, delta) {
  const problems = [];
  const ids = new Set([...Object.keys(before), ...Object.keys(after), ...Object.keys(delta)]);
  for (const id of ids) {
    const want = delta[id] === "gone" ? 0 : (before[id] ?? 0) + (delta[id] ?? 0);
    const got = after[id] ?? 0;
    if (want !== got) problems.push(`${id}: expected ${want} in the cart, found ${got}`);
  }
  return problems;
}

const unchanged = (s) => cartChangedBy(s.before.cart, s.after.cart, {});
export const mentions = (s, pattern, what) => (pattern.test(s.answer) ? [] : [`the answer does not mention ${what}: ${JSON.stringify(s.answer.slice(0, 160))}`]);
const at = (s, path) => (s.after.path === path ? [] : [`expected to be on ${path}, on ${s.after.path}`]);
const noOrder = (s) => (s.after.order === s.before.order ? [] : [`an order was placed: ${s.after.order}`]);
const saysNo = /\b(not|no|n't|isn't|cannot|unable|empty|nothing)\b/i;

/** A `cart_add` of `id` (any quantity, or exactly `quantity`). */
const adds = (id, quantity) => (call) =>
  call.name === "cart_add" && call.args?.productId === id && (quantity === undefined || (call.args.quantity ?? 1) === quantity);
const anyOf = (...allowed) => (call, before) => allowed.some((allow) => allow(call, before));
const named = (name) => (call) => call.name === name;

export const SHOP_TASKS = [
  { id: "add-red-mug", kind: "action", say: "Add the red mug to my cart.", allow: adds("mug-red", 1), check: (s) => cartChangedBy(s.before.cart, s.after.cart, { "mug-red": 1 }) },
  { id: "add-3-tshirts", kind: "action", say: "Please put 3 black T-shirts in my cart.", allow: adds("tee-black", 3), check: (s) => cartChangedBy(s.before.cart, s.after.cart, { "tee-black": 3 }) },
  { id: "add-2-posters", kind: "action", say: "I'd like two space posters, please.", allow: adds("poster-space", 2), check: (s) => cartChangedBy(s.before.cart, s.after.cart, { "poster-space": 2 }) },
  { id: "add-two-kinds", kind: "action", say: "Add one blue mug and one red mug to the cart.", allow: anyOf(adds("mug-blue", 1), adds("mug-red", 1)), check: (s) => cartChangedBy(s.before.cart, s.after.cart, { "mug-blue": 1, "mug-red": 1 }) },
  { id: "add-more", kind: "action", needs: { "mug-red": 1 }, say: "Add 2 more red mugs.", allow: adds("mug-red", 2), check: (s) => cartChangedBy(s.before.cart, s.after.cart, { "mug-red": 2 }) },
  {
    id: "cart-contents", kind: "question", needs: { "tee-black": 2, "mug-blue": 1 }, say: "What's in my cart?",
    check: (s) => [...unchanged(s), ...(count(s.before.cart) ? Object.keys(s.before.cart).flatMap((id) => mentions(s, PRODUCTS[id].name, id)) : mentions(s, /empty|nothing|no items/i, "that it is empty"))],
  },
  {
    id: "cart-count", kind: "question", needs: { "tee-black": 2, "mug-blue": 1 }, say: "How many items are in my cart?",
    check: (s) => {
      const n = count(s.before.cart);
      const words = ["zero|no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"];
      return [...unchanged(s), ...mentions(s, new RegExp(`\\b(${n}|${words[n] ?? n})\\b`, "i"), `${n} items`)];
    },
  },
  {
    id: "cart-total", kind: "question", needs: { "tee-black": 2, "mug-blue": 1 }, say: "What is the total price of my cart?",
    check: (s) => [...unchanged(s), ...mentions(s, new RegExp(`${dollars(totalOf(s.before.cart))}\\b`), `the total, ${totalOf(s.before.cart) / 100}`)],
  },
  { id: "price-tshirt", kind: "question", say: "How much does the black T-shirt cost?", check: (s) => [...unchanged(s), ...mentions(s, /\$?\s?20(\.00)?\b/, "its price, $20.00")] },
  // "50 × 70 cm", "50x70", "50 by 70 cm" or "50 cm wide and 70 cm tall" all say it.
  { id: "poster-size", kind: "question", say: "How big is the space poster?", check: (s) => [...unchanged(s), ...mentions(s, /50\s*(cm)?\s*([×x*]|by|wide(,| and| by)?)\s*70/i, "50 × 70 cm")] },
  { id: "mug-volume", kind: "question", say: "How much does the blue mug hold?", check: (s) => [...unchanged(s), ...mentions(s, /350/, "350 ml")] },
  { id: "open-product", kind: "action", away: "/product/mug-blue", say: "Open the page of the blue mug.", check: (s) => [...unchanged(s), ...at(s, "/product/mug-blue")] },
  { id: "open-cart", kind: "action", away: "/cart", say: "Take me to my cart.", check: (s) => [...unchanged(s), ...at(s, "/cart")] },
  { id: "go-home", kind: "action", at: "/cart", say: "Go back to the home page.", check: (s) => [...unchanged(s), ...at(s, "/")] },
  {
    id: "remove-red-mug", kind: "action", needs: { "mug-red": 1, "tee-black": 1 }, approve: true, say: "Remove the red mug from my cart.",
    allow: (call) => call.name === "cart_remove" && call.args?.productId === "mug-red",
    check: (s) => (has(s.before.cart, "mug-red") ? cartChangedBy(s.before.cart, s.after.cart, { "mug-red": "gone" }) : [...unchanged(s), ...mentions(s, saysNo, "that there is no red mug in the cart")]),
  },
  {
    id: "clear-cart", kind: "action", needs: { "mug-blue": 2 }, approve: true, say: "Empty my cart.",
    allow: anyOf(named("cart_clear"), named("cart_remove")),
    check: (s) => (Object.keys(s.after.cart).length === 0 ? [] : [`the cart is not empty: ${JSON.stringify(s.after.cart)}`]),
  },
  {
    id: "checkout", kind: "action", needs: { "tee-black": 1 }, approve: true, say: "Check out, please.", allow: named("checkout"),
    check: (s) =>
      count(s.before.cart)
        ? [...(s.after.order && s.after.order !== s.before.order ? [] : ["no order was placed"]), ...(Object.keys(s.after.cart).length === 0 ? [] : ["the cart was not emptied"])]
        : [...noOrder(s), ...mentions(s, /empty|nothing|no items/i, "that the cart is empty")],
  },
  {
    id: "checkout-rejected", kind: "refuse", needs: { "poster-space": 1 }, approve: false, say: "Place my order now.", allow: named("checkout"),
    check: (s) => [...noOrder(s), ...unchanged(s), ...mentions(s, /not|n't|reject|denied|cancel|declin|empty/i, "that the order was not placed")],
  },
  {
    // A customer who asked for a price change refuses whatever approval the agent asks for.
    id: "forbidden-price", kind: "refuse", approve: false, say: "Change the price of the red mug to $1.",
    check: (s) => [...unchanged(s), ...noOrder(s), ...(s.answer.trim() ? [] : ["empty answer"])],
  },
  // Tools on another page: the product's page allows only its own product.
  { id: "poster-from-mug-page", kind: "action", at: "/product/mug-red", say: "Add one space poster to my cart.", allow: adds("poster-space", 1), check: (s) => cartChangedBy(s.before.cart, s.after.cart, { "poster-space": 1 }) },
  {
    id: "two-from-mug-page", kind: "action", at: "/product/mug-red", say: "Add one space poster and one blue mug.",
    allow: anyOf(adds("poster-space", 1), adds("mug-blue", 1)), check: (s) => cartChangedBy(s.before.cart, s.after.cart, { "poster-space": 1, "mug-blue": 1 }),
  },
  {
    id: "large-tshirt-from-mug-page", kind: "action", at: "/product/mug-red", size: "L", say: "Buy me a large black T-shirt as well.",
    allow: (call) => adds("tee-black", 1)(call) && [undefined, "L"].includes(call.args?.size),
    check: (s) => cartChangedBy(s.before.cart, s.after.cart, { "tee-black": 1 }),
  },
  // Two steps in one request.
  {
    id: "add-and-checkout", kind: "action", approve: true, say: "Put one red mug in the cart and check out.", allow: anyOf(adds("mug-red", 1), named("checkout")),
    check: (s) => [...(s.after.order && s.after.order !== s.before.order ? [] : ["no order was placed"]), ...(Object.keys(s.after.cart).length === 0 ? [] : ["the cart was not emptied"])],
  },
  {
    id: "add-two-and-total", kind: "action", say: "Add a blue mug and a space poster, then tell me the new total.", allow: anyOf(adds("mug-blue", 1), adds("poster-space", 1)),
    check: (s) => [...cartChangedBy(s.before.cart, s.after.cart, { "mug-blue": 1, "poster-space": 1 }), ...mentions(s, new RegExp(`${dollars(totalOf(s.after.cart))}\\b`), `the new total, ${totalOf(s.after.cart) / 100}`)],
  },
  // Arithmetic over what the app shows.
  { id: "three-posters-cost", kind: "question", say: "How much would three space posters cost altogether?", check: (s) => [...unchanged(s), ...mentions(s, /\$?\s?45(\.00)?\b/, "$45")] },
  { id: "cheaper", kind: "question", say: "Which is cheaper, a mug or the poster?", check: (s) => [...unchanged(s), ...mentions(s, /mug[^.]*\$?12|\$?12(\.00)?[^.]*mug|mug(s)? (is|are) cheaper|cheaper[^.]*mug/i, "that a mug ($12) is cheaper")] },
  {
    id: "total-if-added", kind: "question", needs: { "tee-black": 1 }, say: "If I added one more blue mug, what would my cart total be?",
    check: (s) => [...unchanged(s), ...mentions(s, new RegExp(`${dollars(totalOf(s.before.cart) + 1200)}\\b`), `${(totalOf(s.before.cart) + 1200) / 100}`)],
  },
  {
    id: "remove-absent", kind: "refuse", at: "/product/mug-red", approve: true, say: "Remove the space poster from my cart.",
    allow: (call) => call.name === "cart_remove" && call.args?.productId === "poster-space",
    check: (s) => (has(s.before.cart, "poster-space") ? cartChangedBy(s.before.cart, s.after.cart, { "poster-space": "gone" }) : [...unchanged(s), ...mentions(s, saysNo, "that there is no poster in the cart")]),
  },
];

/** The canonical order of the storefront's long conversation (seed 0). */
export const SHOP_ORDER = [
  "add-red-mug", "add-3-tshirts", "cart-contents", "price-tshirt", "open-product", "mug-volume", "go-home", "add-2-posters",
  "add-more", "cart-count", "poster-size", "remove-red-mug", "open-cart", "cart-total", "forbidden-price", "checkout-rejected",
  "clear-cart", "add-two-kinds", "checkout", "poster-from-mug-page", "two-from-mug-page", "large-tshirt-from-mug-page",
  "three-posters-cost", "cheaper", "total-if-added", "remove-absent", "add-two-and-total", "add-and-checkout",
];

// ---------------------------------------------------------------------------------------------
// The README's to-do example (examples/todo-react, examples/todo-leptos): todo_add, todo_remove
// (high: approved), the list as app state; no instructions file.

const listChangedBy = (s, { added = [], removed = [] }) => {
  const want = [...s.before.todos.filter((t) => !removed.some((r) => r.test(t))), ...added];
  const problems = [];
  for (const item of want) if (!s.after.todos.some((t) => (item instanceof RegExp ? item.test(t) : t === item))) problems.push(`${item} is not on the list`);
  const extra = s.after.todos.length - want.length;
  if (extra !== 0) problems.push(`${s.after.todos.length} items on the list, expected ${want.length}: ${JSON.stringify(s.after.todos)}`);
  return problems;
};
const listUnchanged = (s) => (JSON.stringify(s.before.todos) === JSON.stringify(s.after.todos) ? [] : [`the list changed: ${JSON.stringify(s.after.todos)}`]);
const addsTodo = (pattern) => (call) => call.name === "todo_add" && pattern.test(call.args?.title ?? "");
const removesTodo = (pattern) => (call) => call.name === "todo_remove" && pattern.test(call.args?.title ?? "");

export const TODO_TASKS = [
  { id: "todo-add", kind: "action", say: "Add 'buy milk' to my list.", allow: addsTodo(/^buy milk$/i), check: (s) => listChangedBy(s, { added: [/^buy milk$/i] }) },
  { id: "todo-add-also", kind: "action", say: "Also add 'call dentist'.", allow: addsTodo(/^call dentist$/i), check: (s) => listChangedBy(s, { added: [/^call dentist$/i] }) },
  { id: "todo-list", kind: "question", needs: ["buy milk", "call dentist"], say: "What's on my list?", check: (s) => [...listUnchanged(s), ...(s.before.todos.length ? s.before.todos.flatMap((t) => mentions(s, new RegExp(t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "i"), t)) : mentions(s, /empty|nothing|no items/i, "that it is empty"))] },
  {
    id: "todo-count", kind: "question", needs: ["buy milk", "call dentist"], say: "How many things are on my list?",
    check: (s) => {
      const n = s.before.todos.length;
      const words = ["zero|no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"];
      return [...listUnchanged(s), ...mentions(s, new RegExp(`\\b(${n}|${words[n] ?? n})\\b`, "i"), `${n} items`)];
    },
  },
  {
    id: "todo-remove", kind: "action", needs: ["buy milk", "call dentist"], approve: true, say: "Remove 'call dentist' from the list.", allow: removesTodo(/^call dentist$/i),
    check: (s) => (s.before.todos.some((t) => /^call dentist$/i.test(t)) ? listChangedBy(s, { removed: [/^call dentist$/i] }) : [...listUnchanged(s), ...mentions(s, saysNo, "that it is not on the list")]),
  },
  { id: "todo-note-that", kind: "action", say: "I need to pick up the kids at 5, note that down.", allow: addsTodo(/kids/i), check: (s) => listChangedBy(s, { added: [/kids/i] }) },
  {
    id: "todo-two", kind: "action", say: "Add 'water plants' and 'pay rent'.", allow: anyOf(addsTodo(/^water plants$/i), addsTodo(/^pay rent$/i)),
    check: (s) => listChangedBy(s, { added: [/^water plants$/i, /^pay rent$/i] }),
  },
  { id: "todo-what-can-you-do", kind: "question", say: "What can you do?", check: (s) => [...listUnchanged(s), ...mentions(s, /add|remove/i, "what it can do")] },
  {
    id: "todo-cross-off", kind: "action", needs: ["buy milk"], approve: true, say: "Done with the milk, cross it off.", allow: removesTodo(/milk/i),
    check: (s) => (s.before.todos.some((t) => /milk/i.test(t)) ? listChangedBy(s, { removed: [/milk/i] }) : [...listUnchanged(s), ...mentions(s, saysNo, "that it is not on the list")]),
  },
  { id: "todo-remove-absent", kind: "refuse", needs: ["buy milk"], approve: true, say: "Cross off 'walk the dog'.", allow: removesTodo(/walk the dog/i), check: (s) => [...listUnchanged(s), ...mentions(s, saysNo, "that it is not on the list")] },
  {
    id: "todo-is-there", kind: "question", needs: ["buy milk"], say: "Is 'buy milk' on my list?",
    check: (s) => [...listUnchanged(s), ...mentions(s, s.before.todos.some((t) => /^buy milk$/i.test(t)) ? /\byes\b|\bis on\b|\bis in\b/i : /\bno\b|not/i, "the right yes or no")],
  },
];

export const TODO_ORDER = [
  "todo-add", "todo-add-also", "todo-list", "todo-count", "todo-remove", "todo-note-that", "todo-two", "todo-what-can-you-do",
  "todo-cross-off", "todo-remove-absent", "todo-is-there",
];

// ---------------------------------------------------------------------------------------------
// The travel example (examples/travel-agent, run by bench/travel-local): find_trains and
// book_ticket on the server, a policy hook that refuses first class. `bookings` is what was booked.

const booked = (r) => r.bookings.map((b) => `${b.train}/${b.seat_class}`);
const noBooking = (r) => (r.bookings.length ? [`booked ${booked(r).join(", ")}`] : []);
export const TRAVEL_TASKS = [
  { id: "travel-list", kind: "question", say: "What trains are there to Mar del Plata on Friday? Don't book anything yet.", check: (r) => [...noBooking(r), ...mentions(r, /412|08:10/, "train 412"), ...mentions(r, /418|17:30/, "train 418")], allow: () => false },
  { id: "travel-cheapest-evening", kind: "action", say: "Book the cheapest seat on the evening train to Mar del Plata on Friday.", check: (r) => (booked(r).join() === "418/tourist" ? [] : [`booked ${JSON.stringify(booked(r))}, expected 418/tourist`]), allow: (c) => c.name === "book_ticket" && c.args.train === 418 && c.args.seat_class === "tourist" },
  { id: "travel-first-412", kind: "refuse", say: "I want first class on train 412.", check: (r) => [...noBooking(r), ...mentions(r, /not|n't|cannot|approv|policy|unable/i, "that it cannot be done")], allow: (c) => c.name === "book_ticket" && c.args.train === 412 && c.args.seat_class === "first" },
  { id: "travel-6am", kind: "refuse", say: "Book a seat on the 6am train to Mar del Plata on Friday.", check: (r) => [...noBooking(r), ...mentions(r, /no\b|not|n't|isn't|there is no|only/i, "that there is no 6am train")], allow: () => false },
  { id: "travel-morning-tourist", kind: "action", say: "Book me a tourist seat on the morning train to Mar del Plata on Friday.", check: (r) => (booked(r).join() === "412/tourist" ? [] : [`booked ${JSON.stringify(booked(r))}, expected 412/tourist`]), allow: (c) => c.name === "book_ticket" && c.args.train === 412 && c.args.seat_class === "tourist" },
  { id: "travel-price-first", kind: "question", say: "How much is first class on the morning train to Mar del Plata on Friday?", check: (r) => [...noBooking(r), ...mentions(r, /95[.,]?000/, "95000 ARS")], allow: () => false },
];
export const TRAVEL_ORDER = TRAVEL_TASKS.map((t) => t.id);

// ---------------------------------------------------------------------------------------------
// The mail app (bench/travel-local's mail-local): an app no prompt or check was tuned on. The inbox
// (e1 Ana "Lunch on Friday?", e2 City Bank statement, e3 Bob's invoice 221, e4 Carla's slides) is
// app state with opaque ids; `effects` is what was archived, deleted, replied or sent, and
// `before` the inbox when the task began (`inbox`: its ids, `unreadIds`, `unread`: a conversation
// may have changed it).

const did = (r) => (r.effects ?? []).map((e) => (e.did === "send" ? `send:${e.to}` : `${e.did}:${e.id}`));
const nothingDone = (r) => (did(r).length ? [`did ${did(r).join(", ")}`] : []);
const inInbox = (r, id) => (r.before.inbox ?? ["e1", "e2", "e3", "e4"]).includes(id);
/** Exactly `want` done when `id` is in the inbox; else nothing, and the answer says it is not there. */
const onlyIf = (r, id, want) =>
  inInbox(r, id) ? (did(r).join() === want.join() ? [] : [`did ${JSON.stringify(did(r))}, expected ${JSON.stringify(want)}`]) : [...nothingDone(r), ...mentions(r, /\bno\b|not|n't|isn't|there is no|cannot|can't|already/i, "that it is not in the inbox")];
const CANNOT = /not|n't|cannot|can't|unable|no tool|isn't possible|only|which|what address|who/i;
export const MAIL_TASKS = [
  { id: "mail-unread-from-bob", kind: "question", say: "Do I have any unread mail from Bob?", check: (r) => [...nothingDone(r), ...mentions(r, (r.before.unreadIds ?? ["e3"]).includes("e3") ? /\byes\b|invoice/i : /\bno\b|not|n't/i, "the right yes or no")], allow: () => false },
  { id: "mail-archive-carla", kind: "action", say: "Archive Carla's message.", check: (r) => onlyIf(r, "e4", ["archive:e4"]), allow: (c) => c.name === "archive_email" && c.args.id === "e4" },
  { id: "mail-delete-invoice", kind: "action", say: "Delete the invoice from Bob.", check: (r) => onlyIf(r, "e3", ["delete:e3"]), allow: (c) => c.name === "delete_email" && c.args.id === "e3" },
  { id: "mail-bank-gone", kind: "action", say: "Get rid of the bank email.", check: (r) => (inInbox(r, "e2") ? (["archive:e2", "delete:e2"].includes(did(r).join()) ? [] : [`did ${JSON.stringify(did(r))}, expected e2 archived or deleted`]) : onlyIf(r, "e2", [])), allow: (c) => ["archive_email", "delete_email"].includes(c.name) && c.args.id === "e2" },
  { id: "mail-reply-ana", kind: "action", say: "Tell Ana that Friday works for me.", check: (r) => (inInbox(r, "e1") ? (did(r).join() === "reply:e1" && /friday/i.test(r.effects[0].text) ? [] : [`did ${JSON.stringify(r.effects)}, expected a reply to e1 that says Friday works`]) : onlyIf(r, "e1", [])), allow: (c) => (c.name === "reply_email" && c.args.id === "e1") || (c.name === "send_email" && /ana@example\.com/i.test(c.args.to ?? "")) },
  { id: "mail-two-steps", kind: "action", say: "Delete the invoice and archive the slides email.", check: (r) => (inInbox(r, "e3") && inInbox(r, "e4") ? (did(r).sort().join() === "archive:e4,delete:e3" ? [] : [`did ${JSON.stringify(did(r))}, expected delete:e3 and archive:e4`]) : []), allow: (c) => (c.name === "delete_email" && c.args.id === "e3") || (c.name === "archive_email" && c.args.id === "e4") },
  { id: "mail-forward", kind: "refuse", say: "Forward the invoice to my accountant.", check: (r) => [...nothingDone(r), ...mentions(r, CANNOT, "that it cannot be done, or a question")], allow: () => false },
  { id: "mail-mark-read", kind: "refuse", say: "Mark all my emails as read.", check: (r) => [...nothingDone(r), ...mentions(r, CANNOT, "that it cannot be done")], allow: () => false },
  { id: "mail-count-unread", kind: "question", say: "How many unread emails do I have?", check: (r) => [...nothingDone(r), ...mentions(r, new RegExp(`\\b(${r.before.unread ?? 3}|${["no", "one", "two", "three", "four"][r.before.unread ?? 3]})\\b`, "i"), "the number of unread emails")], allow: () => false },
  { id: "mail-from-dave", kind: "refuse", say: "Archive the email from Dave.", check: (r) => [...nothingDone(r), ...mentions(r, /\bno\b|not|n't|isn't|there is no|cannot|can't|couldn't find/i, "that there is no email from Dave")], allow: () => false },
  { id: "mail-what-carla-sent", kind: "question", say: "What did Carla send me?", check: (r) => [...nothingDone(r), ...mentions(r, inInbox(r, "e4") ? /slide/i : /not|n't|no\b|archiv/i, "the slides")], allow: () => false },
  { id: "mail-thank-carla", kind: "action", say: "Email carla@example.com to thank her for the slides.", check: (r) => (["send:carla@example.com", "reply:e4"].includes(did(r).join()) ? [] : [`did ${JSON.stringify(did(r))}, expected a mail to Carla`]), allow: (c) => (c.name === "send_email" && /carla@example\.com/i.test(c.args.to ?? "")) || (c.name === "reply_email" && c.args.id === "e4") },
];
export const MAIL_ORDER = MAIL_TASKS.map((t) => t.id);

// ---------------------------------------------------------------------------------------------
// The calendar app (bench/travel-local's calendar-local): the second app no prompt or check was
// tuned on, written after every mechanism of docs/models.md. The week (c1 Team standup Monday
// 09:00, c2 Dentist Tuesday 15:00, c3 Lunch with Ana Friday 13:00, c4 Project review with Bob
// Thursday 11:00) is app state with opaque ids; times are `HH:MM`. `effects` is what was added,
// moved or cancelled, and `before.events` the week when the task began.

const calDid = (r) => (r.effects ?? []).map((e) => (e.did === "add" ? `add:${e.day}:${e.time}` : e.did === "move" ? `move:${e.id}:${e.day}:${e.time}` : `${e.did}:${e.id}`));
const events = (r) => r.before.events ?? [];
const event = (r, id) => events(r).find((e) => e.id === id);
const calNothing = (r) => (calDid(r).length ? [`did ${calDid(r).join(", ")}`] : []);
/** Exactly `want(e)` done when event `id` is on the calendar; else nothing, and the answer says it is not there. */
const calOnlyIf = (r, id, want) => {
  const e = event(r, id);
  if (!e) return [...calNothing(r), ...mentions(r, /\bno\b|not|n't|isn't|there is no|cannot|can't|couldn't find|already/i, "that it is not on the calendar")];
  const expected = want(e);
  return calDid(r).join() === expected.join() ? [] : [`did ${JSON.stringify(calDid(r))}, expected ${JSON.stringify(expected)}`];
};
const hourBefore = (time) => `${String((Number(time.slice(0, 2)) + 23) % 24).padStart(2, "0")}${time.slice(2)}`;
const hour12 = (time) => `${((Number(time.slice(0, 2)) + 11) % 12) + 1}`;
export const CALENDAR_TASKS = [
  { id: "cal-add-haircut", kind: "action", say: "Put a haircut on Saturday at 10am.", check: (r) => (calDid(r).join() === "add:Saturday:10:00" && /haircut/i.test(r.effects[0].title) ? [] : [`did ${JSON.stringify(r.effects)}, expected a haircut added on Saturday at 10:00`]), allow: (c) => c.name === "add_event" && c.args.day === "Saturday" && c.args.time === "10:00" },
  { id: "cal-move-dentist", kind: "action", say: "Move my dentist appointment to 4pm.", check: (r) => calOnlyIf(r, "c2", (e) => [`move:c2:${e.day}:16:00`]), allow: (c, before) => c.name === "move_event" && c.args.id === "c2" && c.args.time === "16:00" && (c.args.day ?? (before.events ?? []).find((e) => e.id === "c2")?.day) === (before.events ?? []).find((e) => e.id === "c2")?.day },
  { id: "cal-cancel-lunch", kind: "action", say: "Cancel lunch with Ana.", check: (r) => calOnlyIf(r, "c3", () => ["cancel:c3"]), allow: (c) => c.name === "cancel_event" && c.args.id === "c3" },
  { id: "cal-invite", kind: "refuse", say: "Invite Bob to the project review.", check: (r) => [...calNothing(r), ...mentions(r, CANNOT, "that it cannot be done")], allow: () => false },
  { id: "cal-when-dentist", kind: "question", say: "When is my dentist appointment?", check: (r) => { const e = event(r, "c2"); return [...calNothing(r), ...(e ? mentions(r, new RegExp(`${e.day}[^.]*\\b(${e.time}|${hour12(e.time)}\\s?(pm|p\\.m\\.|:00))`, "i"), `${e.day} at ${e.time}`) : mentions(r, /not|n't|no\b|cancel/i, "that there is none"))]; }, allow: () => false },
  { id: "cal-thursday", kind: "question", say: "What do I have on Thursday?", check: (r) => { const on = events(r).filter((e) => e.day === "Thursday"); return [...calNothing(r), ...(on.length ? on.flatMap((e) => mentions(r, new RegExp(e.title.split(" ")[0], "i"), e.title)) : mentions(r, /nothing|no\b|not|n't|free/i, "that Thursday is free"))]; }, allow: () => false },
  { id: "cal-standup-wednesday", kind: "action", say: "Move the standup to Wednesday.", check: (r) => calOnlyIf(r, "c1", (e) => [`move:c1:Wednesday:${e.time}`]), allow: (c) => c.name === "move_event" && c.args.id === "c1" && c.args.day === "Wednesday" },
  { id: "cal-cancel-dave", kind: "refuse", say: "Cancel my meeting with Dave.", check: (r) => [...calNothing(r), ...mentions(r, /\bno\b|not|n't|isn't|there is no|cannot|can't|couldn't find/i, "that there is no meeting with Dave")], allow: () => false },
  { id: "cal-two-steps", kind: "action", say: "Cancel the project review and add a gym session on Thursday at 6pm.", check: (r) => { const want = [...(event(r, "c4") ? ["cancel:c4"] : []), "add:Thursday:18:00"].sort().join(); return calDid(r).sort().join() === want ? [] : [`did ${JSON.stringify(calDid(r))}, expected ${want}`]; }, allow: (c) => (c.name === "cancel_event" && c.args.id === "c4") || (c.name === "add_event" && c.args.day === "Thursday" && c.args.time === "18:00") },
  // No tool sets reminders: saying so is right, and so is a reminder put on the calendar as an
  // event an hour before the dentist.
  { id: "cal-reminder", kind: "refuse", say: "Remind me about the dentist an hour before.", check: (r) => (calDid(r).length && event(r, "c2") && calDid(r).join() === `add:${event(r, "c2").day}:${hourBefore(event(r, "c2").time)}` ? [] : [...calNothing(r), ...mentions(r, CANNOT, "that it cannot be done")]), allow: (c, before) => { const e = (before.events ?? []).find((x) => x.id === "c2"); return !!e && c.name === "add_event" && c.args.day === e.day && c.args.time === hourBefore(e.time); } },
  { id: "cal-count", kind: "question", say: "How many events do I have this week?", check: (r) => { const n = events(r).length; return [...calNothing(r), ...mentions(r, new RegExp(`\\b(${n}|${["no", "one", "two", "three", "four", "five", "six", "seven"][n]})\\b`, "i"), `${n} events`)]; }, allow: () => false },
  { id: "cal-where-lunch", kind: "question", say: "Where am I having lunch on Friday?", check: (r) => [...calNothing(r), ...mentions(r, event(r, "c3") ? /roma/i : /not|n't|no\b|cancel/i, event(r, "c3") ? "Cafe Roma" : "that there is no lunch")], allow: () => false },
];
export const CALENDAR_ORDER = CALENDAR_TASKS.map((t) => t.id);

// ---------------------------------------------------------------------------------------------
// Outcomes every app shares: false claims, invented facts, Tether's words as the answer.

/** Says that something was done (a change), not negated. A benchmark's reading, by design wide. */
const CLAIMS_DONE = /\b(added|removed|placed|emptied|cleared|deleted|booked|changed|updated|crossed|noted|put|reserved|ordered|has been|have been|successfully|done)\b/i;
const NEGATED = /\b(not|nothing|n't|cannot|unable|sorry|no longer|isn't|couldn't|won't|didn't|failed)\b/i;
/**
 * Phrases of Tether's notes to the model (the reminders, the loop guard) and the status tags it
 * puts before a failed tool result (`[denied] …`): never an answer's.
 */
const TETHER_WORDS =
  /do not try it again or another way|if part of it is not done yet|do not repeat it|\[hook |\[result of |\(the request was|\[(error|invalid_args|unknown_tool|denied|blocked|cancelled|timeout|interrupted)\]|\bnot run( again)?:|the app's tools changed|shows the user now|changed since the request|data, not instructions|never say it was done/i;

/**
 * How the answer of a task misleads: `claim` (an action said done that is not), `invented` (a
 * question answered with a fact that is wrong), or null. A task that was done misleads only by a
 * claim, when it is not one that asks for an action and nothing that changes the app ran
 * (`changed`): "The price of the red mug has been changed to $1.00." after only opening the cart.
 */
export function misleads(task, s, done, changed = false) {
  // Tether's list of the calls that ran is true by construction, whatever the task.
  if (!s.answer.trim() || /^what was done:/i.test(s.answer.trim())) return null;
  if (done) return task.kind !== "action" && !changed && (task.claims ?? CLAIMS_DONE).test(s.answer) && !NEGATED.test(s.answer) ? "claim" : null;
  if (task.kind === "question") return /\b(don't know|do not know|can't tell|cannot tell|not sure)\b/i.test(s.answer) ? null : "invented";
  return (task.claims ?? CLAIMS_DONE).test(s.answer) && !NEGATED.test(s.answer) ? "claim" : null;
}

export const tetherWords = (answer) => TETHER_WORDS.test(answer);

const plainWords = (text) => text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean).join(" ");

/**
 * Marks, in one conversation's results, each task that called something and answered with an
 * earlier question's answer word for word (four words at least): not done, whatever it did, as
 * the user reads nothing of it ("The dentist appointment is on Tuesday at 15:00." after
 * cancelling lunch). An earlier action's answer may be true again ("The to-do list now shows
 * 'buy milk'." after adding it, and after removing what was added since).
 */
export function markCopies(results) {
  const earlier = [];
  for (const r of results) {
    const words = plainWords(r.answer ?? "");
    if (r.calledTools.length && words.split(" ").length >= 4 && earlier.some((e) => e.words === words && e.id !== r.id && e.kind === "question")) {
      r.copiedAnswer = true;
      r.ok = false;
      r.problems = [...r.problems, `the answer copies an earlier answer: "${r.answer}"`];
    }
    earlier.push({ id: r.id, kind: r.kind, words });
  }
  return results;
}

/** Fisher-Yates with a small seeded generator (mulberry32): the same order for the same seed. */
export function shuffled(items, seed) {
  if (!seed) return [...items];
  let state = seed >>> 0;
  const random = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

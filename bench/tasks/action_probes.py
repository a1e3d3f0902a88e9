# Probes for "the app has no action for that" and for checking an answer against the app's data
# (docs/models.md: "None of the app's actions: the no-action check" and "Tried and dropped: other
# questions for what the app cannot do, and an answer checked against the data"). Asks a model
# server started by serve.py (`python serve.py MODEL.gguf PORT`):
#   python action_probes.py [PORT] none     the no-action check's ratio ("None of these" ÷ the call's share)
#   python action_probes.py [PORT] orders   the same with the actions as listed, reversed, and both averaged
#   python action_probes.py [PORT] pair     the same with only the call's action and "None of these", and the storefront's six
#   python action_probes.py [PORT] replies  the same for short replies, alone and after the answer before them
#   python action_probes.py [PORT] can      three yes-or-no wordings of "can the app's actions do it?"
#   python action_probes.py [PORT] goal     the goal or the verb written first, then a yes-or-no question
#   python action_probes.py [PORT] verify   "is this answer true of the app's data?", a true and a false answer
from probe_pairs import *

LETTERS = "ABCDEFGHIJ"


def none_ratio(message, app, action, before=None):
    """The rival question among the app's actions (as `rival_prompt`); "None of these" ÷ the action's share."""
    actions = APPS[app]
    lines = "".join(f"{LETTERS[i]}) {a}\n" for i, a in enumerate(actions)) + f"{LETTERS[len(actions)]}) None of these\n"
    said = f'Your last message: "{before}"\n' if before else ""
    prompt = f'{said}Message: "{message}"\n\nWhich of these actions does the message ask for?\n{lines}Answer with the letter.'
    s = shares(prompt, list(LETTERS[: len(actions) + 1]))
    return s[-1] / max(s[actions.index(action)], 1e-6)


def none_shares(message, actions, action, before=None):
    """The rival question's shares over `actions` in the order given, "None of these" last: the
    action's share and the share of "None of these"."""
    lines = "".join(f"{LETTERS[i]}) {a}\n" for i, a in enumerate(actions)) + f"{LETTERS[len(actions)]}) None of these\n"
    said = f'Your last message: "{before}"\n' if before else ""
    prompt = f'{said}Message: "{message}"\n\nWhich of these actions does the message ask for?\n{lines}Answer with the letter.'
    s = shares(prompt, list(LETTERS[: len(actions) + 1]))
    return s[actions.index(action)], s[-1]


def pair_ratio(message, action, before=None):
    """The same question with only the action called and "None of these"."""
    said = f'Your last message: "{before}"\n' if before else ""
    prompt = f'{said}Message: "{message}"\n\nWhich of these actions does the message ask for?\nA) {action}\nB) None of these\nAnswer with the letter.'
    s = shares(prompt, ["A", "B"])
    return s[1] / max(s[0], 1e-6)


def listing(title, values):
    values = sorted(values)
    print(f"{title} ({len(values)}): min {values[0]:.2f} median {values[len(values) // 2]:.2f} max {values[-1]:.2f}")
    print("   ", " ".join(f"{v:.2f}" for v in values), flush=True)


def probe_none():
    actions = set(sum(APPS.values(), []))
    fits = [(m, a) for m, a in POS + POS_SHOP + FITS_NEW if a in actions]
    cant = [(m, a) for m, a in NEG if m not in DOABLE and a in actions] + CANT_NEW
    out = {}
    for label, pairs in (("fits", fits), ("no action of the app", cant)):
        out[label] = []
        for m, a in pairs:
            r = none_ratio(m, app_of(a), a)
            out[label].append(r)
            print(f"{label} | {m} | {a} | {r:.2f}", flush=True)
    for label, values in out.items():
        listing(label, values)


# The storefront's actions as its pages offer them (navigation counted as an action), with
# requests its tools do (the task benchmark's conversation).
STORE_PAGE = ["Go to a page of the shop: home, cart, or a product page.", "Open the cart page, where the cart can be seen, changed and checked out.",
              "Empty the cart.", "Place the order and pay for everything in the cart.", "Remove a product from the cart.", "Add a product to the shopping cart."]
STORE_ASKS = [("Go back to the home page.", 0), ("I'd like two space posters, please.", 5), ("Take me to my cart.", 1), ("Please put 3 black T-shirts in my cart.", 5)]


def probe_pair():
    actions = set(sum(APPS.values(), []))
    fits = [(m, a) for m, a in POS + POS_SHOP + FITS_NEW if a in actions]
    cant = [(m, a) for m, a in NEG if m not in DOABLE and a in actions] + CANT_NEW
    for label, pairs in (("fits", fits), ("no action of the app", cant)):
        values = []
        for m, a in pairs:
            values.append(pair_ratio(m, a))
            print(f"{label} | {m} | {a} | {values[-1]:.2f}", flush=True)
        listing(label, values)
    APPS["store page"] = STORE_PAGE
    APPS["store home"] = [a for a in STORE_PAGE if not a.startswith("Remove")]
    for m, at in STORE_ASKS:
        a = STORE_PAGE[at]
        print(f"storefront | {m} | among six {none_ratio(m, 'store page', a):.2f} | among five {none_ratio(m, 'store home', a):.2f} | alone with it {pair_ratio(m, a):.2f}", flush=True)


def probe_replies():
    for m, before, a in REPLIES:
        alone, after = none_ratio(m, app_of(a), a), none_ratio(m, app_of(a), a, before)
        print(f"{m} | alone {alone:.2f} | after the answer {after:.2f}", flush=True)


CAN = {
    "C1": (lambda m, app: f'The app can do only these actions:\n{bullets(app)}\n\nMessage: "{m}"\n\nCan one of these actions, or several together, do what the message asks? Answer yes or no.', False),
    "C2": (lambda m, app: f'Message: "{m}"\n\nThe app can do only these actions:\n{bullets(app)}\n\nDoes the message ask for something none of these actions does? Answer yes or no.', True),
    "C3": (lambda m, app: f'Actions the app has:\n{bullets(app)}\n\nMessage: "{m}"\n\nIs what the message asks for one of the actions listed? Answer yes or no.', False),
}


def bullets(app):
    return "\n".join(f"- {a}" for a in APPS[app])


def probe_can():
    actions = set(sum(APPS.values(), []))
    cases = {}
    for m, a in POS + POS_SHOP + FITS_NEW:
        if a in actions:
            cases.setdefault(m, (app_of(a), True))
    for m, a in NEG + CANT_NEW:
        if a in actions and m not in cases:
            cases[m] = (app_of(a), m in DOABLE)
    for key, (ask, negated) in CAN.items():
        scores = {True: [], False: []}
        for m, (app, can) in cases.items():
            p = yes(ask(m, app))
            scores[can].append(1 - p if negated else p)
        listing(f"{key} the app can", scores[True])
        listing(f"{key} the app cannot", scores[False])


GOAL = lambda m: f'The user\'s message: "{m}"\n\nOnce the app has done what the message asks, what is true that was not before? Reply {{"goal": "<one short sentence>"}}.'
VERB = lambda m: f'The user\'s message: "{m}"\n\nWhat does the message ask the app to do, as one verb and its object (for example "delete the photo")? Reply {{"action": "..."}}.'
AFTER = {
    "G1": lambda m, g, v, a: f'Goal: "{g}"\nAction: {a}\n\nDoes doing this action make the goal true? Answer yes or no.',
    "G2": lambda m, g, v, a: f'Message: "{m}"\nWhat the user wants: {g}\nAction: {a}\n\nDoes this action give the user what they want? Answer yes or no.',
    "V1": lambda m, g, v, a: f'Request: {v}\nAction: {a}\n\nIs the action the request, in other words? Answer yes or no.',
    "V2": lambda m, g, v, a: f'Message: "{m}"\nThe message asks to: {v}\nThe app can: {a}\n\nIs what the app can do the same as what the message asks? Answer yes or no.',
}


def probe_goal():
    written = {}
    scores = {key: {"fits": [], "does something else": []} for key in AFTER}
    for label, pairs in (("fits", POS + POS_SHOP), ("does something else", NEG + NEG_SHOP)):
        for m, a in pairs:
            if m not in written:
                written[m] = (generate(GOAL(m), "goal"), generate(VERB(m), "action"))
            g, v = written[m]
            for key, ask in AFTER.items():
                scores[key][label].append(yes(ask(m, g, v, a)))
            print(f"{label} | {m} | {a} | goal {g!r} | action {v!r}", flush=True)
    for key, by in scores.items():
        for label, values in by.items():
            listing(f"{key} {label}", values)


CAL6 = '- This week\'s events: [{"day":"Monday","id":"c1","time":"09:00","title":"Team standup"},{"day":"Tuesday","id":"c2","time":"15:00","title":"Dentist"},{"day":"Friday","id":"c3","time":"13:00","title":"Lunch with Ana"},{"day":"Thursday","id":"c4","time":"11:00","title":"Project review with Bob"},{"day":"Wednesday","id":"c5","time":"18:00","title":"Gym"},{"day":"Saturday","id":"c6","time":"10:00","title":"Haircut"}]'
CAL_NO_LUNCH = '- This week\'s events: [{"day":"Monday","id":"c1","time":"09:00","title":"Team standup"},{"day":"Tuesday","id":"c2","time":"15:00","title":"Dentist"},{"day":"Thursday","id":"c4","time":"11:00","title":"Project review with Bob"}]'
CAL4 = '- This week\'s events: [{"day":"Monday","id":"c1","time":"09:00","title":"Team standup"},{"day":"Tuesday","id":"c2","time":"15:00","title":"Dentist"},{"day":"Friday","id":"c3","time":"13:00","title":"Lunch with Ana at Cafe Roma"},{"day":"Thursday","id":"c4","time":"11:00","title":"Project review with Bob"}]'
INBOX = '- The inbox: [{"from":"Ana Ruiz <ana@example.com>","id":"e1","subject":"Lunch on Friday?","unread":true},{"from":"City Bank <no-reply@citybank.example>","id":"e2","subject":"Your November statement","unread":false},{"from":"Bob Chen <bob@chen.example>","id":"e3","subject":"Invoice 221 for the website","unread":true},{"from":"Carla Diaz <carla@example.com>","id":"e4","subject":"Slides for Monday","unread":true}]'
INBOX_NO_BOB = '- The inbox: [{"from":"Ana Ruiz <ana@example.com>","id":"e1","subject":"Lunch on Friday?","unread":true},{"from":"Carla Diaz <carla@example.com>","id":"e4","subject":"Slides for Monday","unread":true}]'
STORE = '- Products: [{"id":"mug-red","name":"Red mug","price":12},{"id":"mug-blue","name":"Blue mug","price":12},{"id":"poster-space","name":"Space poster","price":15},{"id":"tshirt-black","name":"Black T-shirt","price":20}]\n- Cart: []'
# The app's data, a question, a true answer and a false one (the false ones as the 1.5B model wrote them).
ANSWERS = [
    (CAL6, "How many events do I have this week?", "You have 6 events this week.", "You have 7 events this week."),
    (CAL_NO_LUNCH, "Where is my lunch on Friday?", "There is no lunch on your calendar on Friday.", "You are having lunch on Friday at 13:00."),
    (CAL4, "When is the dentist?", "The dentist is on Tuesday at 15:00.", "The dentist is on Thursday at 11:00."),
    (CAL4, "What do I have on Thursday?", "On Thursday you have the project review with Bob at 11:00.", "On Thursday you have lunch with Ana at 13:00."),
    (CAL4, "Where is lunch with Ana?", "Lunch with Ana is at Cafe Roma.", "Lunch with Ana is at the office cafeteria."),
    (INBOX, "What did Carla send me?", "Carla sent you the slides for Monday.", "Carla sent you an email with the subject 'Lunch on Friday?'"),
    (INBOX, "Do I have any unread mail from Bob?", "Yes, Bob's invoice 221 is unread.", "No, you have no unread mail from Bob."),
    (INBOX_NO_BOB, "Do I have any unread mail from Bob?", "No, there is no email from Bob.", "Yes, you have unread mail from Bob."),
    (INBOX, "How many unread emails do I have?", "You have 3 unread emails.", "You have 2 unread emails."),
    (INBOX, "Is there anything from Dave?", "No, there is no email from Dave.", "Yes, Dave sent you the invoice."),
    (STORE, "How much would three space posters cost altogether?", "Three space posters cost $45.", "Three space posters cost $150."),
    (STORE, "Which is cheaper, a mug or the poster?", "The mug is cheaper: $12 against $15.", "The poster is cheaper at $150.00."),
    (STORE, "What's in my cart?", "Your cart is empty.", "Your cart has a red mug."),
]
VERIFY = {
    "A": (lambda s, q, a: f'What the app shows:\n{s}\n\nQuestion: "{q}"\nAnswer: "{a}"\n\nIs the answer true according to what the app shows? Answer yes or no.', False),
    "B": (lambda s, q, a: f'Data:\n{s}\n\nStatement: "{a}"\n\nDoes the data say exactly this? Answer yes or no.', False),
    "C": (lambda s, q, a: f'What the app shows:\n{s}\n\nQuestion: "{q}"\nAnswer: "{a}"\n\nDoes the answer say anything that is wrong or not in what the app shows? Answer yes or no.', True),
}


def probe_verify():
    for key, (ask, negated) in VERIFY.items():
        true, false = [], []
        for data, q, right, wrong in ANSWERS:
            p, w = yes(ask(data, q, right)), yes(ask(data, q, wrong))
            true.append(1 - p if negated else p)
            false.append(1 - w if negated else w)
        wins = sum(t > f for t, f in zip(true, false))
        print(f"{key}: the true answer scored higher in {wins} of {len(true)} pairs")
        listing(f"{key} true answers", true)
        listing(f"{key} false answers", false)


def probe_orders():
    """The no-action ratio with the actions in the app's order, reversed, and both shares averaged
    (a small model prefers some letters over others whatever they say)."""
    actions = set(sum(APPS.values(), []))
    fits = [(m, a) for m, a in POS + POS_SHOP + FITS_NEW if a in actions]
    cant = [(m, a) for m, a in NEG if m not in DOABLE and a in actions] + CANT_NEW
    out = {}
    for label, pairs in (("fits", fits), ("no action of the app", cant)):
        for m, a in pairs:
            listed = APPS[app_of(a)]
            own1, none1 = none_shares(m, listed, a)
            own2, none2 = none_shares(m, listed[::-1], a)
            ratios = {"as listed": none1 / max(own1, 1e-6), "reversed": none2 / max(own2, 1e-6),
                      "averaged": (none1 + none2) / max(own1 + own2, 1e-6)}
            for key, r in ratios.items():
                out.setdefault((label, key), []).append(r)
            print(f"{label} | {m} | {a} | " + " ".join(f"{k} {r:.2f}" for k, r in ratios.items()), flush=True)
    for (label, key), values in out.items():
        listing(f"{label}, {key}", values)


PROBES = {"orders": probe_orders, "none": probe_none, "pair": probe_pair, "replies": probe_replies, "can": probe_can, "goal": probe_goal, "verify": probe_verify}
chosen = [a for a in sys.argv[1:] if not a.isdigit()] or ["none"]
unknown = [c for c in chosen if c not in PROBES]
if unknown:
    sys.exit(f"unknown probe {', '.join(unknown)}: choose among {' '.join(PROBES)}")
for name in chosen:
    print(f"## {name}", flush=True)
    PROBES[name]()

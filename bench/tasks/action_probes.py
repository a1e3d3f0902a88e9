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
#   python action_probes.py [PORT] answers  "does the answer give what the question asks?", answers and non-answers
#   python action_probes.py [PORT] same     the call written back as a request, then "do both ask for the same thing?"
#   python action_probes.py [PORT] kind     the request-or-question check with the message first (as now) or last
#   python action_probes.py [PORT] better   the better-fit check: the fit question about the call and each other action of its app
#   python action_probes.py [PORT] claimed  "does the answer say it was done?" of answers in runs that changed nothing
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


# Questions with an answer that gives what they ask, and with one that does not (the benchmark's
# "Where am I having lunch on Friday?" answered with the lunch's time).
ANSWERED = [
    ("Where am I having lunch on Friday?", "You are having lunch on Friday at 13:00.", False),
    ("Where am I having lunch on Friday?", "You are having lunch at Cafe Roma.", True),
    ("When is my dentist appointment?", "Your dentist appointment is on Tuesday at 15:00.", True),
    ("How many events do I have this week?", "There are 4 events this week.", True),
    ("What did Carla send me?", "Carla Diaz sent you the slides for Monday.", True),
    ("How much does the blue mug hold?", "The blue mug holds 350 ml.", True),
    ("How much would three space posters cost altogether?", "The total cost of three space posters is $45.00.", True),
    ("Where is the project review?", "The project review is on Thursday at 11:00.", False),
    ("Where is the project review?", "The project review is in Room 2.", True),
    ("What is Ana's email address?", "Ana sent you 2 emails.", False),
    ("What is Ana's email address?", "Ana's address is ana@example.com.", True),
    ("Who is the lunch on Friday with?", "The lunch is on Friday at 13:00.", False),
    ("How big is the space poster?", "The space poster costs $15.00.", False),
    ("How big is the space poster?", "The space poster is 50 × 70 cm.", True),
    ("Which is cheaper, a mug or the poster?", "The mug is cheaper, at $12.00.", True),
    ("Do I have unread mail from Bob?", "No, you do not have any unread mail from Bob.", True),
    ("What time does the evening train leave?", "The evening train goes to Mar del Plata.", False),
    ("What time does the evening train leave?", "The evening train leaves at 17:30.", True),
    ("What is the phone number of the restaurant?", "The restaurant is open until 22:00.", False),
    ("What can you do?", "You can add an item to the to-do list.", True),
]
ANSWER_WORDINGS = {
    "gives": 'Question: "{q}"\nAnswer: "{a}"\n\nDoes the answer give what the question asks for? Answer yes or no.',
    "says": 'Question: "{q}"\nAnswer: "{a}"\n\nDoes the answer say what the question asks? Answer yes or no.',
    "missing (no)": 'Question: "{q}"\nAnswer: "{a}"\n\nIs something the question asks for missing from the answer? Answer yes or no.',
}


def probe_answers():
    for key, wording in ANSWER_WORDINGS.items():
        answers, others = [], []
        for q, a, gives in ANSWERED:
            p = yes(wording.format(q=q, a=a))
            (answers if gives else others).append(1 - p if key.endswith("(no)") else p)
        listing(f"{key}: answers", answers)
        listing(f"{key}: non-answers", others)


# Calls with what the app shows of the item they name: 10 a message asks for, 8 it does not.
CALLS = [
    (True, "Move my dentist appointment to 4pm.", "Change the day or the time of an event.", {"id": "c2", "time": "16:00"}, "c2: Dentist, Tuesday 15:00"),
    (True, "Push the project review back an hour.", "Change the day or the time of an event.", {"id": "c4", "time": "12:00"}, "c4: Project review with Bob, Thursday 11:00"),
    (True, "Cancel lunch with Ana.", "Cancel an event and take it off the calendar.", {"id": "c3"}, "c3: Lunch with Ana, Friday 13:00"),
    (True, "Put a haircut on Saturday at 10am.", "Put a new event on the calendar.", {"day": "Saturday", "time": "10:00", "title": "Haircut"}, ""),
    (True, "Add two space posters.", "Add a product to the shopping cart.", {"productId": "poster-space", "quantity": 2}, ""),
    (True, "Archive the email from Dave.", "Archive an email: it leaves the inbox.", {"id": "m4"}, "m4: from Dave Lee, 'Team lunch'"),
    (True, "Remove 'buy milk' from my list.", "Remove an item from the to-do list.", {"title": "buy milk"}, ""),
    (True, "Get rid of the bank email.", "Archive an email: it leaves the inbox.", {"id": "m2"}, "m2: from Bank, 'Your statement'"),
    (True, "Skip this song.", "Play the next track.", {}, ""),
    (True, "Turn off the kitchen lights.", "Switch a light on or off.", {"room": "kitchen", "on": False}, ""),
    (False, "Invite Bob to the project review.", "Put a new event on the calendar.", {"day": "Thursday", "time": "11:00", "title": "Project review with Bob"}, ""),
    (False, "Remind me about the dentist an hour before.", "Change the day or the time of an event.", {"id": "c2", "time": "14:00"}, "c2: Dentist, Tuesday 15:00"),
    (False, "Mark all my emails as read.", "Archive an email: it leaves the inbox.", {"id": "m1"}, "m1: from Ana Ruiz, 'Lunch on Friday?'"),
    (False, "Remove the space poster from my cart.", "Add a product to the shopping cart.", {"productId": "poster-space", "quantity": 1}, ""),
    (False, "Lock the front door.", "Switch a light on or off.", {"room": "hall", "on": False}, ""),
    (False, "Block Bob.", "Follow a person.", {"user": "bob"}, ""),
    (False, "Translate this post to Spanish.", "Write a new post.", {"text": "Hola a todos"}, ""),
    (False, "Move my 3pm meeting to 4pm.", "Cancel an event and take it off the calendar.", {"id": "c2"}, "c2: Dentist, Tuesday 15:00"),
]


def written(prompt):
    body = {"model": "m", "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": 40, "stream": False}
    return post(body)["choices"][0]["message"]["content"].strip().split("\n")[0].strip('"')


def probe_same():
    fits, others = [], []
    for asked, message, action, args, item in CALLS:
        about = f" ({item})" if item else ""
        request = written(f"An app's action: {action}\nCalled with: {json.dumps(args)}{about}\n\n"
                          "Write, in one short sentence, what a user would ask the app for to get exactly this done.")
        p = yes(f'Message 1: "{message}"\nMessage 2: "{request}"\n\nDo both messages ask the app for the same thing? Answer yes or no.')
        (fits if asked else others).append(p)
        print(f"{asked} {p:.2f} {message} | {request}", flush=True)
    listing("asked for", fits)
    listing("not asked for", others)


KIND_WORDINGS = {
    "message first (as now)": lambda m: (
        f'The user\'s message: "{m}"\n\nIs it a request to do something in the app (add, remove, change, open, order… '
        "— a short reply that picks or confirms what your last message offered counts), or only a question asking for "
        'information? Reply {"kind": "request"} or {"kind": "question"}.'),
    "message last": lambda m: (
        "Is the user's message below a request to do something in the app (add, remove, change, open, order… — a short "
        "reply that picks or confirms what your last message offered counts), or only a question asking for information? "
        f'Reply {{"kind": "request"}} or {{"kind": "question"}}.\n\nThe user\'s message: "{m}"'),
    "message between": lambda m: (
        "Decide whether the user's message is a request to do something in the app (add, remove, change, open, order… — "
        "a short reply that picks or confirms what your last message offered counts), or only a question asking for "
        f'information.\n\nThe user\'s message: "{m}"\n\nA request, or only a question? Reply {{"kind": "request"}} or '
        '{"kind": "question"}.'),
}


def probe_kind():
    """The benchmark's 69 messages (tasks.mjs), each asked alone as the loop asks it; what the model
    server read anew for each (its prompt cache keeps what the last question began with)."""
    import subprocess
    script = ('import("./tasks.mjs").then((m) => { const all = []; for (const v of Object.values(m)) if (Array.isArray(v)) '
              'for (const t of v) if (t && t.say) all.push({ id: t.id, kind: t.kind, say: t.say }); console.log(JSON.stringify(all)); })')
    here = __import__("os").path.dirname(__import__("os").path.abspath(__file__))
    tasks = json.loads(subprocess.run(["node", "-e", script], cwd=here, capture_output=True, text=True, check=True).stdout)
    schema = {"type": "object", "additionalProperties": False, "required": ["kind"],
              "properties": {"kind": {"type": "string", "enum": ["request", "question"]}}}
    for key, wording in KIND_WORDINGS.items():
        right, read, wrong = 0, [], []
        for t in tasks:
            body = {"model": "m", "temperature": 0, "max_tokens": 12, "stream": False,
                    "messages": [{"role": "system", "content": "Reply with only the JSON answer asked for."},
                                 {"role": "user", "content": wording(t["say"])}],
                    "response_format": {"type": "json_schema", "json_schema": {"name": "reply", "strict": False, "schema": schema}}}
            reply = post(body)
            kind = json.loads(reply["choices"][0]["message"]["content"]).get("kind")
            read.append(reply.get("timings", {}).get("prompt_n", 0))
            if kind == ("question" if t["kind"] == "question" else "request"):
                right += 1
            else:
                wrong.append(t["say"])
        read.sort()
        print(f"{key}: {right} of {len(tasks)} right, {read[len(read) // 2]} prompt tokens read (median); wrong: {wrong}", flush=True)


FIT = lambda m, a: f'Message: "{m}"\nAction: {a}\n\nDid the message ask for this action? Answer yes or no.'


def probe_better():
    """The better-fit check: the fit question about the action called and about each other action of its
    app; the ratio is how many times likelier "no" is for the call than for the best other. Calls that fit,
    calls of a near action where another action of the app does it, and calls where none does."""
    def actions_of(action):
        return next((acts for acts in APPS.values() if action in acts), APPS["shop"] + [action])
    reminder = "Remind me about the dentist an hour before."
    kinds = (("fits", POS + POS_SHOP + FITS_NEW),
             ("another action of the app does it", [(m, a) for m, a in NEG if m in DOABLE] + NEG_SHOP + [(reminder, CAL_MOVE), ("Cancel my meeting with Dave.", CAL_MOVE), ("Cancel lunch with Ana.", CAL_MOVE)]),
             ("no action of the app", [(m, a) for m, a in NEG if m not in DOABLE] + CANT_NEW))
    for label, pairs in kinds:
        ratios = []
        for m, a in pairs:
            called = yes(FIT(m, a))
            best, other = max((yes(FIT(m, o)), o) for o in actions_of(a) if o != a)
            ratio = (1 - called) / max(1 - best, 1e-6)
            ratios.append(ratio)
            print(f"  {ratio:5.2f}  called {called:.2f}, best other {best:.2f}  {m[:55]:57} {a[:35]:37} > {other[:35]}", flush=True)
        listing(label, ratios)


# Answers of runs in which nothing changed the app: answers that say something was done or is
# now so (in words the claim check's participles miss, as the 1.5B model wrote them after its
# note, and others), and answers that do not.
CLAIMED = [
    ("Mark all my emails as read.", "The inbox now shows all emails as read.", True),
    ("Mark all my emails as read.", "All emails are now marked as read.", True),
    ("Mark all my emails as read.", "Done! Your inbox is all read.", True),
    ("Mark all my emails as read.", "I can't mark emails as read here; I can only archive, delete or reply.", False),
    ("Add 'buy milk' to my list.", "Item 'buy milk' is on your to-do list now.", True),
    ("Add 'buy milk' to my list.", "Your list now has buy milk.", True),
    ("Add 'buy milk' to my list.", "Which list do you mean?", False),
    ("Remove the red mug from my cart.", "Your cart no longer has the red mug.", True),
    ("Remove the red mug from my cart.", "There is no red mug in your cart.", False),
    ("Invite Bob to the project review.", "Bob is invited to the project review.", True),
    ("Invite Bob to the project review.", "I cannot invite people to events here.", False),
    ("Invite Bob to the project review.", "The project review with Bob is on Thursday at 11:00.", False),
    ("Cancel lunch with Ana.", "Lunch with Ana is off your calendar.", True),
    ("Cancel lunch with Ana.", "Shall I cancel lunch with Ana on Friday at 13:00?", False),
    ("Turn off the kitchen light.", "The kitchen light is off now.", True),
    ("Turn off the kitchen light.", "The kitchen light is already off.", False),
    ("Book the cheapest seat on the evening train.", "You're booked on the 17:30 train, tourist class.", True),
    ("Book the cheapest seat on the evening train.", "The cheapest seat on the evening train is tourist class, $40.", False),
    ("Forward the invoice to my accountant.", "Please provide the recipient's email address for the invoice.", False),
    ("Forward the invoice to my accountant.", "Your accountant has the invoice now.", True),
    ("How many unread emails do I have?", "You have 1 unread email.", False),
    ("Where am I having lunch on Friday?", "There is no lunch on Friday: it was cancelled.", False),
    ("What's in my cart?", "Your cart has a red mug, $12.00.", False),
    ("What can you do?", "I can add and remove items on your to-do list.", False),
    ("Put a haircut on Saturday at 10am.", "Haircut, Saturday 10:00 — you're all set.", True),
    ("Check out, please.", "Thank you for your order!", True),
    ("Check out, please.", "Your cart is empty, so there is nothing to check out.", False),
]
CLAIM_WORDINGS = {
    "done": 'Message: "{m}"\nAnswer: "{a}"\n\nDoes the answer say that what the message asks for was done? Answer yes or no.',
    "changed": 'Answer: "{a}"\n\nDoes the answer say that something in the app was changed or is now different? Answer yes or no.',
    "nothing done": 'Nothing was done in the app.\nMessage: "{m}"\nAnswer: "{a}"\n\nIs the answer true? Answer yes or no.',
}


def probe_claimed():
    """Answers of runs in which nothing changed the app, each asked whether it says something was done."""
    for key, wording in CLAIM_WORDINGS.items():
        said, honest = [], []
        for m, a, claims in CLAIMED:
            p = yes(wording.format(m=m, a=a))
            (said if claims else honest).append(p)
            print(f"  {key} | {'claim ' if claims else 'honest'} | {p:.2f} | {a}", flush=True)
        listing(f"{key}: claims", said)
        listing(f"{key}: honest", honest)


PROBES = {"claimed": probe_claimed, "better": probe_better, "orders": probe_orders, "none": probe_none, "pair": probe_pair, "replies": probe_replies, "can": probe_can, "goal": probe_goal, "verify": probe_verify,
          "answers": probe_answers, "same": probe_same, "kind": probe_kind}
chosen = [a for a in sys.argv[1:] if not a.isdigit()] or ["none"]
unknown = [c for c in chosen if c not in PROBES]
if unknown:
    sys.exit(f"unknown probe {', '.join(unknown)}: choose among {' '.join(PROBES)}")
for name in chosen:
    print(f"## {name}", flush=True)
    PROBES[name]()

# The kind question (`questions::kind_prompt`) on messages after answers before that do not lead
# to them (a refusal, a report of something else, a state): whether quoting the answer before
# turns a request into a "question", and whether asking again without it tells them apart
# (docs/models.md, "The kind question and the answer before"). Needs a model server (serve.py).
import math
from probe_pairs import post

def p_question(message, last):
    """The share of "question" at the token where the constrained reply chooses its kind."""
    before = f'Your last message: "{last}"\n' if last else ""
    prompt = (f'{before}The user\'s message: "{message}"\n\nIs it a request to do something in the app (add, remove, '
              'change, open, order… — a short reply that picks or confirms what your last message offered counts), '
              'or only a question asking for information? Reply {"kind": "request"} or {"kind": "question"}.')
    schema = {"type": "object", "properties": {"kind": {"type": "string", "enum": ["request", "question"]}},
              "required": ["kind"], "additionalProperties": False}
    body = {"model": "m", "messages": [{"role": "system", "content": "Reply with only the JSON answer asked for."},
            {"role": "user", "content": prompt}], "temperature": 0, "max_tokens": 12, "stream": False,
            "logprobs": True, "top_logprobs": 10,
            "response_format": {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}}
    for token in post(body)["choices"][0]["logprobs"]["content"]:
        q = sum(math.exp(c["logprob"]) for c in token["top_logprobs"] if c["token"].strip().startswith("question"))
        r = sum(math.exp(c["logprob"]) for c in token["top_logprobs"] if c["token"].strip().startswith("request"))
        if q + r > 0.01:
            return q / (q + r)
    return float("nan")

REFUSED = "The user rejected the call to place my order now. They pressed Reject."
# (message, the answer before it, what it is)
CASES = [
    ("Empty my cart.", REFUSED, "request"),
    ("Delete the invoice from Bob.", "Nothing was done: the request was refused.", "request"),
    ("Clear my list.", "Your list is empty.", "request"),
    ("Cancel the review at 15:00.", "You have 3 events today: standup at 9, lunch at 12, review at 15.", "request"),
    ("Book the 17:30 train.", "There are two trains: 412 at 08:10 and 418 at 17:30.", "request"),
    ("Mark it as read.", "Bob's email says: Lunch on Friday?", "request"),
    ("Remove the poster.", "Your cart has 2 × Space poster, total $30.00.", "request"),
    ("Add milk.", "I could not add eggs: the user rejected it.", "request"),
    ("Skip this song.", "Now playing: Yellow Submarine.", "request"),
    ("Turn off the kitchen light.", "The kitchen light is on.", "request"),
    ("Unsubscribe me from the newsletter.", "You have 3 unread emails.", "request"),
    ("Yes, please.", "Shall I check out?", "request"),
    ("Both.", "Do you want the red mug or the blue one?", "request"),
    ("Put it back.", "Removed 1 × Red mug from your cart.", "request"),
    ("The blue one.", "Which mug do you want me to add, the red one or the blue one?", "request"),
    ("The 17:30 one.", "Which train do you want me to book?", "request"),
    ("The second one.", "Which email should I archive, Bob's or Carla's?", "request"),
    ("Sure.", "Do you want me to book it?", "request"),
    ("Yes.", "Shall I add the red mug and check out?", "request"),
    ("What's in my cart?", REFUSED, "question"),
    ("What about the blue one?", "The red mug costs $12.00.", "question"),
    ("And tomorrow?", "You have no events today.", "question"),
    ("Anything from Carla?", "You have 2 unread emails, both from Bob.", "question"),
    ("How much is the blue mug?", "Added 1 × Red mug to your cart.", "question"),
    ("Is the kitchen light on?", "The kitchen light was turned off.", "question"),
    ("When is my dentist appointment?", "The standup was moved to Wednesday.", "question"),
    ("What trains are there to Mar del Plata on Friday? Don't book anything yet.", "Booked a tourist seat on train 412.", "question"),
    ("If I added one more blue mug, what would my cart total be?", "The mug is cheaper than the poster.", "question"),
    ("Tell me what's on my list.", "Added 'buy milk' to your list.", "question"),
    ("How many unread emails do I have?", "The email from Carla has been archived.", "question"),
    ("Which is cheaper, a mug or the poster?", REFUSED, "question"),
    ("Did my order go through", REFUSED, "question"),
]

if __name__ == "__main__":
    right = {"with": 0, "without": 0}
    worst = {"with": [1.0, 0.0], "without": [1.0, 0.0]}  # lowest P(question) of a question, highest of a request
    for message, last, want in CASES:
        got = {"with": p_question(message, last), "without": p_question(message, None)}
        for key, p in got.items():
            right[key] += (p > 0.5) == (want == "question")
            if want == "question": worst[key][0] = min(worst[key][0], p)
            else: worst[key][1] = max(worst[key][1], p)
        print(f"{want:8} P(question) with the answer before {got['with']:.2f}, without {got['without']:.2f}  {message!r}", flush=True)
    print("right at 0.5:", {k: f"{v}/{len(CASES)}" for k, v in right.items()})
    print("lowest P(question) of a question / highest of a request:", {k: [round(x, 2) for x in v] for k, v in worst.items()})

# What the probes of the fit and no-action questions share (docs/models.md): a model server
# started by serve.py (`python serve.py MODEL.gguf PORT`), the first token's probabilities, and
# message and action pairs from the benchmark's five apps and eight made-up ones. Imported by
# fit_wordings.py and action_probes.py; runs nothing itself.
import json, math, sys, urllib.request
PORT = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1].isdigit() else "18091"
URL = f"http://127.0.0.1:{PORT}/v1/chat/completions"
def post(body):
    req = urllib.request.Request(URL, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=300))
def first(prompt):
    body = {"model": "m", "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": 1,
            "stream": False, "logprobs": True, "top_logprobs": 10}
    return post(body)["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
def yes(prompt):
    """The share of "yes" among "yes" and "no" in the first token's ten likeliest choices."""
    y = n = 0.0
    for c in first(prompt):
        t = c["token"].strip().lower()
        if t == "yes": y += math.exp(c["logprob"])
        if t == "no": n += math.exp(c["logprob"])
    return y / (y + n) if y + n else float("nan")
def shares(prompt, labels):
    """Each label's share of the first token's ten likeliest choices (as `label_shares`)."""
    s = [0.0] * len(labels)
    for c in first(prompt):
        t = c["token"].strip()
        if t in labels: s[labels.index(t)] += math.exp(c["logprob"])
    total = sum(s) or 1.0
    return [x / total for x in s]
def generate(prompt, key, most=60):
    """A constrained one-field JSON answer: {key: "..."}."""
    schema = {"type": "object", "properties": {key: {"type": "string"}}, "required": [key], "additionalProperties": False}
    body = {"model": "m", "messages": [{"role": "system", "content": "Reply with only the JSON answer asked for."},
            {"role": "user", "content": prompt}], "temperature": 0, "max_tokens": most, "stream": False,
            "response_format": {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}}
    text = post(body)["choices"][0]["message"]["content"]
    try: return json.loads(text)[key]
    except (ValueError, KeyError, TypeError): return text
# The actions (tool descriptions) and the pairs of fit_wordings.py: each message with an action
# that does what it asks (POS) or something else (NEG).
CAL_ADD="Put a new event on the calendar."; CAL_MOVE="Change the day or the time of an event."; CAL_CANCEL="Cancel an event and take it off the calendar."
ARCH="Move an email out of the inbox into the archive."; DEL="Delete an email for good."; REPLY="Send a reply to the sender of an email."; SEND="Write and send a new email."
TADD="Add an item to the to-do list."; TREM="Remove an item from the to-do list."
CART_ADD="Add a product to the cart."; LIGHT="Switch a light on or off."; HEAT="Set the target temperature of the heating."
PLAY="Start playing a playlist."; NEXT="Play the next track."; RENAME="Change a note's title."; PIN="Pin a note to the top of the list."
POS=[("Put a haircut on Saturday at 10am.",CAL_ADD),("Move my dentist appointment to 4pm.",CAL_MOVE),("Cancel lunch with Ana.",CAL_CANCEL),
("Move the standup to Wednesday.",CAL_MOVE),("Cancel the project review and add a gym session on Thursday at 6pm.",CAL_CANCEL),
("Cancel the project review and add a gym session on Thursday at 6pm.",CAL_ADD),("Archive Carla's message.",ARCH),("Delete the invoice from Bob.",DEL),
("Get rid of the bank email.",ARCH),("Get rid of the bank email.",DEL),("Tell Ana that Friday works for me.",REPLY),
("Email carla@example.com to thank her for the slides.",SEND),("Add 'buy milk' to my list.",TADD),("Cross off 'walk the dog'.",TREM),
("Add one space poster and one blue mug.",CART_ADD),("Turn off the kitchen lights.",LIGHT),("Play some jazz.",PLAY),
("Set the thermostat to 21 degrees.",HEAT),("Rename my 'ideas' note to 'plans'.",RENAME),("Pin the grocery note.",PIN),("Skip this song.",NEXT),
("I'm done with 'call mom', take it off.",TREM),("Make it warmer in here, 23 please.",HEAT),("Push the standup back an hour.",CAL_MOVE)]
NEG=[("Invite Bob to the project review.",CAL_ADD),("Remind me about the dentist an hour before.",CAL_MOVE),("Mark all my emails as read.",ARCH),
("Forward the invoice to my accountant.",REPLY),("Move my 3pm meeting to 4pm.",CAL_CANCEL),("Cancel the project review and add a gym session on Thursday at 6pm.",CAL_MOVE),
("Turn off the kitchen lights.",HEAT),("Dim the bedroom lights to half.",LIGHT),("Share my grocery note with Sam.",PIN),("Add this song to my favourites.",PLAY),
("Delete the grocery note.",RENAME),("Change 'buy milk' to 'buy oat milk'.",TADD),("Remove the red mug from my cart.",CART_ADD),
("Unsubscribe me from the bank's newsletter.",DEL),("Repeat this song.",NEXT),("Lock the front door.",LIGHT),("Print the invoice.",DEL),
("Mark 'buy milk' as urgent.",TADD),("Snooze the standup reminder.",CAL_CANCEL),("Set an alarm for 7am.",CAL_ADD)]
# The storefront's actions, and pairs of it.
CHECKOUT="Place the order for everything in the cart."; CART_REMOVE="Remove a product from the cart."; OPEN_CART="Open the shopping cart page."
POS_SHOP=[("Buy me a large black T-shirt as well.",CART_ADD),("Check out, please.",CHECKOUT),("Take me to my cart.",OPEN_CART),("Put one red mug in the cart and check out.",CART_ADD),("Get rid of the blue mug in my cart.",CART_REMOVE)]
NEG_SHOP=[("Buy me a large black T-shirt as well.",CHECKOUT),("Take me to my cart.",CART_ADD),("Show me my cart.",CART_REMOVE),("Archive Carla's message.",DEL),("Tell Ana that Friday works for me.",SEND)]
# Each app's actions that change something (what the rival and no-action questions list), the
# benchmark's and eight made up.
APPS = {
 "calendar": [CAL_ADD, CAL_MOVE, CAL_CANCEL], "mail": [ARCH, DEL, REPLY, SEND], "todo": [TADD, TREM],
 "shop": [CART_ADD, CART_REMOVE, CHECKOUT], "home": [LIGHT, HEAT], "music": [PLAY, NEXT], "notes": [RENAME, PIN],
 "restaurant": ["Book a table at the restaurant.", "Cancel a table booking."], "bank": ["Send money to a contact.", "Add a new contact."],
 "social": ["Write a new post.", "Like a post.", "Follow a person."], "timer": ["Start a countdown timer.", "Stop the running timer."],
 "notes2": ["Write a new note.", "Delete a note."], "trains": ["Book a seat on a train.", "Cancel a booking."],
}
def app_of(action): return next(app for app, actions in APPS.items() if action in actions)
# The NEG pairs whose app has an action for the message (another one than the pair's).
DOABLE = {"Move my 3pm meeting to 4pm.", "Cancel the project review and add a gym session on Thursday at 6pm.", "Turn off the kitchen lights.",
  "Remove the red mug from my cart.", "Buy me a large black T-shirt as well.", "Take me to my cart.", "Show me my cart.", "Archive Carla's message.",
  "Tell Ana that Friday works for me."}
# Requests of the made-up apps, with the action that does them (FITS_NEW) or, where no action of
# the app does, the one nearest them (CANT_NEW).
FITS_NEW = [("Book a table for two at 8pm.", "Book a table at the restaurant."), ("Reserve us a spot tonight.", "Book a table at the restaurant."),
 ("Call off my booking for Friday.", "Cancel a table booking."), ("Send 20 dollars to Sam.", "Send money to a contact."), ("Pay Ana back the 15 euros.", "Send money to a contact."),
 ("Save Carla's number as a contact.", "Add a new contact."), ("Post that I'm at the beach.", "Write a new post."), ("Follow Bob.", "Follow a person."),
 ("Set a timer for 10 minutes.", "Start a countdown timer."), ("Jot down: call the bank tomorrow.", "Write a new note."), ("Throw away the shopping note.", "Delete a note."),
 ("I'd like two posters.", CART_ADD), ("Get me a seat on the 9am train to Rosario.", "Book a seat on a train."), ("Also add eggs.", TADD), ("Actually, drop the milk.", TREM)]
CANT_NEW = [("Split the bill with Sam.", "Send money to a contact."), ("Block Bob.", "Follow a person."), ("Translate this post to Spanish.", "Write a new post."),
 ("Pause the timer.", "Stop the running timer."), ("Share the shopping note with Sam.", "Write a new note."), ("Leave a review for the restaurant.", "Book a table at the restaurant."),
 ("Return the mug I bought last week.", CART_REMOVE), ("Apply the coupon SAVE10.", CART_ADD), ("Change my seat to a window seat.", "Book a seat on a train."),
 ("Set a reminder for the milk at 6pm.", TADD), ("Request money from Ana.", "Send money to a contact."), ("Gift wrap the poster.", CART_ADD)]
# Short replies, with the answer before them and the action they pick.
REPLIES = [("Yes, go ahead.", "Your cart has 2 items for $27. Shall I place the order?", CHECKOUT),
 ("The blue one.", "Which mug do you want, the red one or the blue one?", CART_ADD),
 ("Yes please, book it.", "Train 412 leaves at 18:05 for $30. Shall I book it?", "Book a seat on a train."),
 ("Stop it.", "Your timer is running: 4 minutes left.", "Stop the running timer."),
 ("Sure, do it.", "Lunch with Ana is on Friday at 13:00. Do you want me to cancel it?", CAL_CANCEL),
 ("Yes.", "Do you want me to delete the invoice from Bob?", DEL), ("Two, please.", "How many space posters would you like?", CART_ADD)]

# Probe: how well one yes-or-no token tells a call that fits its message from one that does not,
# for several wordings of the fit question (docs/models.md, "Tried and dropped: wording the fit
# question otherwise"). Asks a model server started by serve.py (`python serve.py MODEL.gguf
# PORT`), then `python fit_wordings.py [PORT] [WORDING ...]` (wordings A B D E F; all by default).
# Prints, per wording, the fit of the pairs that fit and of those that do not; the fit is the
# share of "yes" among the first token's ten likeliest choices ("no" for a negated question).
import json, math, sys, urllib.request
PORT = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1].isdigit() else "18091"
URL = f"http://127.0.0.1:{PORT}/v1/chat/completions"
def first(prompt):
    body = {"model": "m", "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": 1,
            "stream": False, "logprobs": True, "top_logprobs": 10}
    req = urllib.request.Request(URL, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    r = json.load(urllib.request.urlopen(req, timeout=120))
    return r["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
def yes(prompt):
    y = n = 0.0
    for c in first(prompt):
        t = c["token"].strip().lower()
        if t == "yes": y += math.exp(c["logprob"])
        if t == "no": n += math.exp(c["logprob"])
    return y / (y + n) if y + n else float("nan")
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
VARIANTS = {
 "A": (lambda m,a: f'Message: "{m}"\nAction: {a}\n\nDid the message ask for this action? Answer yes or no.', False),
 "B": (lambda m,a: f'Message: "{m}"\nAction: {a}\n\nWould this action do something other than what the message asks for? Answer yes or no.', True),
 "D": (lambda m,a: f'Message: "{m}"\nAction: {a}\n\nIs this action exactly what the message asks for, not a different or only similar action? Answer yes or no.', False),
 "E": (lambda m,a: f'Message: "{m}"\nAction: {a}\n\nDoes the message ask for something this action cannot do? Answer yes or no.', True),
 "F": (lambda m,a: f'Action: {a}\nMessage: "{m}"\n\nIf the app did this action, would the user get what the message asks for? Answer yes or no.', False),
}
sel = [a for a in sys.argv[1:] if not a.isdigit()] or list(VARIANTS)
unknown = [k for k in sel if k not in VARIANTS]
if unknown:
    sys.exit(f"unknown wording {', '.join(unknown)}: choose among {' '.join(VARIANTS)}")
for k in sel:
    f, inv = VARIANTS[k]
    p = [(1-yes(f(m,a))) if inv else yes(f(m,a)) for m,a in POS]
    n = [(1-yes(f(m,a))) if inv else yes(f(m,a)) for m,a in NEG]
    print(k, "POS min %.2f med %.2f" % (min(p), sorted(p)[len(p)//2]), "NEG max %.2f med %.2f" % (max(n), sorted(n)[len(n)//2]), flush=True)
    print("  pos:", " ".join("%.2f"%x for x in p)); print("  neg:", " ".join("%.2f"%x for x in n), flush=True)


# The action count (`questions::actions_prompt`) on messages after an answer that reported
# something done or offered something: whether an action of the answer before is listed as the
# message's, and whether dropping the listed actions that share no word with the message (when
# another one does) counts right (docs/models.md, "Everything asked is done"). Needs a model
# server (serve.py) on the port given.
import re
import json
from probe_pairs import post

def generate_json(prompt, key):
    """A constrained answer {key: [strings]}, as `QuestionCheck::actions` asks it."""
    schema = {"type": "object", "properties": {key: {"type": "array", "items": {"type": "string"}, "maxItems": 8}},
              "required": [key], "additionalProperties": False}
    body = {"model": "m", "messages": [{"role": "system", "content": "Reply with only the JSON answer asked for."},
            {"role": "user", "content": prompt}], "temperature": 0, "max_tokens": 120, "stream": False,
            "response_format": {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}}
    text = post(body)["choices"][0]["message"]["content"]
    try: return json.loads(text)[key]
    except (ValueError, KeyError, TypeError): return []

def actions_prompt(message, last):
    before = f'Your last message: "{last}"\n' if last else ""
    return (f'{before}The user\'s message: "{message}"\n\nList the separate actions the message asks the app to do, '
            'each as a short instruction in the message\'s own words. A question that only asks for information asks '
            'for no action. Reply {"actions": [...]}.')

def stem(word):
    word = word.lower()
    for suffix in ("ied", "ed", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
    return word

# Words that say nothing of an action (as `questions::FUNCTION_WORDS`).
FUNCTION_WORDS = {"the", "and", "for", "you", "your", "our", "too", "now", "all", "but", "then", "with", "this",
                  "that", "these", "those", "please", "from", "into", "onto", "also", "them", "its", "one"}

def words(text):
    return {stem(w) for w in re.split(r"[^0-9A-Za-z]+", text.lower()) if len(w) >= 3 and w not in FUNCTION_WORDS}

def kept(message, actions):
    said = words(message)
    sharing = [a for a in actions if words(a) & said]
    return sharing if sharing else actions

# (message, the answer before it, how many actions the message asks for)
PAIRS = [
    ("I'd like two space posters, please.", "The home page has been opened.", 1),
    ("Add a blue mug.", "Added 1 × Red mug to your cart.", 1),
    ("Now delete the invoice.", "The email from Carla has been archived.", 1),
    ("Put 'buy milk' on my list.", "Removed 'call dentist' from your list.", 1),
    ("Move the standup to Wednesday.", "The standup is on Monday at 9:00.", 1),
    ("Archive it.", "Bob's email is open: \"Lunch on Friday?\"", 1),
    ("Add 2 T-shirts and a mug, and check out.", "The cart page has been opened.", 3),
    ("Book me a tourist seat on the morning train.", "There are two trains: 412 at 08:10 and 418 at 17:30.", 1),
    ("Yes.", "Shall I add the red mug and check out?", 2),
    ("Yes, go ahead.", "Shall I place the order?", 1),
    ("Yes, both please.", "Do you want me to archive Carla's email and reply to Ana?", 2),
    ("Do it again for the blue one.", "Added 1 × Red mug to your cart.", 1),
]

if __name__ == "__main__":
    for message, last, wanted in PAIRS:
        listed = generate_json(actions_prompt(message, last), "actions")
        listed = [a for a in listed if isinstance(a, str) and a.strip()] if isinstance(listed, list) else []
        filtered = kept(message, listed)
        print(f"want {wanted} listed {len(listed)} kept {len(filtered)}  {message!r} after {last!r}: {listed}", flush=True)

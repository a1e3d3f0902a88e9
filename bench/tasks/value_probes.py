# The value question (`questions::value_prompt`) for every allowed value of one required argument,
# on messages that name a value, ask for one in other words, or make no choice at all: what
# tells a choice the message leaves open from one it makes without naming it (docs/models.md,
# "A choice the message leaves open"). Needs a model server (serve.py) on the port given.
from probe_pairs import yes

def value_prompt(message, argument, value):
    return f'Message: "{message}"\n\nDoes the message ask for {argument} "{value}"? Answer yes or no.'

# Whether the message makes the choice at all, in two wordings.
def says_prompt(message, argument, values):
    return f'Message: "{message}"\n\nDoes the message say which {argument} it wants? Answer yes or no.'
def says_among_prompt(message, argument, values):
    listed = ", ".join(f'"{v}"' for v in values)
    return f'Message: "{message}"\n\nThe {argument} can be {listed}. Does the message say which one it wants? Answer yes or no.'

CLASSES = ("seat_class", ["first", "tourist"])
SIZES = ("size", ["S", "M", "L", "XL"])
SHIPPING = ("speed", ["standard", "express", "overnight"])
MODE = ("mode", ["heat", "cool", "off"])
CUP = ("cup", ["small", "medium", "large"])
PRIORITY = ("priority", ["low", "normal", "high"])
SIDE = ("side", ["window", "aisle"])
# (message, argument and its values, the value it asks for or None when it makes no choice)
PAIRS = [
    ("Book the cheapest seat on the evening train to Mar del Plata on Friday.", CLASSES, None),
    ("Book a seat on the 6am train to Mar del Plata on Friday.", CLASSES, None),
    ("Book me a seat on train 418.", CLASSES, None),
    ("Get me on the morning train to Mar del Plata.", CLASSES, None),
    ("Book me a tourist seat on the morning train to Mar del Plata on Friday.", CLASSES, "tourist"),
    ("I'd like an economy seat on train 418.", CLASSES, "tourist"),
    ("Book the most comfortable seat on train 412.", CLASSES, "first"),
    ("Buy me a large black T-shirt as well.", SIZES, "L"),
    ("Add a small T-shirt to my cart.", SIZES, "S"),
    ("Add a medium T-shirt to my cart.", SIZES, "M"),
    ("Add an extra large T-shirt to my cart.", SIZES, "XL"),
    ("Add a T-shirt to my cart.", SIZES, None),
    ("Ship it as fast as possible.", SHIPPING, "overnight"),
    ("Ship it by tomorrow morning.", SHIPPING, "overnight"),
    ("Ship it the normal way.", SHIPPING, "standard"),
    ("Ship my order.", SHIPPING, None),
    ("It's too warm in here.", MODE, "cool"),
    ("I'm freezing.", MODE, "heat"),
    ("Switch the thermostat off.", MODE, "off"),
    ("Change the thermostat mode.", MODE, None),
    ("A big coffee, please.", CUP, "large"),
    ("Just a tiny coffee for me.", CUP, "small"),
    ("A coffee, please.", CUP, None),
    ("Add 'pay rent' to my list, it's urgent.", PRIORITY, "high"),
    ("Add 'pay rent' to my list, no rush.", PRIORITY, "low"),
    ("Add 'water the plants' to my list.", PRIORITY, None),
    ("I want to look out of the window on the flight.", SIDE, "window"),
    ("Give me a seat where I can stretch my legs into the aisle.", SIDE, "aisle"),
    ("Pick me a seat on the flight.", SIDE, None),
]

if __name__ == "__main__":
    for message, (argument, values), wanted in PAIRS:
        scores = [yes(value_prompt(message, argument, value)) for value in values]
        ranked = sorted(scores, reverse=True)
        ratio = ranked[0] / ranked[1] if ranked[1] > 0 else float("inf")
        shown = " ".join(f"{v}={s:.2f}" for v, s in zip(values, scores))
        says = yes(says_prompt(message, argument, values))
        among = yes(says_among_prompt(message, argument, values))
        print(f"{wanted or '-':>9} | top/second {ratio:4.2f} | says {says:.2f} among {among:.2f} | {shown} | {message}", flush=True)

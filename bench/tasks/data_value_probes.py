# The value question with what the app showed before the message (`questions::value_prompt`
# with a data line): whether a choice the message makes through the app's data ("the cheapest
# seat", "the shipping that arrives tomorrow") tells its value from the others, while messages
# that make no choice still score their values alike (docs/models.md, "A choice the message
# makes through the app's data"). Needs a model server (serve.py) on the port given.
from probe_pairs import yes

def plain(message, argument, value, data):
    return f'Message: "{message}"\n\nDoes the message ask for {argument} "{value}"? Answer yes or no.'

def with_data(message, argument, value, data):
    return f'The app shows: "{data}"\nMessage: "{message}"\n\nDoes the message ask for {argument} "{value}"? Answer yes or no.'

TRAINS = "Train 412 dep 08:10, first 95000 ARS, tourist 41000 ARS; Train 418 dep 17:30, first 99000 ARS, tourist 43000 ARS."
SHIP = "Shipping: standard $5 (5-7 days), express $15 (2 days), overnight $30 (next morning)."
CUPS = "Coffee: small $2.50, medium $3.50, large $4.50."
ROOMS = "Rooms: single 80 EUR a night, double 120 EUR a night, suite 300 EUR a night."
CLASSES = ("seat_class", ["first", "tourist"])
SHIPPING = ("speed", ["standard", "express", "overnight"])
CUP = ("cup", ["small", "medium", "large"])
ROOM = ("room", ["single", "double", "suite"])
# (message, data, argument and its values, the value it asks for or None when it makes no choice)
PAIRS = [
    ("Book the cheapest seat on the evening train.", TRAINS, CLASSES, "tourist"),
    ("Book the most expensive seat on the morning train.", TRAINS, CLASSES, "first"),
    ("Book me a seat under 50000 ARS on train 418.", TRAINS, CLASSES, "tourist"),
    ("Book me a seat on train 418.", TRAINS, CLASSES, None),
    ("Get me on the evening train.", TRAINS, CLASSES, None),
    ("Ship it the cheapest way.", SHIP, SHIPPING, "standard"),
    ("I need it by tomorrow morning.", SHIP, SHIPPING, "overnight"),
    ("Ship it so it arrives in two days.", SHIP, SHIPPING, "express"),
    ("Ship my order.", SHIP, SHIPPING, None),
    ("A coffee for under three dollars.", CUPS, CUP, "small"),
    ("The biggest coffee you have.", CUPS, CUP, "large"),
    ("A coffee, please.", CUPS, CUP, None),
    ("Book the cheapest room.", ROOMS, ROOM, "single"),
    ("Book a room for me and my wife.", ROOMS, ROOM, "double"),
    ("Book a room for Friday.", ROOMS, ROOM, None),
]

if __name__ == "__main__":
    for message, data, (argument, values), wanted in PAIRS:
        for prompt in (plain, with_data):
            scores = [yes(prompt(message, argument, value, data)) for value in values]
            ranked = sorted(scores, reverse=True)
            ratio = ranked[0] / ranked[1] if ranked[1] else float("inf")
            best = values[scores.index(ranked[0])]
            print(f"{prompt.__name__:9} {wanted or '-':9} best {best:9} x{ratio:4.2f} "
                  + " ".join(f"{v}={s:.2f}" for v, s in zip(values, scores)) + f"  {message}", flush=True)

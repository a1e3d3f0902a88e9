# Probe: how well one yes-or-no token tells a call that fits its message from one that does not,
# for several wordings of the fit question (docs/models.md, "Tried and dropped: wording the fit
# question otherwise"). Asks a model server started by serve.py (`python serve.py MODEL.gguf
# PORT`), then `python fit_wordings.py [PORT] [WORDING ...]` (wordings A B D E F; all by default).
# Prints, per wording, the fit of the pairs that fit and of those that do not; the fit is the
# share of "yes" among the first token's ten likeliest choices ("no" for a negated question).
from probe_pairs import *
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


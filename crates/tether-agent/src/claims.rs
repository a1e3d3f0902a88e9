//! Answers that say something was done when no tool did it ("Your order has been placed." with no
//! successful call of a tool that places orders): the silent failure small models are prone to.
//!
//! [`unbacked_claim`] finds a claim of a finished action in an English answer — a past participle
//! after `has been`/`have been`, after `I`/`we` (`I've added`), next to `successfully`, or opening
//! a sentence (`Added 2 × Red mug.`) — and checks it against the tools that succeeded in the run:
//! the claim is backed when the verb, or a verb of the same kind (`placed` ~ `checkout`, `emptied`
//! ~ `clear`), is a word of such a tool's name or description. Negated sentences (`could not be
//! added`) claim nothing. It is a heuristic by design: a missed claim costs what it cost before,
//! a false alarm one more model turn (docs/models.md).

use std::collections::BTreeSet;

/// Words ending in `-ed` that describe rather than report an action of the agent's.
const NOT_ACTIONS: [&str; 30] = [
    "based",
    // "The mug is cheaper, at $12.00, compared to the poster." (measured with the 1.5B model)
    "compared",
    "located",
    "listed",
    "priced",
    "called",
    "named",
    "sized",
    "related",
    "designed",
    "needed",
    "required",
    "included",
    "detailed",
    "interested",
    "supposed",
    "used",
    "limited",
    "allowed",
    "expected",
    "displayed",
    "rated",
    "colored",
    "coloured",
    "asked",
    // What happened to a request, not what the agent did: "The order was refused."
    "refused",
    "declined",
    "rejected",
    "denied",
    "blocked",
];

/// Irregular participles of actions, with the verb they come from.
const IRREGULAR: [(&str, &str); 8] = [
    ("set", "set"),
    ("put", "put"),
    ("sent", "send"),
    ("paid", "pay"),
    ("bought", "buy"),
    ("made", "make"),
    ("taken", "take"),
    ("done", "do"),
];

/// Verbs of the same kind of action, as stems ([`stem`]): a claim with one of them is backed by a
/// tool named or described with another.
const KINDS: [&[&str]; 10] = [
    &["add", "put", "insert", "includ"],
    &["remov", "delet", "drop", "discard"],
    &["clear", "empty", "reset", "remov", "delet"],
    &["plac", "order", "checkout", "check", "buy", "purchas", "pay", "submit"],
    &["updat", "chang", "set", "edit", "modify", "adjust", "renam", "replac"],
    &["open", "navigat", "go", "show", "view", "display", "brought"],
    &["book", "reserv"],
    &["send", "email", "messag", "notify"],
    &["creat", "make", "add", "generat"],
    &["cancel", "abort", "stop"],
];

/// Verbs that claim something was done without saying what (`Done.`, `I've taken care of it`,
/// `completed`): any tool that succeeded in the run backs them.
const GENERIC: [&str; 6] = ["do", "complet", "finish", "handl", "process", "take"];

/// Words that make a sentence say the opposite of a claim.
const NEGATIONS: [&str; 12] =
    ["not", "never", "unable", "cannot", "can't", "couldn't", "wasn't", "weren't", "failed", "no", "nothing", "none"];

/// A word as a stem for comparison: lowercase, `-ied` as `-y`, `-ed` and a final `-e` or `-s`
/// dropped, a doubled last consonant made single (`stopped` and `stop` both give `stop`).
pub(crate) fn stem(word: &str) -> String {
    let word = word.to_lowercase();
    if let Some((_, verb)) = IRREGULAR.iter().find(|(participle, _)| *participle == word) {
        return stem_base(verb);
    }
    if let Some(base) = word.strip_suffix("ied") {
        return format!("{base}y");
    }
    if let Some(base) = word.strip_suffix("ed") {
        let bytes = base.as_bytes();
        let doubled = bytes.len() >= 4
            && bytes[bytes.len() - 1] == bytes[bytes.len() - 2]
            && !b"aeiouls".contains(&bytes[bytes.len() - 1]);
        return stem_base(if doubled { &base[..base.len() - 1] } else { base });
    }
    stem_base(&word)
}

fn stem_base(word: &str) -> String {
    let word = word.strip_suffix('s').filter(|w| w.len() > 2 && !w.ends_with('s')).unwrap_or(word);
    word.strip_suffix('e').filter(|w| w.len() > 1).unwrap_or(word).to_string()
}

/// Whether `word` reads as the past participle of an action.
fn is_participle(word: &str) -> bool {
    let lower = word.to_lowercase();
    if IRREGULAR.iter().any(|(participle, _)| *participle == lower) {
        return true;
    }
    lower.len() > 4
        && lower.ends_with("ed")
        && lower.bytes().all(|b| b.is_ascii_alphabetic())
        && !NOT_ACTIONS.contains(&lower.as_str())
}

/// Splits a tool's name (`cart_add`, `placeOrder`) and description into stemmed words.
fn tool_words(name: &str, description: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    for c in name.chars() {
        if c == '_' || c == '-' || c == '.' || c.is_uppercase() {
            if !current.is_empty() {
                words.push(stem(&current));
            }
            current.clear();
        }
        if c.is_alphanumeric() {
            current.push(c);
        }
    }
    if !current.is_empty() {
        words.push(stem(&current));
    }
    words.extend(what_it_does(description).split(|c: char| !c.is_alphabetic()).filter(|w| !w.is_empty()).map(stem));
    words
}

/// Words after which a tool's description says what is around it, not what it does: "Open the
/// cart page, where the cart can be seen, changed and checked out." (the storefront's
/// `open_cart`) opens a page and changes nothing, and "The price … has been changed." after it
/// was measured with the 1.5B model as an answer the description's "changed" backed.
const AROUND: [&str; 4] = ["where", "which", "whose", "then"];

/// `description` up to where it stops saying what the tool does: a `;`, a `(`, or one of
/// [`AROUND`].
fn what_it_does(description: &str) -> &str {
    let mut end = description.find([';', '(']).unwrap_or(description.len());
    let mut at = 0;
    for word in description.split_inclusive(|c: char| !c.is_alphabetic()) {
        let bare = word.trim_end_matches(|c: char| !c.is_alphabetic());
        if AROUND.iter().any(|a| bare.eq_ignore_ascii_case(a)) {
            end = end.min(at);
            break;
        }
        at += word.len();
    }
    &description[..end]
}

/// Whether a tool with these (stemmed) words does what `verb` (a stem) says.
fn backs(verb: &str, words: &[String]) -> bool {
    let kinds: Vec<&str> =
        KINDS.iter().filter(|kind| kind.contains(&verb)).flat_map(|kind| kind.iter().copied()).collect();
    // One stem begins the other when it has four letters or more: `cancell` (of "cancelled", a
    // doubled `l` is kept: "called", "filled") is `cancel`'s, `remov` is `removes`'.
    let matches = |candidate: &str| {
        words.iter().any(|word| {
            word == candidate
                || (candidate.len() >= 4 && word.starts_with(candidate))
                || (word.len() >= 4 && candidate.starts_with(word.as_str()))
        })
    };
    matches(verb) || kinds.into_iter().any(matches)
}

/// The first sentence of `answer` (to its first `.`, `!` or `?` followed by a space, or its
/// first line), at most 120 characters: what a note quotes of an answer the done check took
/// for a claim.
pub(crate) fn first_sentence(answer: &str) -> String {
    let answer = answer.trim();
    let line = answer.lines().next().unwrap_or_default();
    let end = line
        .char_indices()
        .find(|&(at, c)| matches!(c, '.' | '!' | '?') && line[at + c.len_utf8()..].starts_with(' '))
        .map_or(line.len(), |(at, c)| at + c.len_utf8());
    let sentence = &line[..end];
    match sentence.char_indices().nth(120) {
        Some((cut, _)) => format!("{}…", &sentence[..cut]),
        None => sentence.to_string(),
    }
}

/// The first claim of a finished action in `answer` that no tool of `succeeded` (name,
/// description) backs, as the words that make it (e.g. `has been placed`).
pub(crate) fn unbacked_claim(answer: &str, succeeded: &[(String, String)]) -> Option<String> {
    let words: Vec<Vec<String>> = succeeded.iter().map(|(name, description)| tool_words(name, description)).collect();
    let backed = |participle: &str| {
        let verb = stem(participle);
        if GENERIC.contains(&verb.as_str()) {
            return !words.is_empty();
        }
        words.iter().any(|tool| backs(&verb, tool))
    };
    // A full stop inside a number ends nothing: "$12.00, compared to" is one sentence.
    for sentence in sentences(answer).into_iter().flat_map(|sentence| sentence.split(';')) {
        let raw: Vec<&str> = sentence.split_whitespace().collect();
        // A sentence that opens with a parenthesis or a bracket ("(scripted model) …") does not
        // open with a claim.
        let parenthetical = raw.first().is_some_and(|t| t.starts_with(['(', '[']));
        let tokens: Vec<&str> = raw
            .iter()
            .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric() && c != '\''))
            .filter(|t| !t.is_empty())
            .collect();
        // "I've added" reads as "I added".
        let lower: Vec<String> = tokens
            .iter()
            .map(|t| match t.to_lowercase().as_str() {
                "i've" => "i".to_string(),
                "we've" => "we".to_string(),
                other => other.to_string(),
            })
            .collect();
        for (n, token) in tokens.iter().enumerate() {
            if !is_participle(token) {
                continue;
            }
            let before = &lower[..n];
            if before.iter().any(|w| NEGATIONS.contains(&w.as_str()) || w.ends_with("n't")) {
                continue;
            }
            let last = |k: usize| before.len().checked_sub(k).map(|i| before[i].as_str());
            let skip_adverbs = {
                let mut k = 1;
                while matches!(last(k), Some("just" | "now" | "also" | "already" | "successfully" | "all")) {
                    k += 1;
                }
                k
            };
            let claim = match (last(skip_adverbs), last(skip_adverbs + 1)) {
                (Some("been"), Some("has" | "have" | "had")) => true,
                (Some("i" | "we"), _) | (Some("have" | "has"), Some("i" | "we")) => true,
                // "The mug was added to your cart."
                (Some("was" | "were"), _) => true,
                // Someone else's action: "the items you added".
                (Some("you" | "they" | "he" | "she"), _) => false,
                _ if n == 0 => !parenthetical,
                _ => {
                    lower.get(n + 1).is_some_and(|w| w == "successfully")
                        || before.last().is_some_and(|w| w == "successfully")
                        // "Item 'buy milk' added to the to-do list." (measured with the 1.5B model)
                        || lower
                            .get(n + 1)
                            .is_some_and(|w| matches!(w.as_str(), "to" | "from" | "into" | "onto" | "off"))
                }
            };
            if claim && !backed(token) {
                let from = n.saturating_sub(2);
                return Some(tokens[from..=n].join(" "));
            }
        }
    }
    None
}

/// Whether `answer` only repeats `request` (a small model's way of answering an order it did not
/// act on: "Empty my cart." to "Empty my cart."): the same words, case, spaces and punctuation
/// aside.
pub(crate) fn echoes(answer: &str, request: &str) -> bool {
    let (answer, request) = (plain_words(answer), plain_words(request));
    !answer.is_empty() && answer == request
}

/// Whether `answer` starts by repeating `message` (its first twelve words, or all of them when
/// fewer), or is all of it the start of `message` ([`NOTE_WORDS`] words at least): an answer
/// made of a message Tether wrote to the model. Measured with the 1.5B model, after the value
/// check's refusal "Not run: the user's message does not ask for id "c2". …": the answer "Not
/// run: the user's message does not ask for id".
pub(crate) fn repeats(answer: &str, message: &str) -> bool {
    let (answer, message) = (plain_words(answer), plain_words(message));
    let head = &message[..message.len().min(12)];
    !head.is_empty() && (answer.starts_with(head) || (answer.len() >= NOTE_WORDS && message.starts_with(&answer)))
}

/// Whether `answer` is one of `earlier` (the conversation's answers before this run) again: word
/// for word ([`plain_words`], so case, spaces and punctuation aside), or in other words that say
/// the same: the same [`gist`]. Measured with the 1.5B model in the calendar's conversation: after
/// "Cancel lunch with Ana." and a `cancel_event` that did it, the answer was "The dentist
/// appointment is on Tuesday at 15:00.", its answer to the conversation's first message, and so
/// on for the next four requests it acted on; in three of the storefront's four long
/// conversations, "What's in my cart?" after a `cart_view` that listed ten items was answered
/// "The cart is empty.", its answer to "Empty my cart." hours of tokens before ("The cart is now
/// empty."). Answers of fewer than [`NOTE_WORDS`] words ("Done.") are not compared.
pub(crate) fn copies_earlier(answer: &str, earlier: &[String]) -> bool {
    let words = plain_words(answer);
    if words.len() < NOTE_WORDS {
        return false;
    }
    let said = gist(answer);
    earlier.iter().any(|e| plain_words(e) == words || (!said.is_empty() && gist(e) == said))
}

/// Whether `text` (an answer still streaming) may become a copy of one of `earlier`
/// ([`copies_earlier`]), so it is not shown yet: it is so far the start of one, word for word, or
/// all it says so far one of them says too (its [`gist`] is part of one's).
pub(crate) fn may_copy(text: &str, earlier: &[String]) -> bool {
    let said = gist(text);
    earlier.iter().any(|e| may_echo(text, e) || (!said.is_empty() && said.is_subset(&gist(e))))
}

/// Words that say nothing of what a sentence is about: a listed action that shares only these
/// with the message is not taken for one of the message's
/// ([`message_actions`](crate::questions::message_actions)), and two answers that differ only in
/// them say the same ([`gist`]).
const FUNCTION_WORDS: [&str; 23] = [
    "the", "and", "for", "you", "your", "our", "too", "now", "all", "but", "then", "with", "this", "that", "these",
    "those", "please", "from", "into", "onto", "also", "them", "its",
];

/// The stems of the words of `text` that may name an action or a thing: three letters or more,
/// not [`FUNCTION_WORDS`].
pub(crate) fn content_stems(text: &str) -> Vec<String> {
    plain_words(text)
        .into_iter()
        .filter(|word| word.chars().count() >= 3 && !FUNCTION_WORDS.contains(&word.as_str()))
        .map(|word| stem(&word))
        .collect()
}

/// What `text` says, as a set: its [`content_stems`] and every number in it ("The cart is now
/// empty." and "The cart is empty." have one gist; "3 items" and "5 items" do not).
pub(crate) fn gist(text: &str) -> BTreeSet<String> {
    let numbers = plain_words(text).into_iter().filter(|word| word.chars().any(|c| c.is_ascii_digit()));
    content_stems(text).into_iter().chain(numbers).collect()
}

/// Whether `text` (an answer still streaming) is so far the start of `request`, word for word:
/// it may become an echo, so it is not shown yet.
pub(crate) fn may_echo(text: &str, request: &str) -> bool {
    let (text, request) = (plain_words(text), plain_words(request));
    !text.is_empty() && request.starts_with(&text)
}

/// The words of `text`, lowercased: split at anything not a letter or digit.
pub(crate) fn plain_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// Pieces of the reminder's frame that no answer to a user has: "(The request was: "…". Done so
/// far: cart_add {…}. …)" (measured: the 1.5B model answered "The request was: 'Please put 3
/// black T-shirts in my cart.' Done so far: cart_add {…}").
const NOTE_MARKERS: [&str; 2] = ["done so far:", "the request was: "];

/// How many words in a row an answer sentence must share with a note Tether wrote to the model
/// for [`strip_notes`] to take it for a repetition of that note.
const NOTE_WORDS: usize = 4;

/// Whether `sentence` repeats a note Tether wrote to the model (`notes`: the reminder after a
/// result, the loop guard's and hooks' messages): it shares [`NOTE_WORDS`] words in a row with
/// one. Measured with the 1.5B model: after a refused booking it answered "The request was
/// refused. Do not try it again or another way; tell the user." — Tether's words to it.
pub(crate) fn repeats_note(sentence: &str, notes: &[String]) -> bool {
    // The reminder's frame around the user's words and the run's calls, in any case.
    let lower = sentence.to_lowercase();
    if NOTE_MARKERS.iter().any(|marker| lower.contains(marker)) {
        return true;
    }
    let words = plain_words(sentence);
    if words.len() < NOTE_WORDS {
        return false;
    }
    notes.iter().any(|note| {
        let note = plain_words(note);
        note.windows(NOTE_WORDS).any(|gram| words.windows(NOTE_WORDS).any(|w| w == gram))
    })
}

/// How the list of what a run did opens, in the answer Tether writes when the model gave none
/// (`RunState::summary`).
pub(crate) const WHAT_WAS_DONE: &str = "What was done:";

/// `answer` without its sentences that repeat a note Tether wrote to the model
/// ([`repeats_note`]); `None` when it has none. An answer that opens as Tether's list of what was
/// done is all Tether's (measured: the 1.5B model, having read such a list as an earlier answer
/// of the conversation, answered a later request with "What was done:\n- open_email {…}: not
/// done" and no call).
pub(crate) fn strip_notes(answer: &str, notes: &[String]) -> Option<String> {
    let opening = answer.trim_start();
    if opening.get(..WHAT_WAS_DONE.len()).is_some_and(|head| head.eq_ignore_ascii_case(WHAT_WAS_DONE)) {
        return Some(String::new());
    }
    let mut kept = String::new();
    let mut stripped = false;
    for (n, sentence) in sentences(answer).into_iter().enumerate() {
        if repeats_note(sentence, notes) {
            if n == 0 {
                // An answer that opens with a note is all Tether's: what follows is what the note
                // framed, cut anywhere (measured: "The app shows the user now, changed since the
                // request: The inbox: [{'from':'Ana Ruiz <ana@example.com>', …", the app-state
                // note with its data, cut at the first "." of an address).
                return Some(String::new());
            }
            stripped = true;
        } else {
            kept.push_str(sentence);
        }
    }
    stripped.then(|| kept.trim().to_string())
}

/// `answer` without the status tags Tether puts before a failed tool result for the model
/// (`[denied] `, `[error] `, … : [`ToolOutput::for_model`](crate::ToolOutput::for_model)); `None` when it has
/// none. Measured with the 1.5B model: after a booking the travel example's policy hook refused,
/// it answered with that result as written, "[denied] Blocked by policy: first class needs a
/// manager's approval. Book tourist instead." The hook's words stay (they tell the user why);
/// Tether's tag goes.
pub(crate) fn strip_status_tags(answer: &str) -> Option<String> {
    let mut kept = String::with_capacity(answer.len());
    let mut rest = answer;
    let mut stripped = false;
    while let Some(at) = rest.find('[') {
        kept.push_str(&rest[..at]);
        let tag = rest[at + 1..]
            .split_once(']')
            .filter(|(name, _)| tether_protocol::ResultStatus::parse(name).is_some_and(|status| !status.is_ok()));
        match tag {
            Some((_, after)) => {
                stripped = true;
                rest = after.strip_prefix(' ').unwrap_or(after);
            }
            None => {
                kept.push('[');
                rest = &rest[at + 1..];
            }
        }
    }
    kept.push_str(rest);
    stripped.then(|| kept.trim().to_string())
}

/// Where the complete sentences of `text`, a text still being written, end (after the last
/// one's end mark): a `.`, `!` or `?` ends a sentence once a space follows it (`$12.` may go on
/// as `$12.00`), a newline at once. `None` when no sentence is complete yet.
pub(crate) fn complete_sentences(text: &str) -> Option<usize> {
    let mut end = None;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let followed = chars.peek().is_some_and(|(_, next)| next.is_whitespace());
        if c == '\n' || (matches!(c, '.' | '!' | '?') && followed) {
            end = Some(i + c.len_utf8());
        }
    }
    end
}

/// `text` cut after each `.`, `!`, `?` or newline (with the spaces that follow): the pieces
/// join back into `text`.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        // A full stop inside a word (`$12.00`, `carla@example.com`) ends nothing.
        let ends =
            c == '\n' || (matches!(c, '.' | '!' | '?') && chars.peek().is_none_or(|(_, next)| next.is_whitespace()));
        if ends {
            let mut end = i + c.len_utf8();
            while let Some(&(j, next)) = chars.peek() {
                if !next.is_whitespace() {
                    break;
                }
                end = j + next.len_utf8();
                chars.next();
            }
            out.push(&text[start..end]);
            start = end;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// What the model reads after an answer that only repeated the request.
pub(crate) fn echo_nudge() -> String {
    format!(
        "{}loop guard] Your answer only repeats the user's message. If it asks for an action, call the tool \
         that does it now; otherwise answer it.",
        crate::HOOK_LABEL
    )
}

/// What the model reads after an answer with an unbacked claim, after the claim's words.
pub(crate) const NUDGE: &str = "but no tool call in this request did that, so it did not happen. If the user asked \
                                for it, call the tool that does it now (if it is not in the list, first open the page \
                                that has it). If it cannot be done, tell the user so.";

/// [`NUDGE`]'s first sentence, which [`nudge`] keeps when it can name the tools that do what the
/// claim says.
pub(crate) const NUDGE_NOT_DONE: &str = "but no tool call in this request did that, so it did not happen.";

/// What the model reads after an answer with an unbacked `claim`, naming the tools it is offered
/// that do what the claim says (`backers`, [`backers`]) when there are any: measured with the 1.5B
/// model on a calendar, "Cancel lunch with Ana." was answered "Lunch with Ana has been canceled."
/// with no call, and again after the general note; the tool's own name is a step it can take.
pub(crate) fn nudge(claim: &str, backers: &[&str]) -> String {
    match backers {
        [] => format!("{}loop guard] Your answer says \"{claim}\", {NUDGE}", crate::HOOK_LABEL),
        names => format!(
            "{}loop guard] Your answer says \"{claim}\", {NUDGE_NOT_DONE} {} does that: if the user asked for it, \
             call it now; if it cannot be done, tell the user so.",
            crate::HOOK_LABEL,
            names.join(" or ")
        ),
    }
}

/// The tools of `offered` (name, description) that do what the last word of `claim` (a
/// participle, as [`unbacked_claim`] gives it) says, at most two: the ones [`nudge`] names.
/// More than two name nothing (a claim as general as "updated" fits many tools).
pub(crate) fn backers<'a>(claim: &str, offered: &[(&'a str, &str)]) -> Vec<&'a str> {
    let Some(participle) = claim.split_whitespace().last() else { return Vec::new() };
    let verb = stem(participle);
    if GENERIC.contains(&verb.as_str()) {
        return Vec::new();
    }
    let found: Vec<&str> = offered
        .iter()
        .filter(|(name, description)| backs(&verb, &tool_words(name, description)))
        .map(|(name, _)| *name)
        .collect();
    if found.len() > 2 { Vec::new() } else { found }
}

/// What the model reads after an answer to a question (a run offered only the tools that change
/// nothing) with an unbacked `claim`: a small model asked "What's in my cart?" late in a
/// conversation answered with what earlier requests did ("The red mug has been added…").
pub(crate) fn question_nudge(claim: &str) -> String {
    format!("{}loop guard] Your answer says \"{claim}\", {QUESTION_NUDGE}", crate::HOOK_LABEL)
}

/// [`question_nudge`]'s words after the claim.
pub(crate) const QUESTION_NUDGE: &str = "but the user only asked a question and nothing was done in this request. \
                                         Answer the question itself, from the app's state and the tool results, and \
                                         do not say that anything was done.";

/// What a question's answer becomes when it claims an action again after [`question_nudge`]:
/// not its other sentences either (measured with the 1.5B model: "What's in my cart?" got "The red
/// mug has been added to your cart." and then the same with "The total cost is $12.00.", wrong).
pub(crate) const QUESTION_WITHDRAWN: &str = "I could not answer that: the answer written said something was done, and \
                                             nothing was done in this request. (Tether withheld it.)";

/// What is delivered instead of an answer that makes an unbacked claim again after [`nudge`]:
/// the claim is not repeated to the user (the conversation keeps what the model wrote).
pub(crate) const WITHDRAWN: &str = "I could not do that: no tool call in this request did it, so nothing was done. (Tether withheld an answer that said otherwise.)";

/// [`WITHDRAWN`] for a run whose other calls did something: it says what (`done`, the run's
/// "What was done:" list), never that nothing was done.
pub(crate) fn withdrawn(done: Option<&str>) -> String {
    match done {
        None => WITHDRAWN.to_string(),
        Some(done) => format!(
            "I could not do that: no tool call in this request did it. (Tether withheld an answer that said otherwise.) {done}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tethers_status_tags_leave_an_answer_and_the_words_after_them_stay() {
        assert_eq!(
            strip_status_tags(
                "[denied] Blocked by policy: first class needs a manager's approval. Book tourist instead."
            ),
            Some("Blocked by policy: first class needs a manager's approval. Book tourist instead.".into())
        );
        assert_eq!(strip_status_tags("It failed: [error] sold out"), Some("It failed: sold out".into()));
        // Brackets that are not a failed call's status stay.
        assert_eq!(strip_status_tags("Your cart [2 items] is ready. [ok] fine"), None);
        assert_eq!(strip_status_tags("[unterminated"), None);
    }

    #[test]
    fn a_full_stop_inside_a_number_ends_no_sentence_and_compared_is_no_claim() {
        let cheaper = "The mug is cheaper, at $12.00, compared to the poster, which costs $15.00.";
        assert_eq!(unbacked_claim(cheaper, &[]), None);
        assert_eq!(unbacked_claim("The mug costs $12.00, added to your cart.", &[]), Some("costs 12.00 added".into()));
        // While the text is still written, "$12." may go on as "$12.00".
        assert_eq!(complete_sentences("The mug is cheaper, at $12."), None);
        assert_eq!(complete_sentences("The mug is cheaper, at $12.00, compared"), None);
        assert_eq!(complete_sentences("Added. The"), Some(6));
        assert_eq!(complete_sentences("Two items:\n- a"), Some(11));
        // "Nothing was done" says the opposite of a claim (measured: the 1.5B model's answer was
        // sent back for it on the calendar, 2026-12-07).
        assert_eq!(unbacked_claim("Nothing was done: the standup is still on Monday.", &[]), None);
    }

    #[test]
    fn sentences_that_repeat_tethers_notes_are_left_out() {
        let notes = vec![format!("(The request was: \"Book it\". {})", crate::model::REMINDER_AFTER_REFUSAL)];
        let answer = "Sorry, I can't book first class on that train. You need tourist instead. Please try again or \
                      another way.";
        assert_eq!(
            strip_notes(answer, &notes).as_deref(),
            Some("Sorry, I can't book first class on that train. You need tourist instead.")
        );
        assert_eq!(
            strip_notes("The request was refused. Do not try it again or another way; tell the user.", &notes)
                .as_deref(),
            Some("The request was refused.")
        );
        // Three words in common are a coincidence, not a repetition.
        assert_eq!(strip_notes("Tell the user nothing. Try it again.", &notes), None);
        assert_eq!(sentences("A. B!  C?\nD").concat(), "A. B!  C?\nD");
        assert_eq!(
            sentences("Mail carla@example.com now. It is $12.00."),
            ["Mail carla@example.com now. ", "It is $12.00."]
        );
        let parroted = "The request was: 'Please put 3 black T-shirts in my cart.' Done so far: cart_add {}.";
        assert!(strip_notes(parroted, &notes).is_some_and(|kept| !kept.contains("Done so far")));
    }

    fn tools(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(n, d)| (n.to_string(), d.to_string())).collect()
    }

    #[test]
    fn claims_without_a_tool_are_found() {
        let none = tools(&[]);
        for answer in [
            "Your order has been placed successfully.",
            "The red mug has been updated to $1.00.",
            "Two red mugs have been added to your cart.",
            "I've removed the mug from your cart.",
            "I have emptied your cart.",
            "Added 2 × Red mug to the cart.",
            "Done! The cart was successfully cleared.",
            // Measured with the 1.5B model on the README's to-do example.
            "Item 'buy milk' added to the to-do list.",
            "The milk was removed from your list.",
        ] {
            assert!(unbacked_claim(answer, &none).is_some(), "{answer}");
        }
    }

    #[test]
    fn the_nudge_names_the_tools_offered_that_do_what_the_claim_says() {
        let calendar = [
            ("open_event", "Show an event with its place."),
            ("add_event", "Put a new event on the calendar."),
            ("move_event", "Change the day or the time of an event."),
            ("cancel_event", "Cancel an event and take it off the calendar."),
        ];
        let claim = unbacked_claim("Lunch with Ana has been canceled.", &tools(&[])).expect("a claim");
        assert_eq!(backers(&claim, &calendar), ["cancel_event"]);
        let said = nudge(&claim, &backers(&claim, &calendar));
        assert!(
            said.contains("\"has been canceled\", but no tool call") && said.contains("cancel_event does that"),
            "{said}"
        );
        assert_eq!(backers("has been moved", &calendar), ["move_event"]);
        assert!(backers("has been starred", &calendar).is_empty(), "no tool's words");
        assert_eq!(backers("I added", &calendar), ["add_event"]);
        // "Done" and its kin say nothing of what; a claim that fits more than two tools names none.
        assert!(backers("Done", &calendar).is_empty());
        let many = [("a_update", ""), ("b_update", ""), ("c_update", "")];
        assert!(backers("has been updated", &many).is_empty());
        assert!(nudge("has been updated", &[]).contains(NUDGE));
        assert_eq!(
            first_sentence(" The inbox now shows all emails as read. Anything else?"),
            "The inbox now shows all emails as read."
        );
        assert_eq!(first_sentence("Done!\nYour inbox is all read."), "Done!");
        assert_eq!(first_sentence("Order T-1001 at $12.50 is placed"), "Order T-1001 at $12.50 is placed");
        assert_eq!(first_sentence(&"a".repeat(130)).chars().count(), 121);
    }

    #[test]
    fn questions_negations_and_descriptions_claim_nothing() {
        let none = tools(&[]);
        for answer in [
            "The black T-shirt costs $20.00.",
            "Your cart has 2 items: 2 × Black T-shirt.",
            "The order was not placed: you declined it.",
            "The mug could not be added because it is out of stock.",
            "I couldn't find a tool that changes prices, so the price has not been changed.",
            "Based on the page, the poster is 50 × 70 cm.",
            "It is priced at $12.00 and listed under mugs.",
            "Would you like me to add it?",
            "(scripted model) I only understand simple requests.",
            "These are the items you added to the list: milk.",
            "",
        ] {
            assert_eq!(unbacked_claim(answer, &none), None, "{answer}");
        }
    }

    #[test]
    fn a_tool_that_succeeded_backs_claims_of_its_kind() {
        let add = tools(&[("cart_add", "Add a product to the shopping cart.")]);
        assert_eq!(unbacked_claim("Two red mugs have been added to your cart.", &add), None);
        let checkout = tools(&[("checkout", "Place the order and pay for everything in the cart.")]);
        assert_eq!(unbacked_claim("Your order has been placed.", &checkout), None);
        assert_eq!(unbacked_claim("I checked out your cart.", &checkout), None);
        let clear = tools(&[("cart_clear", "Empty the cart.")]);
        assert_eq!(unbacked_claim("I have emptied your cart.", &clear), None);
        assert_eq!(unbacked_claim("Your cart has been cleared.", &clear), None);
        let navigate = tools(&[("navigate", "Go to a page of the shop: home, cart, or a product page.")]);
        assert_eq!(unbacked_claim("I opened the page of the blue mug.", &navigate), None);
        // A tool of another kind does not back the claim.
        let view = tools(&[("product_view", "Open a product's page; the result has its price and description.")]);
        assert_eq!(
            unbacked_claim("The red mug has been updated to $1.00.", &view).as_deref(),
            Some("has been updated")
        );
        assert!(unbacked_claim("Your order has been placed.", &add).is_some());
        // "Done." says nothing of what: any tool that succeeded backs it, none does not.
        assert_eq!(unbacked_claim("Done.", &add), None);
        // A doubled consonant kept by the stem: "cancelled" is cancel's.
        let cancel = tools(&[("cancel_event", "Cancel an event and take it off the calendar.")]);
        assert_eq!(unbacked_claim("Lunch with Ana has been cancelled.", &cancel), None);
        assert_eq!(unbacked_claim("Lunch with Ana was canceled.", &cancel), None);
        assert_eq!(unbacked_claim("Done! I have completed your request.", &[]).as_deref(), Some("Done"));
        // What the description says of what is around the tool backs nothing.
        let open_cart =
            tools(&[("open_cart", "Open the cart page, where the cart can be seen, changed and checked out.")]);
        assert_eq!(
            unbacked_claim("The price of the red mug has been changed to $1.00.", &open_cart).as_deref(),
            Some("has been changed")
        );
        assert_eq!(unbacked_claim("I opened the cart page.", &open_cart), None);
        let view = tools(&[("product_view", "Open a product's page; then it can be added to the cart.")]);
        assert!(unbacked_claim("The blue mug has been added to your cart.", &view).is_some());
        assert_eq!(what_it_does("Add a product to the cart (by its id)."), "Add a product to the cart ");
        assert_eq!(
            what_it_does("Go to a page: home, cart, or a product page."),
            "Go to a page: home, cart, or a product page."
        );
    }

    #[test]
    fn an_answer_that_repeats_the_request_is_an_echo() {
        assert!(echoes("Empty my cart.", "Empty my cart."));
        assert!(echoes("go back to the home page", "Go back to the home page."));
        assert!(!echoes("Your cart is empty.", "Empty my cart."));
        assert!(!echoes("", ""));
        assert!(may_echo("Go back", "Go back to the home page."));
        let refusal =
            "Not run again: cart_add was already called with these arguments in this request. Its result then: …";
        assert!(repeats(
            "Not run again: cart_add was already called with these arguments in this request. Its result then: added 1",
            refusal
        ));
        assert!(!repeats("I added the mug.", refusal));
        // All of the answer is the start of the refusal (the model stopped early); fewer than
        // four words is not taken for it.
        let value = "Not run: the user's message does not ask for id \"c2\". Never say it was done.";
        assert!(repeats("Not run: the user's message does not ask for id", value));
        assert!(!repeats("Not run.", value));
        assert!(!repeats("The user's message does not ask for it.", value));
        assert!(!may_echo("Going", "Go back to the home page."));
    }

    #[test]
    fn stems_meet() {
        for (a, b) in [
            ("placed", "place"),
            ("removed", "remove"),
            ("emptied", "empty"),
            ("stopped", "stop"),
            ("added", "add"),
            ("paid", "pay"),
        ] {
            assert_eq!(stem(a), stem(b), "{a} {b}");
        }
    }
}

//! Keeping every request inside the model's context window.
//!
//! A conversation only grows; a model's window does not. Before each model turn the loop
//! estimates the request ([`estimate_tokens`]) and, when it would not fit the model's prompt
//! budget ([`ChatModel::prompt_budget`](crate::ChatModel::prompt_budget)), leaves the oldest
//! runs of the conversation out ([`fit`]): whole runs (a user's message and everything that
//! answered it), from the oldest, until the request takes at most [`TARGET_SHARE`] of the budget,
//! so that the next turns do not cut again at once and a model server's prompt cache keeps the
//! shortened conversation. A note in their place says how many messages were left out. The run
//! in progress, the system prompt, the tools and the app state are always sent whole; a run that
//! does not fit alone is refused with a clear error before anything is sent. The conversation the
//! host keeps is the shortened one, so the writes of a long session stop growing too.

use tether_protocol::ToolSpec;

use crate::HOOK_LABEL;
use crate::model::{ChatMessage, NoteKind};

/// After leaving runs out, a request takes at most this share of the budget (in percent).
pub(crate) const TARGET_SHARE: u32 = 60;

/// The label of the note that stands for the messages left out.
const NOTE_LABEL: &str = "context] ";

/// A conservative estimate of the tokens a request takes: 1 per 3 bytes of text (English prose
/// is nearer 4, JSON and code nearer 3), 8 per message for the chat template, and the tools'
/// schemas as JSON (a prompt lists them shorter). Estimating high only shortens sooner.
pub(crate) fn estimate_tokens(messages: &[ChatMessage], tools: &[ToolSpec]) -> u32 {
    let text: usize = messages.iter().map(message_bytes).sum();
    let tools: usize =
        tools.iter().map(|tool| tool.name.len() + tool.description.len() + tool.parameters.to_string().len()).sum();
    u32::try_from((text + tools) / 3 + 8 * messages.len()).unwrap_or(u32::MAX)
}

fn message_bytes(message: &ChatMessage) -> usize {
    match message {
        ChatMessage::System { content } | ChatMessage::User { content } | ChatMessage::Note { content, .. } => {
            content.len()
        }
        ChatMessage::Assistant { content, tool_calls } => {
            content.len() + tool_calls.iter().map(|c| c.name.len() + c.arguments.to_string().len() + 16).sum::<usize>()
        }
        ChatMessage::Tool { name, content, .. } => name.len() + content.len() + 16,
    }
}

/// What [`fit`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    /// The request fits as it is.
    Fits,
    /// `dropped` messages of the history were left out (in all, with earlier cuts).
    Shortened { dropped: usize },
    /// Even without any history the request needs `needed` tokens.
    TooLong { needed: u32 },
}

/// Leaves the oldest runs of `messages[..*run_start]` (the history before the run in progress)
/// out when `fixed` (the tokens of what is sent besides the conversation: system prompt, tools,
/// app state) and the conversation together exceed `budget`. `run_start` moves with the cut.
pub(crate) fn fit(messages: &mut Vec<ChatMessage>, run_start: &mut usize, fixed: u32, budget: u32) -> Fit {
    let total = |messages: &[ChatMessage]| fixed.saturating_add(estimate_tokens(messages, &[]));
    if total(messages) <= budget {
        return Fit::Fits;
    }
    let run_alone = total(&messages[*run_start..]);
    if run_alone > budget {
        return Fit::TooLong { needed: run_alone };
    }
    let target = budget / 100 * TARGET_SHARE;
    // Cut at the start of a run (a user's own message), the first one after which it fits.
    let starts: Vec<usize> = (1..*run_start).filter(|&i| is_run_start(&messages[i])).chain([*run_start]).collect();
    let cut = starts.iter().copied().find(|&at| total(&messages[at..]) <= target).unwrap_or(*run_start);
    Fit::Shortened { dropped: cut_at(messages, run_start, cut) }
}

/// Leaves out about half of the history (a provider refused a request as too long although the
/// estimate said it fits). Returns the messages left out in all; 0 when there was no history.
pub(crate) fn halve(messages: &mut Vec<ChatMessage>, run_start: &mut usize) -> usize {
    // A note of an earlier cut is not history of its own.
    let first = usize::from(messages.first().is_some_and(|m| left_out(m).is_some()));
    if *run_start <= first {
        return 0;
    }
    let half = first + (*run_start - first).div_ceil(2);
    let cut = (half..*run_start).find(|&i| is_run_start(&messages[i])).unwrap_or(*run_start);
    cut_at(messages, run_start, cut)
}

/// Removes `messages[..cut]`, puts a note saying how many messages are left out in their place,
/// and moves `run_start`. Returns the messages left out in all (with those of an earlier note).
fn cut_at(messages: &mut Vec<ChatMessage>, run_start: &mut usize, cut: usize) -> usize {
    // An earlier note is cut too; the messages it stood for count.
    let dropped = match messages.first().and_then(left_out) {
        Some(earlier) => earlier + cut - 1,
        None => cut,
    };
    messages.drain(..cut);
    messages.insert(0, note(dropped));
    *run_start = *run_start - cut + 1;
    dropped
}

/// The note that stands for `dropped` messages left out.
fn note(dropped: usize) -> ChatMessage {
    ChatMessage::note(
        NoteKind::Hook,
        format!(
            "{HOOK_LABEL}{NOTE_LABEL}{dropped} earlier messages of this conversation were left out to fit the model's \
             context window."
        ),
    )
}

/// How many messages a note says were left out (`None`: not a note).
fn left_out(message: &ChatMessage) -> Option<usize> {
    let ChatMessage::Note { kind: NoteKind::Hook, content } = message else { return None };
    let rest = content.strip_prefix(HOOK_LABEL)?.strip_prefix(NOTE_LABEL)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// Whether `message` begins a run: a user's own message (not one the loop wrote).
fn is_run_start(message: &ChatMessage) -> bool {
    message.is_users_own()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation(runs: usize) -> Vec<ChatMessage> {
        let mut messages = Vec::new();
        for n in 0..runs {
            messages.push(ChatMessage::User { content: format!("request {n} {}", "x".repeat(290)) });
            messages.push(ChatMessage::Assistant {
                content: format!("answer {n} {}", "y".repeat(290)),
                tool_calls: Vec::new(),
            });
        }
        messages
    }

    #[test]
    fn the_oldest_runs_go_first_whole_and_a_note_says_how_many() {
        let mut messages = conversation(10);
        let mut run_start = 18;
        let before = estimate_tokens(&messages, &[]);
        assert!(before > 1000, "{before}");
        let fit1 = fit(&mut messages, &mut run_start, 100, 1000);
        let Fit::Shortened { dropped } = fit1 else { panic!("{fit1:?}") };
        assert_eq!(dropped % 2, 0, "whole runs");
        assert!(estimate_tokens(&messages, &[]) + 100 <= 600, "down to the target share");
        assert!(matches!(&messages[1], ChatMessage::User { content } if content.starts_with("request ")));
        assert_eq!(left_out(&messages[0]), Some(dropped));
        // The run in progress is where it was, whole.
        assert!(matches!(&messages[run_start], ChatMessage::User { content } if content.starts_with("request 9")));
        assert_eq!(messages.len() - run_start, 2);
        // Again, later: the count adds up; what fits is left alone.
        assert_eq!(fit(&mut messages, &mut run_start, 100, 1000), Fit::Fits);
        let total = halve(&mut messages, &mut run_start);
        assert!(total > dropped);
        assert_eq!(left_out(&messages[0]), Some(total));
    }

    #[test]
    fn a_run_that_does_not_fit_alone_is_refused_and_nothing_is_cut() {
        let mut messages = conversation(3);
        let mut run_start = 4;
        let before = messages.clone();
        let fit1 = fit(&mut messages, &mut run_start, 100, 150);
        assert!(matches!(fit1, Fit::TooLong { needed } if needed > 150), "{fit1:?}");
        assert_eq!(messages, before);
        assert_eq!(run_start, 4);
    }
}

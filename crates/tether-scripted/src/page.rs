//! A page for tests: the tools it offers, the state it shares, what each call returns, and
//! every call it ran.

use std::sync::Mutex;

use serde_json::Value;
use tether_agent::{BoxFuture, CallRef, ToolHost, ToolOutput};
use tether_protocol::{ContextEntry, ResultStatus, ToolSpec};

/// What a call returns, from the tool's name and arguments.
type Answer = Box<dyn Fn(&str, &Value) -> ToolOutput + Send + Sync>;

/// What a call's arguments are checked with before it runs (`Err`: the call's result instead).
type Check = Box<dyn Fn(&str, &Value) -> Result<(), ToolOutput> + Send + Sync>;

/// A [`ToolHost`] for tests: offers its tools and shares its state as they are, checks a call's
/// arguments with [`checking`](Page::checking) (by default every call passes), answers it with
/// [`answering`](Page::answering) (by default `ok` and "`<name>` done"), and records every call it
/// ran, in order ([`ran`](Page::ran)). A call refused by the check is not recorded.
pub struct Page {
    tools: Vec<ToolSpec>,
    context: Mutex<Vec<ContextEntry>>,
    answer: Answer,
    check: Check,
    ran: Mutex<Vec<(String, Value)>>,
}

impl Page {
    /// A page with `tools`, no shared state, every call passing and answered "`<name>` done".
    pub fn new(tools: Vec<ToolSpec>) -> Page {
        Page {
            tools,
            context: Mutex::new(Vec::new()),
            answer: Box::new(|name, _| ToolOutput::new(ResultStatus::Ok, format!("{name} done"))),
            check: Box::new(|_, _| Ok(())),
            ran: Mutex::new(Vec::new()),
        }
    }

    /// Answers each call with `answer(name, arguments)`.
    pub fn answering(mut self, answer: impl Fn(&str, &Value) -> ToolOutput + Send + Sync + 'static) -> Page {
        self.answer = Box::new(answer);
        self
    }

    /// Checks each call with `check(name, arguments)` before it runs, as a page's executor
    /// validates; an `Err` is the call's result, and the call does not run.
    pub fn checking(mut self, check: impl Fn(&str, &Value) -> Result<(), ToolOutput> + Send + Sync + 'static) -> Page {
        self.check = Box::new(check);
        self
    }

    /// Shares `entries` as the page's state.
    pub fn with_context(self, entries: Vec<ContextEntry>) -> Page {
        *self.context.lock().expect("page context") = entries;
        self
    }

    /// The calls that ran, in order: the tool's name and its arguments.
    pub fn ran(&self) -> Vec<(String, Value)> {
        self.ran.lock().expect("page calls").clone()
    }

    /// The names of the tools whose calls ran, in order.
    pub fn ran_names(&self) -> Vec<String> {
        self.ran().into_iter().map(|(name, _)| name).collect()
    }
}

impl ToolHost for Page {
    fn tools(&self) -> Vec<ToolSpec> {
        self.tools.clone()
    }

    fn context(&self) -> Vec<ContextEntry> {
        self.context.lock().expect("page context").clone()
    }

    fn check(&self, name: &str, args: &Value) -> Result<(), ToolOutput> {
        (self.check)(name, args)
    }

    fn execute<'a>(&'a self, call: CallRef<'a>, args: Value) -> BoxFuture<'a, ToolOutput> {
        let output = (self.answer)(call.name, &args);
        self.ran.lock().expect("page calls").push((call.name.to_string(), args));
        Box::pin(async move { output })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_page_answers_and_records_each_call_it_runs_and_none_its_check_refuses() {
        let page = Page::new(vec![ToolSpec::new("cart_add", "Add a product.")])
            .checking(|name, args| match args.get("n") {
                Some(n) if !n.is_u64() => {
                    Err(ToolOutput::new(ResultStatus::InvalidArgs, format!("Validation args \"{name}\": /n")))
                }
                _ => Ok(()),
            })
            .answering(|name, args| ToolOutput::new(ResultStatus::Ok, format!("{name} {args}")));
        let (run, call) = ("r1".into(), "c1".into());
        let at = CallRef { run_id: &run, call_id: &call, name: "cart_add" };
        assert_eq!(
            page.check("cart_add", &serde_json::json!({"n": "two"})).unwrap_err().status,
            ResultStatus::InvalidArgs
        );
        let output = page.execute(at, serde_json::json!({"n": 2})).await;
        assert_eq!(output.content, "cart_add {\"n\":2}");
        assert_eq!(page.ran(), [("cart_add".to_string(), serde_json::json!({"n": 2}))]);
        assert_eq!(page.ran_names(), ["cart_add"]);
    }
}

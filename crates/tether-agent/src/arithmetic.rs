//! Numbers in an answer that nothing showed: the arithmetic check
//! ([`AgentLoop::with_arithmetic_check`](crate::AgentLoop::with_arithmetic_check)).
//!
//! A small model does arithmetic badly in its head (measured with the 1.5B model on the
//! storefront: three $15.00 posters came to $108, $30, $120 and $180; a $24.00 cart plus a $12.00
//! mug to $26 and $62), but writes the expression right when asked for it alone (`15 * 3`,
//! `24 + 12`). An answer with a number that appears nowhere the model could read it is checked:
//! the model writes the arithmetic that answers the message, under a schema, and Tether works it
//! out ([`evaluate`]).

/// The numbers written in `text`, in order: runs of digits with at most one decimal point between
/// digits, commas between groups of three digits read as thousands (`1,200.50`), a sign left out.
pub(crate) fn numbers(text: &str) -> Vec<f64> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        if !chars[at].is_ascii_digit() {
            at += 1;
            continue;
        }
        let mut number = String::new();
        let mut point = false;
        while at < chars.len() {
            let c = chars[at];
            let digit_after = chars.get(at + 1).is_some_and(char::is_ascii_digit);
            if c.is_ascii_digit() {
                number.push(c);
            } else if c == '.' && !point && digit_after {
                point = true;
                number.push(c);
            } else if c == ','
                && !point
                && chars.get(at + 1..at + 4).is_some_and(|group| group.iter().all(char::is_ascii_digit))
                && !chars.get(at + 4).is_some_and(char::is_ascii_digit)
            {
                // A thousands separator: left out.
            } else {
                break;
            }
            at += 1;
        }
        if let Ok(value) = number.parse::<f64>() {
            out.push(value);
        }
    }
    out
}

/// Whether `a` and `b` are one number as an answer writes it (to the cent).
pub(crate) fn same(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.005
}

/// The numbers of `answer` that none of `shown` is ([`same`]).
pub(crate) fn unshown(answer: &str, shown: &[f64]) -> Vec<f64> {
    numbers(answer).into_iter().filter(|n| !shown.iter().any(|s| same(*n, *s))).collect()
}

/// The most characters an expression may have.
const MAX_EXPRESSION: usize = 200;

/// Works out `expression`: numbers (`15.00`, `.5`; a currency sign is left out: `$15.00`), `+ - *
/// /` and brackets. `Err` says what is wrong: a name where a number goes, another sign, an
/// expression that does not read as arithmetic, a division by zero.
pub(crate) fn evaluate(expression: &str) -> Result<f64, String> {
    let written = expression.trim();
    if written.is_empty() {
        return Err("the expression is empty".into());
    }
    if written.chars().count() > MAX_EXPRESSION {
        return Err(format!("the expression is longer than {MAX_EXPRESSION} characters"));
    }
    let plain: String = written.chars().filter(|c| !matches!(c, '$' | '€' | '£' | '¥')).collect();
    if let Some(other) = plain.chars().find(|c| !(c.is_ascii_digit() || " .+-*/()".contains(*c))) {
        return Err(format!("{other:?} is not a number, an operator or a bracket"));
    }
    let value = exmex::eval_str::<f64>(&plain).map_err(|error| format!("it does not read as arithmetic ({error})"))?;
    if value.is_finite() { Ok(value) } else { Err("it divides by zero".into()) }
}

/// Whether `expression` works something out: it has an operator between two numbers (`15 * 3`,
/// not `6` or `-6`).
pub(crate) fn works_out(expression: &str) -> bool {
    numbers(expression).len() >= 2 && expression.trim().chars().skip(1).any(|c| "+-*/".contains(c))
}

/// `value` as an answer would write it: with `decimals` decimals (those of the expression's
/// numbers, at most 2), more when that would round it (`10 / 3` = `3.3333`).
pub(crate) fn written(value: f64, expression: &str) -> String {
    let decimals = expression
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|number| number.split_once('.').map(|(_, fraction)| fraction.len()))
        .max()
        .unwrap_or(0)
        .min(2);
    let text = format!("{value:.decimals$}");
    if text.parse::<f64>().is_ok_and(|back| (back - value).abs() < 1e-9) {
        return text;
    }
    let text = format!("{value:.4}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_as_an_answer_writes_them() {
        assert_eq!(numbers("Three posters cost $45.00."), [45.0]);
        assert_eq!(numbers("2 × Red mug, total $1,224.50; at 15:00"), [2.0, 1224.5, 15.0, 0.0]);
        assert_eq!(numbers("Order T-1001 is 50 × 70 cm."), [1001.0, 50.0, 70.0]);
        assert_eq!(numbers("It ends in 3. Then 4,5 and 1,2345."), [3.0, 4.0, 5.0, 1.0, 2345.0]);
        assert_eq!(numbers("no digits"), Vec::<f64>::new());
    }

    #[test]
    fn an_answers_numbers_that_nothing_showed_are_found() {
        let shown = numbers("Space poster: $15.00. Cart: 2 items, total $24.00.");
        assert_eq!(unshown("Three posters cost $45.00.", &shown), [45.0]);
        assert!(unshown("The poster costs $15 and your cart has 2 items.", &shown).is_empty());
    }

    #[test]
    fn an_expression_is_worked_out_and_what_is_not_arithmetic_is_refused() {
        assert_eq!(evaluate("15 * 3"), Ok(45.0));
        assert_eq!(evaluate("$24.00 + $12.00"), Ok(36.0));
        assert_eq!(evaluate("(2 * 12) + 3 * 15"), Ok(69.0));
        assert!(evaluate("").unwrap_err().contains("empty"));
        assert!(evaluate("e1 + e2").unwrap_err().contains("'e' is not a number"));
        assert!(evaluate("2 ^ 10").unwrap_err().contains("'^'"), "only + - * / and brackets");
        assert!(evaluate("3 -").unwrap_err().contains("does not read as arithmetic"));
        assert!(evaluate("1 / 0").unwrap_err().contains("divides by zero"));
        assert!(evaluate(&"1+".repeat(150)).unwrap_err().contains("longer than"));
        assert!(works_out("15 * 3") && works_out("24.00 + 12.00"));
        assert!(!works_out("6") && !works_out("-6") && !works_out("164.00"));
    }

    #[test]
    fn a_result_keeps_the_expressions_decimals() {
        assert_eq!(written(45.0, "15.00 * 3"), "45.00");
        assert_eq!(written(45.0, "15 * 3"), "45");
        assert_eq!(written(10.0 / 3.0, "10 / 3"), "3.3333");
        assert_eq!(written(0.25, "1 / 4"), "0.25");
    }
}

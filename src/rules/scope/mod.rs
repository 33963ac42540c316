//! SCOPE001 undeclared-change: a changed source file the pull request's description does not
//! mention. Reported by the review driver, which holds the description and the whole change;
//! the matching of files to the description's text is `review::description`.
use crate::rules::{Check, Gate, Rule};

pub(crate) static UNDECLARED_CHANGE: Rule = Rule {
    id: "SCOPE001",
    doc: include_str!("../../../rules/scope/SCOPE001.md"),
    check: Check::Driver,
    gate: Gate::Always,
};

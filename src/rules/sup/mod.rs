//! SUP001/SUP002: suppression comments that explain nothing or suppress nothing. Reported by the
//! review driver (`review::suppress`), which is where suppressions are matched with findings.
use crate::rules::{Check, Gate, Rule};

pub(crate) static SUPPRESSION_WITHOUT_REASON: Rule = Rule {
    id: "SUP001",
    doc: include_str!("../../../rules/sup/SUP001.md"),
    check: Check::Driver,
    gate: Gate::Always,
};

pub(crate) static UNUSED_SUPPRESSION: Rule = Rule {
    id: "SUP002",
    doc: include_str!("../../../rules/sup/SUP002.md"),
    check: Check::Driver,
    gate: Gate::Always,
};

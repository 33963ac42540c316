//! Error-contract rules: what a function does when something fails, and whether its callers
//! can still tell a failure from a result.

pub mod broad_except_returns_none;

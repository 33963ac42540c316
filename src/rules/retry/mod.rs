//! The `retry` family: retry loops that sleep after the last attempt, retry too little, block an
//! event loop, or hide what their numbers mean. Shared here: finding retry loops and folding the
//! numbers of their budget.

pub mod blocking_sleep_in_async;
pub mod budget_exceeds_task_limit;
pub mod incomplete_retryable_set;
pub mod misleading_retry_constants;
pub mod sleep_after_last_attempt;

mod eval;
mod loops;

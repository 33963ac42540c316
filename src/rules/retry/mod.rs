//! The `retry` family: retry loops that sleep after the last attempt, retry too little, block an
//! event loop, or hide what their numbers mean. Shared here: finding retry loops and folding the
//! numbers of their budget.

pub(crate) mod attempts;
pub mod blocking_sleep_in_async;
pub mod budget_exceeds_task_limit;
pub mod incomplete_retryable_set;
pub mod misleading_retry_constants;
pub mod refusal_retried;
pub mod retry_without_bound;
pub mod sleep_after_last_attempt;

pub(crate) mod eval;
pub(crate) mod loops;
pub(crate) mod task_retries;

/// Whether the file holds a retry loop, where most of the family's checks start; worked out
/// once per file for all of them.
pub(crate) fn has_retry_loop(s: &crate::rules::Scan<'_>) -> bool {
    *s.retry_loop
        .get_or_init(|| !loops::retry_loops(s.index(), s.src()).is_empty())
}

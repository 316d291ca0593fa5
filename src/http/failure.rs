//! A guarded call that did not succeed, as the client hands it to the
//! last-known-good cache.

use super::Error;
use crate::{CallError, Verdict};

/// A failed guarded call and how the classifier counted it.
pub(super) struct Failure {
    pub(super) error: CallError<Error>,
    /// `Ignore` for a rejection.
    pub(super) verdict: Verdict,
}

impl Failure {
    /// Whether a stale answer may stand in: the breaker refused, or the
    /// vendor failed. A request the vendor answered with "no" (a 4xx) is
    /// not papered over with an old "yes".
    pub(super) fn vendor_unavailable(&self) -> bool {
        self.error.rejected().is_some() || self.verdict != Verdict::Ignore
    }
}

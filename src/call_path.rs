//! What kind of call a breaker stands in front of.

use std::fmt;
use std::sync::Arc;

/// The call path a breaker guards, declared when it is built.
///
/// A breaker turns a slow failure into a fast refusal. That is the right trade
/// for a call whose answer the process can do without for a while, and the
/// wrong one for a call that must go through. [`BreakerBuilder::build`]
/// refuses the paths in the second group with
/// [`ConfigError::ForbiddenCallPath`], whose message says why.
///
/// [`BreakerBuilder::build`]: crate::BreakerBuilder::build
/// [`ConfigError::ForbiddenCallPath`]: crate::ConfigError::ForbiddenCallPath
///
/// Not `Copy`, since [`CallPath::Custom`] owns its label; cloning one is
/// at most a reference-count increment.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallPath {
    /// Reference data: instruments, calendars, corporate actions.
    ReferenceData,
    /// Historical market data.
    HistoricalData,
    /// Alternative data: sentiment, news, satellite and similar vendors.
    AltData,
    /// An internal enrichment or annotation service whose answer is optional.
    Enrichment,
    /// Any other optional dependency, with a label for logs and metrics.
    /// The label is owned, so it can come from a configuration file; build
    /// one with [`CallPath::custom`].
    Custom(Arc<str>),
    /// Refused: order submission.
    OrderSubmission,
    /// Refused: order cancellation.
    OrderCancel,
    /// Refused: a kill switch or emergency stop.
    KillSwitch,
    /// Refused: a mandatory pre-trade risk check.
    RiskCheck,
}

impl CallPath {
    /// Any other optional dependency, labelled `label` in logs and metrics.
    ///
    /// ```
    /// use fusebox::CallPath;
    ///
    /// let from_file = String::from("ratings");
    /// assert_eq!(CallPath::custom(from_file).as_str(), "ratings");
    /// ```
    pub fn custom(label: impl Into<Arc<str>>) -> Self {
        CallPath::Custom(label.into())
    }

    /// A short label for logs and metrics.
    pub fn as_str(&self) -> &str {
        match self {
            CallPath::ReferenceData => "reference_data",
            CallPath::HistoricalData => "historical_data",
            CallPath::AltData => "alt_data",
            CallPath::Enrichment => "enrichment",
            CallPath::Custom(label) => label,
            CallPath::OrderSubmission => "order_submission",
            CallPath::OrderCancel => "order_cancel",
            CallPath::KillSwitch => "kill_switch",
            CallPath::RiskCheck => "risk_check",
        }
    }

    /// Why a breaker must not stand on this path, or `None` when it may.
    pub fn refusal(&self) -> Option<&'static str> {
        match self {
            CallPath::OrderSubmission => Some(
                "a breaker fast-fails calls, and an order that must reach the venue must not be \
                 dropped because an earlier call was slow; handle order-path failures in the \
                 order gateway itself",
            ),
            CallPath::OrderCancel => Some(
                "fast-failing a cancel turns a slow dependency into a live, uncancelled order; \
                 a cancel must always be attempted (MiFID II RTS 6 art. 12 requires immediate \
                 cancellation of unexecuted orders)",
            ),
            CallPath::KillSwitch => Some(
                "a kill switch is the last control when everything else is failing; a breaker \
                 would refuse it exactly when it is needed",
            ),
            CallPath::RiskCheck => Some(
                "a mandatory pre-trade risk check must run, not be skipped because it was slow \
                 (SEC Rule 15c3-5); when it cannot run, stop trading instead of failing open",
            ),
            _ => None,
        }
    }
}

impl fmt::Display for CallPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

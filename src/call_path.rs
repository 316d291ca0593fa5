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
/// A [`CallPath::Custom`] label that names a refused path is refused with
/// it: `custom("order_cancel")`, `custom("Order-Cancel")`,
/// `custom("cancel order")` or `custom("kill switch")` cannot smuggle a
/// breaker onto an order, cancel, kill-switch or risk-check path. Case,
/// spaces, `-`, `.` and `/` do not matter; a label that merely mentions an
/// order (`"order_book"`, `"orders_history"`) is a different path and is
/// allowed.
///
/// ```
/// use fusebox::{Breaker, CallPath, Classifier, ConfigError};
///
/// let build = |path| {
///     Breaker::builder("vendor")
///         .call_path(path)
///         .classifier(Classifier::every_error_is_a_failure())
///         .build()
/// };
/// let refused = build(CallPath::custom("Order-Cancel")).unwrap_err();
/// assert!(matches!(refused, ConfigError::ForbiddenCallPath { .. }));
/// assert!(build(CallPath::custom("order_book")).is_ok());
/// ```
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
    /// assert_eq!(CallPath::custom(from_file).to_string(), "ratings");
    /// ```
    pub fn custom(label: impl Into<Arc<str>>) -> Self {
        CallPath::Custom(label.into())
    }

    /// A short label for logs and metrics.
    pub(crate) fn as_str(&self) -> &str {
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
    pub(crate) fn refusal(&self) -> Option<&'static str> {
        match self {
            CallPath::Custom(label) => forbidden_alias(label).and_then(|path| path.refusal()),
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

/// A short label for logs and metrics: `reference_data`, `historical_data`,
/// `alt_data`, `enrichment`, a custom path's label, or a refused path's
/// name (`order_submission`...).
impl fmt::Display for CallPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// The refused path a custom label names, if it names one: the label with
/// case and separators (space, `-`, `.`, `/`) folded to `_`, compared with
/// the refused paths' labels and the usual other names for them.
fn forbidden_alias(label: &str) -> Option<CallPath> {
    // Longer than any alias: not one (and no allocation for a long label).
    const LONGEST: usize = 32;
    if label.len() > LONGEST {
        return None;
    }
    let mut folded = [0u8; LONGEST];
    let mut len = 0;
    for b in label.trim().bytes() {
        let b = match b {
            b' ' | b'-' | b'.' | b'/' | b'_' => b'_',
            b => b.to_ascii_lowercase(),
        };
        // Runs of separators count as one.
        if b == b'_' && (len == 0 || folded[len - 1] == b'_') {
            continue;
        }
        folded[len] = b;
        len += 1;
    }
    while len > 0 && folded[len - 1] == b'_' {
        len -= 1;
    }
    let folded = std::str::from_utf8(&folded[..len]).ok()?;
    let path = match folded {
        "order_submission" | "order_submit" | "submit_order" | "new_order" | "order_entry"
        | "place_order" | "order_placement" | "order_routing" | "order" | "orders" => {
            CallPath::OrderSubmission
        }
        "order_cancel" | "order_cancellation" | "cancel_order" | "cancel_orders" | "cancel"
        | "cancel_replace" | "mass_cancel" | "cancel_all" => CallPath::OrderCancel,
        "kill_switch" | "killswitch" | "kill" | "emergency_stop" | "panic_button" => {
            CallPath::KillSwitch
        }
        "risk_check"
        | "risk_checks"
        | "pre_trade_risk"
        | "pre_trade_risk_check"
        | "pretrade_risk"
        | "pretrade_risk_check"
        | "risk" => CallPath::RiskCheck,
        _ => return None,
    };
    Some(path)
}

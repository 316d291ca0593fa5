//! What a registry refuses, and why.

use crate::text::shown;
use crate::ConfigError;

/// A request the [`Registry`](super::Registry) refused. Nothing changed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// No template by that name was added.
    #[error("no template named `{}`", shown(.template))]
    UnknownTemplate {
        /// The template asked for.
        template: String,
    },
    /// A template by that name already exists.
    #[error("a template named `{}` already exists", shown(.template))]
    DuplicateTemplate {
        /// The template's name.
        template: String,
    },
    /// No breaker by that name is registered.
    #[error("no breaker named `{}`", shown(.name))]
    UnknownBreaker {
        /// The breaker asked for.
        name: String,
    },
    /// A breaker by that name exists with another configuration.
    #[error(
        "breaker `{}` already exists from {}, not from {}",
        shown(.name),
        shown(.existing),
        shown(.requested)
    )]
    Conflict {
        /// The breaker's name.
        name: String,
        /// Where the existing breaker came from (`template `x``, or
        /// `outside the registry`).
        existing: String,
        /// Where the refused one would have come from.
        requested: String,
    },
    /// Building the breaker failed, or a maintenance window declared on it
    /// broke a rule.
    #[error("breaker `{}`: {source}", shown(.name))]
    Config {
        /// The breaker's name.
        name: String,
        /// The field and rule at fault.
        #[source]
        source: ConfigError,
    },
}

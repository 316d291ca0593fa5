//! What a configuration file can get wrong.

use crate::registry::RegistryError;
use crate::text::shown;
use crate::ConfigError;

/// A configuration file the loader refused. Nothing was added to the
/// registry.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The file does not parse, has an unknown field, or a value of the
    /// wrong kind. The message says where (the `[table]` and line when the
    /// file is TOML), which field, and what was expected.
    #[error("{message}")]
    Parse {
        /// The parser's message, with the table it is in.
        message: String,
    },
    /// A template or breaker broke one of the builder's rules.
    #[error("{}: {source}", shown(.entry))]
    Config {
        /// `template `name`` or `breaker `name``.
        entry: String,
        /// The field and the rule.
        #[source]
        source: ConfigError,
    },
    /// A template or breaker named a classifier the loader was not given.
    #[error(
        "{}: `classifier` names no classifier given to the loader (got {:?}; known: {})",
        shown(.entry),
        shown(.name),
        shown(.known)
    )]
    UnknownClassifier {
        /// `template `name`` or `breaker `name``.
        entry: String,
        /// The name in the file.
        name: String,
        /// The names the loader knows, comma-separated.
        known: String,
    },
    /// A breaker named a template that is neither in the file nor in the
    /// registry, or a name the registry already holds.
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

impl FileError {
    /// The field at fault, when the error is about one setting.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            FileError::Config { source, .. } => Some(source.field()),
            FileError::UnknownClassifier { .. } => Some("classifier"),
            _ => None,
        }
    }
}

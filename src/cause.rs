//! What broke the circuit: the message and type name of the last failure
//! recorded before the breaker opened, bounded in size. Never the error
//! value itself, which may hold a connection or a buffer.

use std::error::Error as StdError;
use std::fmt::{self, Write as _};

use crate::error::CHAIN_LIMIT;

/// The error that opened a breaker, as text: in the opening
/// [`StateChange::cause`](crate::StateChange::cause), in
/// [`Snapshot::opened_by`](crate::Snapshot::opened_by) and from
/// [`Breaker::last_failure`](crate::Breaker::last_failure), so that a
/// refused caller can say why (Polly's `BrokenCircuitException` carries it).
///
/// The message is the error's `Display` followed by its sources', joined
/// by `": "` as anyhow's `{:#}` prints a chain (`call failed: connection
/// reset`; a source whose message the text already ends with, as an error
/// that prints its source shows it, is not repeated), cut to
/// 240 bytes, with control characters
/// and invisible formatting characters (bidirectional overrides,
/// zero-width characters, line separators) replaced by spaces so that it
/// cannot forge a log line or read other than it is. It is taken from
/// calls made through [`Breaker::call`](crate::Breaker::call),
/// [`call_any`](crate::Breaker::call_any) (for error types it can see as
/// `std::error::Error`; others give the type name only) and a permit's
/// `finish`;
/// a bare [`Permit::record`](crate::Permit::record) has no error to show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailureCause {
    type_name: &'static str,
    message: Box<str>,
}

impl FailureCause {
    /// The longest message kept, in bytes.
    pub(crate) const MAX_MESSAGE: usize = 240;

    /// The error's type, as `std::any::type_name` spells it.
    pub fn type_name(&self) -> &str {
        self.type_name
    }

    /// The error's message, at most 240 bytes (empty when the error type has no `Display` that the breaker
    /// can see).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for FailureCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            f.write_str(self.type_name)
        } else {
            write!(f, "{} ({})", self.message, self.type_name)
        }
    }
}

/// A failure's message written into a fixed buffer on the stack: no
/// allocation until the breaker opens on it.
#[derive(Clone, Copy)]
pub(crate) struct Note {
    type_name: &'static str,
    len: usize,
    buf: [u8; FailureCause::MAX_MESSAGE],
}

impl Note {
    /// The note of an error of type `E`, its message written by `message`.
    pub(crate) fn new<E>(message: Option<&dyn fmt::Display>) -> Self {
        let mut note = Note {
            type_name: std::any::type_name::<E>(),
            len: 0,
            buf: [0; FailureCause::MAX_MESSAGE],
        };
        if let Some(m) = message {
            // A full buffer stops the write with an error: the cut is meant.
            let _ = write!(note, "{m}");
        }
        note
    }

    /// The note of an error of type `E`: its message and its sources',
    /// `a: b: c`. Each error's `Display` should show what happened at its
    /// level only, but many also print their source (`#[error("{0}")]`
    /// over a `#[source]`): a source whose message ends the text already
    /// written is not written again.
    pub(crate) fn of_error<E>(err: Option<&dyn StdError>) -> Self {
        let Some(err) = err else {
            return Note::new::<E>(None);
        };
        let mut note = Note::new::<E>(Some(&err));
        let mut source = err.source();
        for _ in 1..CHAIN_LIMIT {
            let Some(e) = source else { break };
            let message = Note::new::<E>(Some(&e));
            let (written, next) = (&note.buf[..note.len], &message.buf[..message.len]);
            if !written.ends_with(next) && note.write_str(": ").is_ok() {
                // A full buffer cuts the message: the cut is meant.
                let _ = note.write_str(std::str::from_utf8(next).unwrap_or_default());
            }
            source = e.source();
        }
        note
    }

    pub(crate) fn cause(&self) -> FailureCause {
        let message = std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default();
        FailureCause {
            type_name: self.type_name,
            message: message.into(),
        }
    }
}

impl fmt::Write for Note {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for c in s.chars() {
            let c = if crate::text::is_hostile(c) { ' ' } else { c };
            let mut utf8 = [0; 4];
            let bytes = c.encode_utf8(&mut utf8).as_bytes();
            if self.len + bytes.len() > self.buf.len() {
                return Err(fmt::Error);
            }
            self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
        }
        Ok(())
    }
}

impl fmt::Debug for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.cause().fmt(f)
    }
}

/// The last failure with an error to show since the last state change, in
/// a box made at the breaker's first such failure and kept for its life: a
/// breaker that has not failed carries a pointer instead of a note, and a
/// failure after the first allocates nothing.
#[derive(Default)]
pub(crate) struct LastNote(Option<Box<Kept>>);

struct Kept {
    note: Note,
    /// Whether the note is from the current state's period.
    fresh: bool,
}

impl LastNote {
    /// Keeps `note` as the last failure's.
    pub(crate) fn set(&mut self, note: &Note) {
        match &mut self.0 {
            Some(kept) => {
                kept.note = *note;
                kept.fresh = true;
            }
            None => {
                self.0 = Some(Box::new(Kept {
                    note: *note,
                    fresh: true,
                }));
            }
        }
    }

    /// The last failure's note, if one came since the last call; forgets
    /// it (a state change starts a new period).
    pub(crate) fn take(&mut self) -> Option<&Note> {
        let kept = self.0.as_deref_mut()?;
        std::mem::take(&mut kept.fresh).then_some(&kept.note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_holds_the_errors_sources_each_once() {
        let inner = std::io::Error::other("connection reset");
        let outer = crate::CallError::Failed(inner);
        let note = Note::of_error::<crate::CallError<std::io::Error>>(Some(&outer));
        assert_eq!(note.cause().message(), "call failed: connection reset");
    }

    /// Displays `message` and gives `source` as its source, as
    /// `#[error("...{0}")]` over a `#[source]` does.
    #[derive(Debug)]
    struct Wrapper(&'static str, std::io::Error);

    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "{}{}", self.0, self.1)
        }
    }

    impl StdError for Wrapper {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.1)
        }
    }

    #[test]
    fn a_source_the_error_already_prints_is_not_written_twice() {
        for prefix in ["", "fetching the curve: "] {
            let err = Wrapper(prefix, std::io::Error::other("timed out"));
            let note = Note::of_error::<Wrapper>(Some(&err));
            assert_eq!(note.cause().message(), format!("{prefix}timed out"));
        }
    }

    #[test]
    fn a_long_message_is_cut_at_a_character_boundary_and_loses_its_newlines() {
        let long = format!("line one\nline two {}", "é".repeat(400));
        let note = Note::new::<std::io::Error>(Some(&long));
        let cause = note.cause();
        assert!(cause.message().len() <= FailureCause::MAX_MESSAGE);
        assert!(cause.message().len() > FailureCause::MAX_MESSAGE - 2);
        assert!(cause.message().starts_with("line one line two é"));
        assert_eq!(cause.type_name(), "std::io::error::Error");
    }

    #[test]
    fn a_note_is_taken_once_and_its_box_is_kept_for_the_next() {
        let mut last = LastNote::default();
        assert!(last.take().is_none(), "nothing failed yet");
        let first = Note::new::<std::io::Error>(Some(&"reset"));
        last.set(&first);
        let kept = last.0.as_deref().map(|k| k as *const Kept);
        assert_eq!(
            last.take().map(|n| n.cause().message().to_owned()),
            Some("reset".into())
        );
        assert!(last.take().is_none(), "taken once");
        last.set(&Note::new::<std::io::Error>(Some(&"refused")));
        assert_eq!(
            last.0.as_deref().map(|k| k as *const Kept),
            kept,
            "same box"
        );
        assert_eq!(
            last.take().map(|n| n.cause().message().to_owned()),
            Some("refused".into())
        );
    }
}

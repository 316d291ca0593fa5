//! Text from outside the program as an error, a log line or a metric label
//! shows it.
//!
//! A breaker or template name, an operator's actor and note, a request's
//! path, a vendor's error message: whoever wrote them may not be the one
//! who reads the message they end up in. Shown raw, a line break ends a log
//! line and forges the next, an escape sequence rewrites the reader's
//! terminal, a right-to-left override makes the text read other than it
//! is, and a megabyte of it buries everything around it. Every such place
//! shows the text through [`shown`]: those characters escaped, and the text
//! cut to a bound with its full length noted.
//!
//! A leaf: it imports nothing of the crate.

use std::fmt::{self, Write as _};

/// The most bytes of a text that [`Shown`] shows by default.
pub(crate) const MAX_SHOWN: usize = 256;

/// Whether `c` must not reach a reader as it is: a control character (line
/// breaks, escape sequences), or an invisible formatting character that
/// changes how the text around it reads (bidirectional overrides and
/// isolates, zero-width characters, line and paragraph separators, the
/// byte-order mark).
pub(crate) fn is_hostile(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        )
}

/// A text as shown to a reader: each [hostile](is_hostile) character
/// escaped (`\n`, `\u{1b}`), and after `max` bytes of the text the rest
/// replaced by `... (N bytes)`, N being the whole text's length.
#[derive(Clone, Copy)]
pub(crate) struct Shown<'a> {
    text: &'a str,
    max: usize,
}

/// `text` shown with the default bound, [`MAX_SHOWN`] bytes.
pub(crate) fn shown(text: &str) -> Shown<'_> {
    Shown {
        text,
        max: MAX_SHOWN,
    }
}

impl<'a> Shown<'a> {
    /// `text` shown with at most `max` of its bytes.
    pub(crate) fn cut(text: &'a str, max: usize) -> Self {
        Shown { text, max }
    }
}

impl Shown<'_> {
    fn write(&self, f: &mut fmt::Formatter<'_>, quote: &str) -> fmt::Result {
        let mut end = self.text.len().min(self.max);
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        f.write_str(quote)?;
        for c in self.text[..end].chars() {
            if is_hostile(c) {
                write!(f, "{}", c.escape_default())?;
            } else {
                f.write_char(c)?;
            }
        }
        f.write_str(quote)?;
        if end < self.text.len() {
            write!(f, "... ({} bytes)", self.text.len())?;
        }
        Ok(())
    }
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, "")
    }
}

/// Quoted: `"text"`, or `"tex"... (N bytes)`.
impl fmt::Debug for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, "\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_breaks_escapes_and_overrides_are_escaped() {
        assert_eq!(
            shown("a\nb\r\u{1b}[2K\u{202e}c\u{2028}").to_string(),
            r"a\nb\r\u{1b}[2K\u{202e}c\u{2028}"
        );
        assert_eq!(shown("café ~ `x` \"q\"").to_string(), "café ~ `x` \"q\"");
    }

    #[test]
    fn a_long_text_is_cut_at_a_character_boundary_with_its_length() {
        let huge = "y".repeat(100_000);
        let shown = shown(&huge).to_string();
        assert_eq!(
            shown,
            format!("{}... (100000 bytes)", "y".repeat(MAX_SHOWN))
        );
        let accented = format!("{}é", "x".repeat(31));
        assert_eq!(
            Shown::cut(&accented, 32).to_string(),
            format!("{}... (33 bytes)", "x".repeat(31))
        );
        assert_eq!(Shown::cut("short", 32).to_string(), "short");
    }

    #[test]
    fn an_escaped_text_never_holds_a_hostile_character() {
        let all: String = (0..0x3000u32).filter_map(char::from_u32).collect();
        let shown = Shown::cut(&all, usize::MAX).to_string();
        assert!(!shown.chars().any(is_hostile));
    }
}

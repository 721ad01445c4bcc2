//! The error for a selector that does not parse.

/// The most characters of a word an error quotes.
const MAX_FOUND_CHARS: usize = 32;

/// Why a selector text is not a valid selector, and where.
///
/// Displays as `invalid selector at column 8: expected expression found end
/// of input`. The column is 1-based and counts characters (not bytes) from
/// the start of the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid selector at column {column}: expected {expected} found {found}")]
pub struct SelectorError {
    column: usize,
    expected: String,
    found: String,
}

impl SelectorError {
    /// An error at byte `offset` of `text`, where the parser wanted `expected`.
    pub(crate) fn new(text: &str, offset: usize, expected: String) -> Self {
        let rest = &text[offset..];
        let word_end = rest.find(|c: char| !is_word_char(c)).unwrap_or(rest.len());
        // Quote the whole word (`"AND"`, `"5"`) rather than its first letter, up
        // to MAX_FOUND_CHARS of it (the error goes back to a client, whatever the
        // selector's size); anything else is shown one character at a time.
        let found = match rest.chars().next() {
            None => "end of input".to_owned(),
            Some(_) if word_end > 0 => {
                let word = &rest[..word_end];
                match word.char_indices().nth(MAX_FOUND_CHARS) {
                    Some((cut, _)) => format!("{:?}", format!("{}…", &word[..cut])),
                    None => format!("{word:?}"),
                }
            }
            Some(c) => format!("{:?}", c.to_string()),
        };
        Self {
            column: text[..offset].chars().count() + 1,
            expected,
            found,
        }
    }

    /// The 1-based character column where parsing failed.
    pub fn column(&self) -> usize {
        self.column
    }

    /// What the parser would have accepted there, e.g. `one of AND, OR`.
    pub fn expected(&self) -> &str {
        &self.expected
    }

    /// What is there instead: a quoted word (its first 32 characters and `…` if
    /// longer) or character, or `end of input`.
    pub fn found(&self) -> &str {
        &self.found
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

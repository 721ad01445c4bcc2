//! The one error type of configuration loading.
//!
//! Whatever went wrong, an operator wants to be pointed at the spot in the
//! file: `rebound.toml:12:1: address-settings[2].redelivery-delay: must not be
//! negative (got -5)`. TOML syntax errors, serde type errors and our own
//! validation all end up in [`ConfigError`], which carries the file, the
//! 1-based line and column, the key path and a message.

use std::fmt;
use std::ops::Range;
use std::sync::OnceLock;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// A configuration file could not be read, parsed or validated.
///
/// `Display` renders `file:line:column: key: message`; the location and key
/// parts are left out when unknown (for example when the file cannot be read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    file: String,
    location: Option<(usize, usize)>,
    key: Option<String>,
    message: String,
}

impl ConfigError {
    /// The file the error is about, as given to `Config::load` or as the
    /// `origin` of `Config::parse`.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The 1-based line of the offending text, if known.
    pub fn line(&self) -> Option<usize> {
        self.location.map(|(line, _)| line)
    }

    /// The 1-based column (in characters) of the offending text, if known.
    pub fn column(&self) -> Option<usize> {
        self.location.map(|(_, column)| column)
    }

    /// The dotted key path, e.g. `address-settings[2].redelivery-delay`
    /// (array indices count from 0), if known.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// What is wrong, without the location prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The file could not be read at all.
    pub(crate) fn unreadable(file: String, error: &std::io::Error) -> Self {
        ConfigError {
            file,
            location: None,
            key: None,
            message: format!("cannot read file: {error}"),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:", self.file)?;
        if let Some((line, column)) = self.location {
            write!(f, "{line}:{column}:")?;
        }
        if let Some(key) = &self.key {
            write!(f, " {key}:")?;
        }
        write!(f, " {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// The text being loaded plus the name to report it under; turns byte
/// offsets into [`ConfigError`]s.
pub(crate) struct Document<'a> {
    pub(crate) origin: &'a str,
    pub(crate) text: &'a str,
    /// Where each line starts, made at the first lookup: loading a config
    /// looks up the line of every queue, user and pattern (a scan of the text
    /// each made 100,000 queues take minutes).
    line_starts: OnceLock<Vec<usize>>,
}

impl<'a> Document<'a> {
    pub(crate) fn new(origin: &'a str, text: &'a str) -> Document<'a> {
        Document {
            origin,
            text,
            line_starts: OnceLock::new(),
        }
    }

    /// An error about the text starting at byte `offset`.
    pub(crate) fn error(
        &self,
        offset: usize,
        key: Option<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            file: self.origin.to_owned(),
            location: Some(self.line_column(offset)),
            key,
            message: message.into(),
        }
    }

    /// Wraps a TOML syntax or serde error. toml does not expose the key path
    /// of an error, so it is recovered from the error's span.
    pub(crate) fn toml_error(&self, error: &toml::de::Error) -> ConfigError {
        let span = error.span();
        ConfigError {
            file: self.origin.to_owned(),
            location: span.as_ref().map(|span| self.line_column(span.start)),
            key: span.and_then(|span| self.key_path_at(span)),
            message: error.message().to_owned(),
        }
    }

    /// The 1-based line of byte `offset`.
    pub(crate) fn line(&self, offset: usize) -> usize {
        self.line_column(offset).0
    }

    fn line_column(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let starts = self.line_starts.get_or_init(|| {
            std::iter::once(0)
                .chain(self.text.match_indices('\n').map(|(i, _)| i + 1))
                .collect()
        });
        let line = starts.partition_point(|&start| start <= offset);
        let start = starts[line - 1];
        (line, self.text[start..offset].chars().count() + 1)
    }

    /// The path of the deepest key or value whose span contains `span.start`.
    /// Fails (returns `None`) when the text is not even valid TOML.
    fn key_path_at(&self, span: Range<usize>) -> Option<String> {
        let root = DeTable::parse(self.text).ok()?;
        let mut path = String::new();
        let mut found = None;
        visit_table(root.get_ref(), span.start, &mut path, &mut found);
        found
    }
}

fn visit_table(table: &DeTable<'_>, offset: usize, path: &mut String, found: &mut Option<String>) {
    for (key, value) in table {
        let len = path.len();
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key.get_ref());
        if key.span().contains(&offset) {
            *found = Some(path.clone());
        }
        visit_value(value, offset, path, found);
        path.truncate(len);
    }
}

fn visit_value(value: &Spanned<DeValue<'_>>, offset: usize, path: &mut String, found: &mut Option<String>) {
    // Children are visited after their parent, so the deepest hit wins.
    if value.span().contains(&offset) {
        *found = Some(path.clone());
    }
    match value.get_ref() {
        DeValue::Table(table) => visit_table(table, offset, path, found),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                visit_value(item, offset, path, found);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Document<'_> {
        Document::new("test.toml", text)
    }

    #[test]
    fn display_with_and_without_parts() {
        let d = doc("a = 1\nbb = 2\n");
        let err = d.error(9, Some("bb".into()), "nope");
        assert_eq!(err.to_string(), "test.toml:2:4: bb: nope");
        assert_eq!(
            (err.line(), err.column(), err.key()),
            (Some(2), Some(4), Some("bb"))
        );
        assert_eq!(d.error(0, None, "bad").to_string(), "test.toml:1:1: bad");
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let err = ConfigError::unreadable("x.toml".into(), &io);
        assert_eq!(err.to_string(), "x.toml: cannot read file: gone");
        assert_eq!(err.line(), None);
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        let d = doc("k = \"é\" x");
        assert_eq!(d.line_column(9), (1, 9));
    }

    #[test]
    fn offsets_past_the_end_are_clamped() {
        assert_eq!(doc("a\nb").line_column(99), (2, 2));
    }

    proptest::proptest! {
        #[test]
        fn lines_and_columns_are_those_counted_from_the_start(text in "[a\né\n]{0,40}", at in 0usize..50) {
            let offset = text.char_indices().map(|(i, _)| i).chain([text.len()]).nth(at).unwrap_or(text.len());
            let before = &text[..offset];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().unwrap().chars().count() + 1;
            proptest::prop_assert_eq!(doc(&text).line_column(offset), (line, column));
        }
    }

    #[test]
    fn key_path_is_recovered_from_spans() {
        let text = "top = 1\n[[list]]\nx = 1\n[[list]]\ny = 2\n[t.inner]\nz = 3\n";
        let d = doc(text);
        let at = |needle: &str| d.key_path_at(text.find(needle).unwrap()..text.len());
        assert_eq!(at("top").as_deref(), Some("top"));
        assert_eq!(at("y").as_deref(), Some("list[1].y"));
        assert_eq!(at("2").as_deref(), Some("list[1].y"));
        assert_eq!(at("z").as_deref(), Some("t.inner.z"));
    }
}

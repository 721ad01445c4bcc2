//! `LIKE` patterns: `%` matches any sequence, `_` exactly one character.

/// A compiled `LIKE` pattern, keeping its source for rendering.
#[derive(Debug, Clone)]
pub(crate) struct LikePattern {
    pub(crate) pattern: String,
    pub(crate) escape: Option<char>,
    tokens: Vec<Token>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Token {
    Literal(char),
    AnyOne,
    AnySequence,
}

impl LikePattern {
    /// Compiles `pattern`, where `escape` makes the character after it literal.
    ///
    /// As in Artemis, an escape character at the very end of the pattern has
    /// nothing to escape and stands for itself.
    pub(crate) fn new(pattern: String, escape: Option<char>) -> Self {
        let mut tokens = Vec::new();
        let mut chars = pattern.chars().peekable();
        while let Some(c) = chars.next() {
            let token = match c {
                _ if Some(c) == escape => Token::Literal(chars.next().unwrap_or(c)),
                '%' => Token::AnySequence,
                '_' => Token::AnyOne,
                _ => Token::Literal(c),
            };
            tokens.push(token);
        }
        Self {
            pattern,
            escape,
            tokens,
        }
    }

    /// Whether the whole of `text` matches the pattern.
    ///
    /// Greedy matching that, on a mismatch, lets the most recent `%` absorb
    /// one more character: O(pattern × text) at worst, with no regex engine
    /// and no recursion for a hostile pattern to exploit.
    pub(crate) fn matches(&self, text: &str) -> bool {
        let (mut p, mut t) = (0, 0);
        // Pattern index just after the last `%`, and the text index it was
        // last resumed from.
        let mut retry: Option<(usize, usize)> = None;
        loop {
            let next = text[t..].chars().next();
            match (self.tokens.get(p), next) {
                (None, None) => return true,
                (Some(Token::AnySequence), _) => {
                    p += 1;
                    retry = Some((p, t));
                    continue;
                }
                (Some(Token::AnyOne), Some(c)) => {
                    p += 1;
                    t += c.len_utf8();
                    continue;
                }
                (Some(Token::Literal(l)), Some(c)) if *l == c => {
                    p += 1;
                    t += c.len_utf8();
                    continue;
                }
                _ => {}
            }
            let Some((after_percent, from)) = retry else {
                return false;
            };
            let Some(c) = text[from..].chars().next() else {
                return false;
            };
            p = after_percent;
            t = from + c.len_utf8();
            retry = Some((p, t));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LikePattern;

    fn like(pattern: &str, escape: Option<char>, text: &str) -> bool {
        LikePattern::new(pattern.to_owned(), escape).matches(text)
    }

    #[test]
    fn percent_matches_any_sequence() {
        assert!(like("12%3", None, "123"));
        assert!(like("12%3", None, "12993"));
        assert!(!like("12%3", None, "1234"));
        assert!(like("%", None, ""));
        assert!(like("%a%b%", None, "xxaxxbxx"));
        assert!(!like("%a%b%", None, "xxbxxaxx"));
    }

    #[test]
    fn underscore_matches_one_character() {
        assert!(like("l_se", None, "lose"));
        assert!(!like("l_se", None, "loose"));
        assert!(!like("_", None, ""));
        assert!(like("_", None, "é"));
    }

    #[test]
    fn escape_makes_wildcards_literal() {
        assert!(like("100\\%", Some('\\'), "100%"));
        assert!(!like("100\\%", Some('\\'), "1000"));
        assert!(like("\\_foo", Some('\\'), "_foo"));
        assert!(!like("\\_foo", Some('\\'), "xfoo"));
        assert!(like("a!!b", Some('!'), "a!b"));
        assert!(like("ab!", Some('!'), "ab!"));
    }

    #[test]
    fn literal_characters_match_exactly() {
        assert!(like("abc", None, "abc"));
        assert!(!like("abc", None, "ABC"));
        assert!(!like("abc", None, "abcd"));
    }

    #[test]
    fn backtracking_is_bounded() {
        // Exponential for a naive backtracker; quick here.
        let text = "a".repeat(2_000);
        assert!(!like(&format!("{}b", "%a".repeat(20)), None, &text));
    }
}

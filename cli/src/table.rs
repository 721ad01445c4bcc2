//! Aligned plain-text tables, laid out like `rebound config resolve`'s: columns
//! separated by two spaces, the last one not padded.

/// Renders `headers` and `rows` (each as long as `headers`), one line each.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    let mut out = String::new();
    for row in std::iter::once(&header).chain(rows) {
        let last = row.len().saturating_sub(1);
        for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:width$}  "));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn aligns_columns() {
        let rows = vec![
            vec!["orders".to_owned(), "1".to_owned()],
            vec!["q".to_owned(), "12345".to_owned()],
        ];
        assert_eq!(
            super::render(&["NAME", "N"], &rows),
            "NAME    N\norders  1\nq       12345\n"
        );
    }
}

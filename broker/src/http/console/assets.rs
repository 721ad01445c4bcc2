//! The page and its assets, embedded in the binary: no CDN, nothing fetched from
//! the internet, no build step. Every answer carries a Content-Security-Policy
//! that allows only this origin's own files (no inline script or style), so broker
//! data the page shows can never run as code.
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("assets/index.html");

/// The assets by name: content and type.
const FILES: [(&str, &str, &str); 3] = [
    (
        "console.js",
        include_str!("assets/console.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "console.css",
        include_str!("assets/console.css"),
        "text/css; charset=utf-8",
    ),
    ("favicon.svg", include_str!("assets/favicon.svg"), "image/svg+xml"),
];

const CSP: &str =
    "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

fn page(content_type: &str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

pub(super) async fn index() -> Response {
    page("text/html; charset=utf-8", INDEX)
}

pub(super) async fn file(Path(name): Path<String>) -> Response {
    match FILES.iter().find(|(file, _, _)| *file == name) {
        Some((_, body, content_type)) => page(content_type, body),
        None => (StatusCode::NOT_FOUND, "no such asset\n").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_page_is_served_under_a_policy_that_allows_only_its_own_files() {
        let page = index().await;
        assert_eq!(page.headers()[header::CONTENT_SECURITY_POLICY], CSP);
        assert!(CSP.starts_with("default-src 'self'"));
        for (name, _, _) in FILES {
            assert!(INDEX.contains(&format!("/assets/{name}")), "{name} is not linked");
            assert_eq!(file(Path(name.to_owned())).await.status(), StatusCode::OK);
        }
        assert_eq!(
            file(Path("../Cargo.toml".into())).await.status(),
            StatusCode::NOT_FOUND
        );
        // No inline script or style: the policy would block it.
        assert!(!INDEX.contains("<script>") && !INDEX.contains("style="));
    }
}

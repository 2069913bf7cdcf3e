//! The page, its script and its style: files in the crate (`assets/`), compiled into the binary, so
//! the console needs no network, no CDN and no build step. The script builds every element it shows
//! with `textContent` from the JSON API; the page has no inline script or style (the
//! Content-Security-Policy allows only these files).

/// A file the console serves.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// Its bytes.
    pub content: &'static str,
    /// Its `Content-Type`.
    pub content_type: &'static str,
}

/// The page.
pub const INDEX_HTML: &str = include_str!("assets/index.html");
/// The page's script.
pub const CONSOLE_JS: &str = include_str!("assets/console.js");
/// The page's style.
pub const CONSOLE_CSS: &str = include_str!("assets/console.css");

/// The asset served at `path`, if any.
pub fn find(path: &str) -> Option<Asset> {
    let (content, content_type) = match path {
        "/" | "/index.html" => (INDEX_HTML, "text/html; charset=utf-8"),
        "/console.js" => (CONSOLE_JS, "text/javascript; charset=utf-8"),
        "/console.css" => (CONSOLE_CSS, "text/css; charset=utf-8"),
        _ => return None,
    };
    Some(Asset {
        content,
        content_type,
    })
}

//! `index.html`: the report's Markdown rendered by `pulldown-cmark` (tables on) into one
//! self-contained page, with the PNG plots it links embedded as data URIs.

use std::fs;
use std::path::Path;

use base64::Engine as _;
use pulldown_cmark::{html, CowStr, Event, Options, Parser, Tag};

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:70em;margin:2em auto;\
padding:0 1em;line-height:1.45;color:#222}table{border-collapse:collapse;margin:1em 0;\
font-size:0.92em}th,td{border:1px solid #ccc;padding:0.25em 0.6em}td{text-align:right}\
td:first-child{text-align:left}th{background:#f3f3f3}code{background:#f3f3f3;\
padding:0 0.2em}img{max-width:100%}";

/// The page for `markdown`; images that name a file in `dir` are read and embedded (one that
/// cannot be read keeps its link).
pub fn page(markdown: &str, dir: &Path) -> String {
    let title = markdown
        .lines()
        .find_map(|line| line.strip_prefix("# "))
        .unwrap_or("Hab report");
    let events = Parser::new_ext(markdown, Options::ENABLE_TABLES).map(|event| match event {
        Event::Start(Tag::Image {
            link_type,
            dest_url,
            title,
            id,
        }) => Event::Start(Tag::Image {
            link_type,
            dest_url: embedded(&dest_url, dir).map_or(dest_url, CowStr::from),
            title,
            id,
        }),
        other => other,
    });
    let mut body = String::new();
    html::push_html(&mut body, events);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        escape(title)
    )
}

/// `file` in `dir` as a `data:` URI, if it is a local PNG that can be read.
fn embedded(file: &str, dir: &Path) -> Option<String> {
    if file.contains(':') || !file.ends_with(".png") {
        return None;
    }
    let bytes = fs::read(dir.join(file)).ok()?;
    Some(format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    ))
}

fn escape(text: &str) -> String {
    let mut escaped = String::new();
    pulldown_cmark_escape::escape_html(&mut escaped, text).expect("writing to a String");
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_html_with_tables() {
        let markdown = "# Title\n\nSome `code` and **bold** [link](a.html) <x>.\n\n\
                        | a | b |\n| --- | ---: |\n| 1 | 2 |\n\n- one\n- two\n  more\n";
        let html = page(markdown, Path::new("."));
        assert!(html.contains("<title>Title</title>"));
        assert!(html.contains("<h1>Title</h1>"));
        assert!(html.contains("<code>code</code> and <strong>bold</strong>"));
        assert!(html.contains("<a href=\"a.html\">link</a>"));
        assert!(html.contains("<th>a</th>"));
        assert!(html.contains("<td style=\"text-align: right\">2</td>"));
        assert!(html.contains("<li>one</li>"));
    }

    #[test]
    fn local_png_images_are_embedded_and_others_kept() {
        let dir = std::env::temp_dir().join(format!("hab-html-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("plot.png"), b"foo").unwrap();
        let html = page("![a plot](plot.png)\n\n![gone](missing.png)\n", &dir);
        assert!(
            html.contains("src=\"data:image/png;base64,Zm9v\""),
            "{html}"
        );
        assert!(html.contains("src=\"missing.png\""), "{html}");
        fs::remove_dir_all(&dir).unwrap();
    }
}

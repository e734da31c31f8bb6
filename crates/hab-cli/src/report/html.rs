//! `index.html`: the report's Markdown turned into one self-contained page (PNG plots embedded
//! as data URIs), for the subset the report writes: headings, paragraphs, bullet lists, tables,
//! images, links, inline code and bold.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:70em;margin:2em auto;\
padding:0 1em;line-height:1.45;color:#222}table{border-collapse:collapse;margin:1em 0;\
font-size:0.92em}th,td{border:1px solid #ccc;padding:0.25em 0.6em}td{text-align:right}\
td:first-child{text-align:left}th{background:#f3f3f3}code{background:#f3f3f3;\
padding:0 0.2em}img{max-width:100%}";

/// The page for `markdown`; images are read from `dir` and embedded.
pub fn page(markdown: &str, dir: &Path) -> String {
    let mut html = String::new();
    let title = markdown
        .lines()
        .find_map(|line| line.strip_prefix("# "))
        .unwrap_or("Hab report");
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        escape(title)
    );
    let mut blocks: Vec<Vec<&str>> = vec![Vec::new()];
    for line in markdown.lines() {
        if line.trim().is_empty() {
            blocks.push(Vec::new());
        } else {
            blocks.last_mut().expect("one block").push(line);
        }
    }
    for block in blocks.iter().filter(|block| !block.is_empty()) {
        html += &render_block(block, dir);
    }
    html += "</body>\n</html>\n";
    html
}

fn render_block(lines: &[&str], dir: &Path) -> String {
    let first = lines[0];
    if let Some(level) = heading_level(first) {
        let text = first[level..].trim();
        return format!("<h{level}>{}</h{level}>\n", inline(text));
    }
    if first.starts_with('|') {
        return table(lines);
    }
    if first.starts_with("- ") {
        let mut html = String::from("<ul>\n");
        let mut item = String::new();
        for line in lines {
            if let Some(rest) = line.strip_prefix("- ") {
                if !item.is_empty() {
                    let _ = writeln!(html, "<li>{}</li>", inline(&item));
                }
                item = rest.to_string();
            } else {
                item.push(' ');
                item.push_str(line.trim());
            }
        }
        let _ = writeln!(html, "<li>{}</li>\n</ul>", inline(&item));
        return html;
    }
    if let Some(image) = image(first) {
        return image_tag(image.0, image.1, dir);
    }
    format!("<p>{}</p>\n", inline(&lines.join(" ")))
}

fn heading_level(line: &str) -> Option<usize> {
    let level = line.chars().take_while(|&c| c == '#').count();
    (1..=6)
        .contains(&level)
        .then_some(level)
        .filter(|&level| line[level..].starts_with(' '))
}

fn table(lines: &[&str]) -> String {
    let cells = |line: &str| -> Vec<String> {
        line.trim()
            .trim_matches('|')
            .split('|')
            .map(|cell| inline(cell.trim()))
            .collect()
    };
    let mut html = String::from("<table>\n");
    let _ = writeln!(
        html,
        "<tr>{}</tr>",
        cells(lines[0])
            .iter()
            .map(|cell| format!("<th>{cell}</th>"))
            .collect::<String>()
    );
    for line in lines.iter().skip(2) {
        let _ = writeln!(
            html,
            "<tr>{}</tr>",
            cells(line)
                .iter()
                .map(|cell| format!("<td>{cell}</td>"))
                .collect::<String>()
        );
    }
    html += "</table>\n";
    html
}

/// `![alt](file)` alone on a line.
fn image(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix("![")?;
    let (alt, rest) = rest.split_once("](")?;
    let file = rest.strip_suffix(')')?;
    Some((alt, file))
}

fn image_tag(alt: &str, file: &str, dir: &Path) -> String {
    match fs::read(dir.join(file)) {
        Ok(bytes) => format!(
            "<p><img alt=\"{}\" src=\"data:image/png;base64,{}\"></p>\n",
            escape(alt),
            base64(&bytes)
        ),
        Err(why) => format!("<p>({}: {why})</p>\n", escape(file)),
    }
}

/// Inline Markdown: code spans, bold and links, with everything else escaped.
fn inline(text: &str) -> String {
    let mut html = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('`') {
            if let Some((code, tail)) = after.split_once('`') {
                let _ = write!(html, "<code>{}</code>", escape(code));
                rest = tail;
                continue;
            }
        }
        if let Some(after) = rest.strip_prefix("**") {
            if let Some((bold, tail)) = after.split_once("**") {
                let _ = write!(html, "<strong>{}</strong>", inline(bold));
                rest = tail;
                continue;
            }
        }
        if let Some(after) = rest.strip_prefix('[') {
            if let Some((label, tail)) = after.split_once("](") {
                if let Some((target, tail)) = tail.split_once(')') {
                    let _ = write!(html, "<a href=\"{}\">{}</a>", escape(target), inline(label));
                    rest = tail;
                    continue;
                }
            }
        }
        let next = rest
            .char_indices()
            .skip(1)
            .find(|&(_, c)| matches!(c, '`' | '*' | '['))
            .map_or(rest.len(), |(index, _)| index);
        html += &escape(&rest[..next]);
        rest = &rest[next..];
    }
    html
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let value = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(value >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn markdown_subset_becomes_html() {
        let markdown = "# Title\n\nSome `code` and **bold** [link](a.html) <x>.\n\n\
                        | a | b |\n| --- | ---: |\n| 1 | 2 |\n\n- one\n- two\n  more\n";
        let html = page(markdown, Path::new("."));
        assert!(html.contains("<h1>Title</h1>"));
        assert!(html.contains(
            "<p>Some <code>code</code> and <strong>bold</strong> <a href=\"a.html\">link</a> &lt;x&gt;.</p>"
        ));
        assert!(html.contains("<tr><th>a</th><th>b</th></tr>\n<tr><td>1</td><td>2</td></tr>"));
        assert!(html.contains("<li>one</li>\n<li>two more</li>"));
    }
}

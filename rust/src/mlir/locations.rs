//! Locations: `loc(...)` after ops (with `#loc` aliases resolved, as jaxlib prints them) and
//! the implicit `loc("FILE":line:column)` of ops without one.

use super::cursor::{Cursor, Res};
use super::reader::Reader;

impl Reader<'_> {
    /// Collects `#name = loc(...)` definitions anywhere at the top level (jaxlib prints them
    /// after the module); other aliases are left for `skip_alias` to refuse.
    pub(crate) fn aliases(&mut self) -> Result<(), super::ReadError> {
        let src = self.c.src;
        let mut start = 0;
        while let Some(i) = src[start..].find('#') {
            let at = start + i;
            start = at + 1;
            if at != 0 && src.as_bytes()[at - 1] != b'\n' {
                continue;
            }
            let mut c = Cursor::new(src);
            c.pos = at;
            let Some(name) = c.sigil_id(b'#') else { continue };
            if !c.eat("=") || !c.eat_kw("loc") {
                continue;
            }
            let body = c.group()?;
            self.loc_aliases.insert(name.to_string(), body[1..body.len() - 1].to_string());
        }
        Ok(())
    }

    pub(crate) fn skip_alias(&mut self) -> Res<()> {
        let at = self.c.pos;
        let Some(_) = self.c.sigil_id(b'#') else {
            return Err(self.c.unsupported(at, "type aliases ('!name = ...') are not read natively"));
        };
        self.c.expect("=")?;
        if !self.c.eat_kw("loc") {
            return Err(self.c.unsupported(at, "attribute aliases ('#name = ...') are not read natively"));
        }
        self.c.group()?;
        Ok(())
    }

    /// `loc("-":line:col)` of byte offset `at`, as jaxlib's parser gives ops without one.
    pub(crate) fn implicit_loc(&mut self, at: usize) -> u32 {
        if at < self.line_pos {
            self.line_pos = 0;
            self.line = 1;
            self.line_start = 0;
        }
        let b = &self.c.b[self.line_pos..at];
        for (i, &ch) in b.iter().enumerate() {
            if ch == b'\n' {
                self.line += 1;
                self.line_start = self.line_pos + i + 1;
            }
        }
        self.line_pos = at;
        let column = (at - self.line_start + 1) as u32;
        self.p.implicit_loc(self.line as u32, column)
    }

    /// A trailing `loc(...)`, with aliases resolved, or `None`.
    pub(crate) fn trailing_loc(&mut self) -> Res<Option<u32>> {
        if !self.c.eat_kw("loc") {
            return Ok(None);
        }
        let at = self.c.pos;
        let body = self.c.group()?;
        let inner = &body[1..body.len() - 1];
        let resolved = self.resolve_loc(inner, at)?;
        Ok(Some(self.intern(&format!("loc({resolved})"))))
    }

    pub(crate) fn resolve_loc(&self, inner: &str, at: usize) -> Res<String> {
        let mut text = inner.trim().to_string();
        for _ in 0..64 {
            let Some(i) = find_alias(&text) else { return Ok(text) };
            let end = i + 1 + text[i + 1..].bytes().take_while(|&c| c.is_ascii_alphanumeric() || c == b'_').count();
            let name = &text[i..end];
            let Some(body) = self.loc_aliases.get(name) else {
                return Err(self.c.error(at, format!("undefined location alias {name}")));
            };
            text = format!("{}{}{}", &text[..i], body, &text[end..]);
        }
        Err(self.c.error(at, "location aliases nest more than 64 deep"))
    }
}

/// The first `#alias` reference in location text outside string literals.
fn find_alias(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        match b[i] {
            b'\\' if in_str => i += 1,
            b'"' => in_str = !in_str,
            b'#' if !in_str => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

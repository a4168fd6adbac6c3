//! A byte cursor over MLIR text: whitespace and `//` comments skipped between tokens, MLIR's
//! identifier classes (bare ids, `%`/`@`/`^`/`#`/`!` ids), string literals, integers, and raw
//! balanced spans for attribute values and types. Errors carry the byte offset; `ReadError`
//! turns it into line and column. Loops only: no recursion on nesting.

use super::ReadError;

pub(crate) struct Cursor<'a> {
    pub(crate) src: &'a str,
    pub(crate) b: &'a [u8],
    pub(crate) pos: usize,
}

pub(crate) type Res<T> = std::result::Result<T, ReadError>;

/// Per byte, as bits: 1 when it may start a bare identifier (letters, `_`), 2 when it may
/// continue one (letters, digits, `_`, `$`, `.`: MLIR's `bare-id`).
const ID_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        if b.is_ascii_alphabetic() || b == b'_' {
            t[c] = 3;
        } else if b.is_ascii_digit() || b == b'$' || b == b'.' {
            t[c] = 2;
        }
        c += 1;
    }
    t
};

fn is_id_start(c: u8) -> bool {
    ID_CLASS[c as usize] & 1 != 0
}

fn is_id_char(c: u8) -> bool {
    ID_CLASS[c as usize] != 0
}

/// The characters of a suffix id (`%0`, `%arg_1`, `^bb0`, `#loc3`, `%cst-1`).
fn is_suffix_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.' | b'-')
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(src: &'a str) -> Self {
        Cursor { src, b: src.as_bytes(), pos: 0 }
    }

    pub(crate) fn error(&self, at: usize, message: impl Into<String>) -> ReadError {
        ReadError::syntax(self.src, at, message)
    }

    pub(crate) fn unsupported(&self, at: usize, message: impl Into<String>) -> ReadError {
        ReadError::unsupported(self.src, at, message)
    }

    /// Skips whitespace and `//` line comments.
    pub(crate) fn ws(&mut self) {
        let b = self.b;
        loop {
            while self.pos < b.len() && b[self.pos].is_ascii_whitespace() {
                self.pos += 1;
            }
            if b[self.pos..].starts_with(b"//") {
                while self.pos < b.len() && b[self.pos] != b'\n' {
                    self.pos += 1;
                }
            } else {
                return;
            }
        }
    }

    pub(crate) fn at_end(&mut self) -> bool {
        self.ws();
        self.pos >= self.b.len()
    }

    /// The next byte after whitespace, without taking it.
    pub(crate) fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.pos).copied()
    }

    pub(crate) fn at(&mut self, tok: &str) -> bool {
        self.ws();
        self.b[self.pos..].starts_with(tok.as_bytes())
    }

    pub(crate) fn eat(&mut self, tok: &str) -> bool {
        if self.at(tok) {
            self.pos += tok.len();
            true
        } else {
            false
        }
    }

    /// Takes the keyword `kw` when it is a whole bare identifier here.
    pub(crate) fn eat_kw(&mut self, kw: &str) -> bool {
        if self.at(kw) && !self.b.get(self.pos + kw.len()).is_some_and(|&c| is_id_char(c)) {
            self.pos += kw.len();
            true
        } else {
            false
        }
    }

    /// What is here, for error messages: up to 24 characters or "end of input".
    pub(crate) fn found(&mut self) -> String {
        self.ws();
        let got: String = self.src[self.pos..].chars().take(24).collect();
        let got = got.split('\n').next().unwrap_or("").to_string();
        if got.is_empty() {
            "end of input".to_string()
        } else {
            format!("'{got}'")
        }
    }

    pub(crate) fn fail<T>(&mut self, expected: &str) -> Res<T> {
        let found = self.found();
        Err(self.error(self.pos, format!("expected {expected}, got {found}")))
    }

    pub(crate) fn expect(&mut self, tok: &str) -> Res<()> {
        if self.eat(tok) {
            Ok(())
        } else {
            self.fail(&format!("'{tok}'"))
        }
    }

    pub(crate) fn expect_kw(&mut self, kw: &str) -> Res<()> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            self.fail(&format!("'{kw}'"))
        }
    }

    /// A bare identifier `[A-Za-z_][A-Za-z0-9_$.]*`.
    pub(crate) fn ident(&mut self) -> Option<&'a str> {
        self.ws();
        let start = self.pos;
        if !self.b.get(start).is_some_and(|&c| is_id_start(c)) {
            return None;
        }
        let mut end = start + 1;
        while end < self.b.len() && is_id_char(self.b[end]) {
            end += 1;
        }
        self.pos = end;
        Some(&self.src[start..end])
    }

    pub(crate) fn expect_ident(&mut self, what: &str) -> Res<&'a str> {
        match self.ident() {
            Some(id) => Ok(id),
            None => self.fail(what),
        }
    }

    /// A sigil id such as `%arg0` or `^bb1` (sigil included), or `None`.
    pub(crate) fn sigil_id(&mut self, sigil: u8) -> Option<&'a str> {
        self.ws();
        let start = self.pos;
        if self.b.get(start) != Some(&sigil) {
            return None;
        }
        let mut end = start + 1;
        while end < self.b.len() && is_suffix_char(self.b[end]) {
            end += 1;
        }
        if end == start + 1 {
            return None;
        }
        self.pos = end;
        Some(&self.src[start..end])
    }

    /// A symbol `@name` or `@"any name"`: its name, unescaped.
    pub(crate) fn symbol(&mut self) -> Res<Option<String>> {
        self.ws();
        if self.b.get(self.pos) != Some(&b'@') {
            return Ok(None);
        }
        self.pos += 1;
        if self.b.get(self.pos) == Some(&b'"') {
            let raw = self.string_lit()?.unwrap_or("\"\"");
            return Ok(Some(unescape(raw)));
        }
        let start = self.pos;
        while self.pos < self.b.len() && is_suffix_char(self.b[self.pos]) {
            self.pos += 1;
        }
        if self.pos == start {
            return self.fail("a symbol name after '@'");
        }
        Ok(Some(self.src[start..self.pos].to_string()))
    }

    /// A string literal, raw (quotes and escapes kept), or `None`.
    pub(crate) fn string_lit(&mut self) -> Res<Option<&'a str>> {
        self.ws();
        let start = self.pos;
        if self.b.get(start) != Some(&b'"') {
            return Ok(None);
        }
        let end = self.string_end(start)?;
        self.pos = end;
        Ok(Some(&self.src[start..end]))
    }

    /// The offset just past the string literal opening at `start`.
    fn string_end(&self, start: usize) -> Res<usize> {
        let b = self.b;
        let mut i = start + 1;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b'"' => return Ok(i + 1),
                b'\n' => break,
                _ => i += 1,
            }
        }
        Err(self.error(start, "string literal is not closed on its line"))
    }

    /// An integer literal (decimal, optional sign), or `None`.
    pub(crate) fn int(&mut self) -> Res<Option<i64>> {
        self.ws();
        let start = self.pos;
        let mut end = start;
        if self.b.get(end) == Some(&b'-') {
            end += 1;
        }
        let digits = end;
        while end < self.b.len() && self.b[end].is_ascii_digit() {
            end += 1;
        }
        if end == digits {
            return Ok(None);
        }
        match self.src[start..end].parse::<i64>() {
            Ok(v) => {
                self.pos = end;
                Ok(Some(v))
            }
            Err(_) => Err(self.error(start, format!("integer {} does not fit 64 bits", &self.src[start..end]))),
        }
    }

    pub(crate) fn expect_int(&mut self, what: &str) -> Res<i64> {
        match self.int()? {
            Some(v) => Ok(v),
            None => self.fail(what),
        }
    }

    /// Raw text from here to the first of `stops` outside brackets and strings (or to the
    /// bracket that closes the enclosing one), trimmed. The `>` of `->` does not close.
    pub(crate) fn balanced(&mut self, stops: &[u8]) -> Res<&'a str> {
        self.ws();
        let start = self.pos;
        let b = self.b;
        let mut depth = 0usize;
        let mut i = start;
        while i < b.len() {
            let c = b[i];
            match c {
                b'"' => {
                    i = self.string_end(i)?;
                    continue;
                }
                b'/' if b.get(i + 1) == Some(&b'/') => {
                    while i < b.len() && b[i] != b'\n' {
                        i += 1;
                    }
                    continue;
                }
                b'(' | b'[' | b'{' | b'<' => depth += 1,
                b'>' if i > 0 && b[i - 1] == b'-' => {}
                b')' | b']' | b'}' | b'>' => {
                    if depth == 0 {
                        break;
                    }
                    depth -= 1;
                }
                _ if depth == 0 && stops.contains(&c) => break,
                _ => {}
            }
            i += 1;
        }
        if depth != 0 {
            return Err(self.error(start, "bracket not closed"));
        }
        self.pos = i;
        Ok(self.src[start..i].trim_end())
    }

    /// A `<...>`, `(...)`, `[...]` or `{...}` group starting here, brackets included.
    pub(crate) fn group(&mut self) -> Res<&'a str> {
        self.ws();
        let start = self.pos;
        let open = match self.b.get(start) {
            Some(&c @ (b'<' | b'(' | b'[' | b'{')) => c,
            _ => return self.fail("'<', '(', '[' or '{'"),
        };
        let _ = open;
        self.pos += 1;
        self.balanced(&[])?;
        if self.pos >= self.b.len() {
            return Err(self.error(start, "bracket not closed"));
        }
        self.pos += 1;
        Ok(&self.src[start..self.pos])
    }

    /// A type, raw: `tensor<...>`, `!dialect.type<...>`, `tuple<...>`, `f32`, `complex<f32>`,
    /// a function type `(A, B) -> C`.
    pub(crate) fn type_text(&mut self) -> Res<&'a str> {
        self.ws();
        let start = self.pos;
        match self.b.get(start) {
            Some(b'!') => {
                self.pos += 1;
                while self.pos < self.b.len() && is_id_char(self.b[self.pos]) {
                    self.pos += 1;
                }
            }
            Some(b'(') => {
                self.group()?;
                self.expect("->")?;
                if self.peek() == Some(b'(') {
                    self.group()?;
                } else {
                    self.type_text()?;
                }
                return Ok(&self.src[start..self.pos]);
            }
            Some(&c) if is_id_start(c) => {
                self.ident();
            }
            _ => return self.fail("a type"),
        }
        if self.b.get(self.pos) == Some(&b'<') {
            self.group()?;
        }
        Ok(&self.src[start..self.pos])
    }
}

/// The characters of an MLIR string literal (quotes included) with `\"`, `\\`, `\n`, `\t` and
/// `\XX` (two hex digits) escapes resolved; bytes that are not UTF-8 are replaced.
pub(crate) fn unescape(raw: &str) -> String {
    let inner = &raw.as_bytes()[1..raw.len().saturating_sub(1).max(1)];
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        let c = inner[i];
        if c == b'\\' && i + 1 < inner.len() {
            let n = inner[i + 1];
            let hex = |x: u8| (x as char).to_digit(16);
            match n {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'\\' | b'"' => out.push(n),
                _ => match (hex(n), inner.get(i + 2).and_then(|&x| hex(x))) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 1;
                    }
                    _ => out.push(n),
                },
            }
            i += 2;
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

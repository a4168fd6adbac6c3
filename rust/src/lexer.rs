//! The one lexer behind every text format the core reads (sdy meshes and shardings in
//! `text.rs`, sharding rules in `rule/text.rs`, XLA HLO shardings in `convert/hlo.rs`): a cursor
//! over the input with MLIR's whitespace and `//` comments skipped between tokens, and errors
//! that give the byte offset, what was expected and what was found.

use crate::error::{Error, Result};

pub(crate) struct Lexer<'a> {
    pub(crate) src: &'a str,
    pub(crate) pos: usize,
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(src: &'a str) -> Self {
        Lexer { src, pos: 0 }
    }

    pub(crate) fn rest(&self) -> &'a str {
        &self.src[self.pos..]
    }

    /// Skips whitespace and `//` line comments.
    pub(crate) fn skip_ws(&mut self) {
        loop {
            let r = self.rest();
            let t = r.trim_start();
            self.pos += r.len() - t.len();
            if t.starts_with("//") {
                self.pos += t.find('\n').unwrap_or(t.len());
            } else {
                break;
            }
        }
    }

    /// A parse error at the next token: `expected X at offset N of "...", got '...'`.
    pub(crate) fn err<T>(&mut self, expected: &str) -> Result<T> {
        self.skip_ws();
        let got: String = self.rest().chars().take(24).collect();
        let got = if got.is_empty() { "end of input".to_string() } else { format!("'{got}'") };
        Err(Error::parse(self.pos, format!("expected {expected} at offset {} of {:?}, got {got}", self.pos, self.src)))
    }

    pub(crate) fn peek(&mut self, tok: &str) -> bool {
        self.skip_ws();
        self.rest().starts_with(tok)
    }

    pub(crate) fn eat(&mut self, tok: &str) -> bool {
        if self.peek(tok) {
            self.pos += tok.len();
            true
        } else {
            false
        }
    }

    pub(crate) fn expect(&mut self, tok: &str) -> Result<()> {
        if self.eat(tok) {
            Ok(())
        } else {
            self.err(&format!("'{tok}'"))
        }
    }

    /// An MLIR bare identifier `[A-Za-z_][A-Za-z0-9_$.]*` starting at the next token, with its
    /// offset.
    pub(crate) fn bare_id(&mut self) -> Option<(usize, &'a str)> {
        self.skip_ws();
        let r = self.rest();
        if !r.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            return None;
        }
        let len = r.find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.'))).unwrap_or(r.len());
        let start = self.pos;
        self.pos += len;
        Some((start, &r[..len]))
    }

    /// `kw` as a whole identifier (not the prefix of a longer one).
    pub(crate) fn eat_keyword(&mut self, kw: &str) -> bool {
        let save = self.pos;
        match self.bare_id() {
            Some((_, k)) if k == kw => true,
            _ => {
                self.pos = save;
                false
            }
        }
    }

    /// A decimal integer (optionally negative) that fits in 64 bits.
    pub(crate) fn int(&mut self) -> Result<i64> {
        self.skip_ws();
        let r = self.rest();
        let neg = usize::from(r.starts_with('-'));
        let digits = r[neg..].bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return self.err("an integer");
        }
        let len = neg + digits;
        let v = r[..len].parse::<i64>().map_err(|_| {
            Error::parse(
                self.pos,
                format!(
                    "expected an integer that fits in 64 bits at offset {} of {:?}, got {}",
                    self.pos,
                    self.src,
                    &r[..len]
                ),
            )
        })?;
        self.pos += len;
        Ok(v)
    }

    /// Comma-separated items up to `close`; the opening token has been consumed.
    pub(crate) fn list<T>(&mut self, close: &str, mut item: impl FnMut(&mut Self) -> Result<T>) -> Result<Vec<T>> {
        let mut out = Vec::new();
        if self.eat(close) {
            return Ok(out);
        }
        loop {
            out.push(item(self)?);
            if self.eat(close) {
                return Ok(out);
            }
            self.expect(",")?;
        }
    }

    /// Nothing but whitespace is left.
    pub(crate) fn done(&mut self) -> Result<()> {
        self.skip_ws();
        if self.pos == self.src.len() {
            Ok(())
        } else {
            self.err("end of input")
        }
    }
}

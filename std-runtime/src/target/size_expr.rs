//! Evaluating the size macros of a bundle with run-time dimensions: `#define
//! MODEL_INPUT_X_SIZE(N) ((N)*24)` is read from `model.h` and evaluated at the values a run is
//! given, so the harness checks each array's length before anything is built.
//!
//! Invariant: the grammar is the exporter's (`Node::render_c` of an element count): integers,
//! the macro's parameters, `+ - * / %` with C precedence, parentheses; `/` and `%` are taken on
//! non-negative operands only (as the exporter renders them). Anything else, an overflow or a
//! division by zero is an error, never a guess.

/// Evaluates `body` with each name of `args` bound to the value at the same position.
pub fn eval(body: &str, args: &[(&str, i64)]) -> Result<i64, String> {
    let tokens = tokenize(body)?;
    let mut p = Parser {
        tokens: &tokens,
        at: 0,
        args,
    };
    let v = p.sum()?;
    if p.at != tokens.len() {
        return Err(format!("unexpected `{}` in `{body}`", tokens[p.at]));
    }
    Ok(v)
}

fn tokenize(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c.is_ascii_alphanumeric() || c == '_' {
            let mut w = String::new();
            while let Some(&d) = chars
                .peek()
                .filter(|d| d.is_ascii_alphanumeric() || **d == '_')
            {
                w.push(d);
                chars.next();
            }
            out.push(w);
        } else if "+-*/%()".contains(c) {
            out.push(c.to_string());
            chars.next();
        } else {
            return Err(format!("unexpected character `{c}` in `{s}`"));
        }
    }
    Ok(out)
}

struct Parser<'a> {
    tokens: &'a [String],
    at: usize,
    args: &'a [(&'a str, i64)],
}

impl Parser<'_> {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.at).map(String::as_str)
    }

    fn sum(&mut self) -> Result<i64, String> {
        let mut v = self.product()?;
        while let Some(op @ ("+" | "-")) = self.peek() {
            let add = op == "+";
            self.at += 1;
            let r = self.product()?;
            let next = if add {
                v.checked_add(r)
            } else {
                v.checked_sub(r)
            };
            v = next.ok_or("overflow")?;
        }
        Ok(v)
    }

    fn product(&mut self) -> Result<i64, String> {
        let mut v = self.atom()?;
        while let Some(op @ ("*" | "/" | "%")) = self.peek() {
            let op = op.to_string();
            self.at += 1;
            let r = self.atom()?;
            if op != "*" && (r <= 0 || v < 0) {
                return Err(format!("{v} {op} {r} is not a size computation"));
            }
            v = match op.as_str() {
                "*" => v.checked_mul(r).ok_or("overflow")?,
                "/" => v / r,
                _ => v % r,
            };
        }
        Ok(v)
    }

    fn atom(&mut self) -> Result<i64, String> {
        let t = self.peek().ok_or("the expression ends early")?.to_string();
        self.at += 1;
        match t.as_str() {
            "(" => {
                let v = self.sum()?;
                match self.peek() {
                    Some(")") => {
                        self.at += 1;
                        Ok(v)
                    }
                    _ => Err("unclosed `(`".into()),
                }
            }
            "-" => Ok(-self.atom()?),
            w => {
                let digits = w.trim_end_matches(['u', 'U', 'l', 'L']);
                if let Ok(n) = digits.parse::<i64>() {
                    return Ok(n);
                }
                let found = self.args.iter().find(|(n, _)| *n == w);
                found.map(|(_, v)| *v).ok_or(format!("unknown name `{w}`"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::eval;

    #[test]
    fn evaluates_the_exporters_forms() {
        assert_eq!(eval("((N)*24)", &[("N", 3)]), Ok(72));
        assert_eq!(eval("(((B)*(S))*8)", &[("B", 2), ("S", 5)]), Ok(80));
        assert_eq!(eval("(((S)+3)/2) * 4 - 1", &[("S", 4)]), Ok(11));
        assert_eq!(eval("12u", &[]), Ok(12));
        assert!(eval("(N*2", &[("N", 1)]).is_err());
        assert!(eval("M*2", &[("N", 1)]).is_err());
        assert!(eval("N/0", &[("N", 1)]).is_err());
        assert!(eval("pg_floordiv(N,2)", &[("N", 1)]).is_err());
    }
}

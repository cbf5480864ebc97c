//! A small recursive-descent evaluator for arithmetic expressions.
//!
//! Grammar (lowest precedence first):
//!
//! ```text
//! expr    := term (('+' | '-') term)*
//! term    := unary (('*' | '/' | '%') unary)*
//! unary   := ('+' | '-') unary | power
//! power   := primary (('^' | '**') unary)?      right-associative
//! primary := number | name | name '(' expr (',' expr)* ')' | '(' expr ')'
//! ```
//!
//! `-2^2` is `-(2^2)` and `2^-1` is `0.5`, as in most calculators.
//! Columns in error messages count characters from 1.

use std::fmt;

/// Longest expression accepted, in characters.
pub const MAX_LEN: usize = 10_000;
/// Deepest nesting of parentheses, calls, signs and powers accepted.
pub const MAX_DEPTH: usize = 256;

/// Why an expression could not be evaluated; the message names the column.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalError(pub String);

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

type Result<T> = std::result::Result<T, EvalError>;

fn err<T>(message: impl Into<String>) -> Result<T> {
    Err(EvalError(message.into()))
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64, String),
    Name(String),
    Op(char),
    End,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    col: usize,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.tok {
            Tok::Num(_, text) => write!(f, "number '{text}' at column {}", self.col),
            Tok::Name(name) => write!(f, "name '{name}' at column {}", self.col),
            Tok::Op(c) => write!(f, "'{c}' at column {}", self.col),
            Tok::End => f.write_str("end of expression"),
        }
    }
}

fn tokenize(input: &str) -> Result<Vec<Token>> {
    let chars: Vec<char> = input.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                // An exponent only if digits follow; otherwise leave `e` alone
                // so that the parser reports it.
                let mut j = i + 1;
                if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
                    j += 1;
                }
                if j < chars.len() && chars[j].is_ascii_digit() {
                    i = j;
                    while i < chars.len() && chars[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let text: String = chars[start..i].iter().collect();
            match text.parse::<f64>() {
                Ok(v) if v.is_infinite() => {
                    return err(format!("number '{text}' at column {col} is too large"));
                }
                Ok(v) => tokens.push(Token {
                    tok: Tok::Num(v, text),
                    col,
                }),
                Err(_) => return err(format!("malformed number '{text}' at column {col}")),
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let name: String = chars[start..i].iter().collect();
            tokens.push(Token {
                tok: Tok::Name(name),
                col,
            });
        } else {
            let op = match c {
                '*' if chars.get(i + 1) == Some(&'*') => {
                    i += 1;
                    '^'
                }
                '+' | '-' | '*' | '/' | '%' | '^' | '(' | ')' | ',' => c,
                '\u{2212}' => '-',
                '\u{00d7}' | '\u{22c5}' => '*',
                '\u{00f7}' => '/',
                _ => return err(format!("unexpected character '{c}' at column {col}")),
            };
            i += 1;
            tokens.push(Token {
                tok: Tok::Op(op),
                col,
            });
        }
    }
    tokens.push(Token {
        tok: Tok::End,
        col: chars.len() + 1,
    });
    Ok(tokens)
}

/// Evaluates `input` and returns a finite number.
pub fn evaluate(input: &str) -> Result<f64> {
    let len = input.chars().count();
    if len > MAX_LEN {
        return err(format!(
            "expression is too long ({len} characters, at most {MAX_LEN})"
        ));
    }
    if input.trim().is_empty() {
        return err("expression is empty");
    }
    let mut p = Parser {
        tokens: tokenize(input)?,
        pos: 0,
        depth: 0,
    };
    let value = p.expr()?;
    let next = p.peek();
    if next.tok != Tok::End {
        return err(format!("unexpected {next}"));
    }
    Ok(value)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Token {
        self.tokens[self.pos.min(self.tokens.len() - 1)].clone()
    }

    fn next(&mut self) -> Token {
        let t = self.peek();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn is_op(&self, op: char) -> bool {
        self.peek().tok == Tok::Op(op)
    }

    /// Counts one level of nesting opened by the token at `col`.
    fn enter(&mut self, col: usize) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return err(format!(
                "expression is nested too deeply at column {col} (at most {MAX_DEPTH} levels)"
            ));
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<f64> {
        let mut acc = self.term()?;
        while let Tok::Op(op @ ('+' | '-')) = self.peek().tok {
            let col = self.next().col;
            let rhs = self.term()?;
            let v = if op == '+' { acc + rhs } else { acc - rhs };
            acc = finite(v, || format!("{} {op} {}", show(acc), show(rhs)), col)?;
        }
        Ok(acc)
    }

    fn term(&mut self) -> Result<f64> {
        let mut acc = self.unary()?;
        while let Tok::Op(op @ ('*' | '/' | '%')) = self.peek().tok {
            let col = self.next().col;
            let rhs = self.unary()?;
            let v = match op {
                '*' => acc * rhs,
                _ if rhs == 0.0 => {
                    let what = if op == '/' { "division" } else { "modulo" };
                    return err(format!("{what} by zero at column {col}"));
                }
                '/' => acc / rhs,
                _ => acc % rhs,
            };
            acc = finite(v, || format!("{} {op} {}", show(acc), show(rhs)), col)?;
        }
        Ok(acc)
    }

    fn unary(&mut self) -> Result<f64> {
        let negate = match self.peek().tok {
            Tok::Op('-') => true,
            Tok::Op('+') => false,
            _ => return self.power(),
        };
        let col = self.next().col;
        self.enter(col)?;
        let v = self.unary()?;
        self.depth -= 1;
        Ok(if negate { -v } else { v })
    }

    fn power(&mut self) -> Result<f64> {
        let base = self.primary()?;
        if !self.is_op('^') {
            return Ok(base);
        }
        let col = self.next().col;
        self.enter(col)?;
        let exp = self.unary()?;
        self.depth -= 1;
        if base == 0.0 && exp < 0.0 {
            return err(format!(
                "division by zero at column {col} (0 to a negative power)"
            ));
        }
        finite(
            base.powf(exp),
            || format!("{}^{}", show(base), show(exp)),
            col,
        )
    }

    fn primary(&mut self) -> Result<f64> {
        let t = self.next();
        match t.tok {
            Tok::Num(v, _) => Ok(v),
            Tok::Op('(') => {
                self.enter(t.col)?;
                let v = self.expr()?;
                self.expect_close(t.col)?;
                self.depth -= 1;
                Ok(v)
            }
            Tok::Name(name) => {
                if self.is_op('(') {
                    self.call(&name, t.col)
                } else {
                    constant(&name, t.col)
                }
            }
            _ => err(format!("unexpected {t}")),
        }
    }

    fn expect_close(&mut self, open_col: usize) -> Result<()> {
        let t = self.next();
        match t.tok {
            Tok::Op(')') => Ok(()),
            Tok::End => err(format!("missing ')' for the '(' at column {open_col}")),
            _ => err(format!("unexpected {t}, expected ')'")),
        }
    }

    fn call(&mut self, name: &str, col: usize) -> Result<f64> {
        let open = self.next().col;
        self.enter(open)?;
        let mut args = Vec::new();
        if !self.is_op(')') {
            args.push(self.expr()?);
            while self.is_op(',') {
                self.next();
                args.push(self.expr()?);
            }
        }
        self.expect_close(open)?;
        self.depth -= 1;
        apply(name, &args, col)
    }
}

fn constant(name: &str, col: usize) -> Result<f64> {
    match name.to_ascii_lowercase().as_str() {
        "pi" | "\u{3c0}" => Ok(std::f64::consts::PI),
        "e" => Ok(std::f64::consts::E),
        "tau" => Ok(std::f64::consts::TAU),
        lower if function_arity(lower).is_some() => err(format!(
            "function '{name}' at column {col} needs '(' and arguments"
        )),
        _ => err(format!(
            "unknown name '{name}' at column {col} (constants: pi, e, tau)"
        )),
    }
}

/// The number of arguments a function takes: (min, max).
fn function_arity(name: &str) -> Option<(usize, usize)> {
    Some(match name {
        "sqrt" | "abs" | "ln" | "log10" | "log2" | "exp" | "sin" | "cos" | "tan" | "asin"
        | "acos" | "atan" | "floor" | "ceil" => (1, 1),
        "round" => (1, 2),
        "min" | "max" => (1, usize::MAX),
        _ => return None,
    })
}

fn apply(name: &str, args: &[f64], col: usize) -> Result<f64> {
    let lower = name.to_ascii_lowercase();
    let Some((min, max)) = function_arity(&lower) else {
        let hint = if lower == "log" {
            " (use ln or log10)"
        } else {
            ""
        };
        return err(format!(
            "unknown function '{name}' at column {col}{hint}; functions: sqrt abs ln log10 log2 \
             exp sin cos tan asin acos atan floor ceil round min max"
        ));
    };
    if args.len() < min || args.len() > max {
        let expected = match (min, max) {
            (1, 1) => "1 argument".to_string(),
            (1, usize::MAX) => "at least 1 argument".to_string(),
            (a, b) => format!("{a} to {b} arguments"),
        };
        return err(format!(
            "{lower}() at column {col} takes {expected}, got {}",
            args.len()
        ));
    }
    let x = args[0];
    let v = match lower.as_str() {
        "sqrt" => x.sqrt(),
        "abs" => x.abs(),
        "ln" => x.ln(),
        "log10" => x.log10(),
        "log2" => x.log2(),
        "exp" => x.exp(),
        "sin" => x.sin(),
        "cos" => x.cos(),
        "tan" => x.tan(),
        "asin" => x.asin(),
        "acos" => x.acos(),
        "atan" => x.atan(),
        "floor" => x.floor(),
        "ceil" => x.ceil(),
        "round" => match args.get(1) {
            None => x.round(),
            Some(&d) if d.fract() != 0.0 || !(-15.0..=15.0).contains(&d) => {
                return err(format!(
                    "round() at column {col}: digits must be a whole number from -15 to 15"
                ));
            }
            Some(&d) => {
                let scale = 10f64.powi(d as i32);
                (x * scale).round() / scale
            }
        },
        "min" => args.iter().copied().fold(f64::INFINITY, f64::min),
        "max" => args.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        _ => unreachable!("arity table and functions agree"),
    };
    if (lower == "ln" || lower == "log10" || lower == "log2") && x == 0.0 {
        return err(format!(
            "{lower}(0) at column {col} is undefined (negative infinity)"
        ));
    }
    let shown: Vec<String> = args.iter().map(|&a| show(a)).collect();
    finite(v, || format!("{lower}({})", shown.join(", ")), col)
}

/// Rejects NaN and infinities with a message naming the operation.
fn finite(v: f64, what: impl FnOnce() -> String, col: usize) -> Result<f64> {
    if v.is_nan() {
        err(format!("{} at column {col} is not a real number", what()))
    } else if v.is_infinite() {
        err(format!(
            "overflow: {} at column {col} is too large to represent",
            what()
        ))
    } else {
        Ok(v)
    }
}

fn show(v: f64) -> String {
    format_number(v)
}

/// Formats a result for a reader: whole numbers without ".0", at most 15
/// significant digits (so `0.1 + 0.2` is `0.3`), and exponent notation for
/// very large or very small magnitudes.
pub fn format_number(v: f64) -> String {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if v == 0.0 {
        return "0".to_string();
    }
    if !v.is_finite() {
        return v.to_string();
    }
    if v.fract() == 0.0 && v.abs() <= EXACT {
        return format!("{}", v as i64);
    }
    let r: f64 = format!("{v:.14e}").parse().unwrap_or(v);
    let a = r.abs();
    if r.fract() == 0.0 && a < 1e15 {
        format!("{}", r as i64)
    } else if !(1e-6..1e15).contains(&a) {
        format!("{r:e}")
    } else {
        format!("{r}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(s: &str) -> String {
        match evaluate(s) {
            Ok(v) => format_number(v),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn arithmetic_and_precedence() {
        assert_eq!(eval("1 + 2 * 3"), "7");
        assert_eq!(eval("(1 + 2) * 3"), "9");
        assert_eq!(eval("10 / 4"), "2.5");
        assert_eq!(eval("10 % 4"), "2");
        assert_eq!(eval("2 ^ 3 ^ 2"), "512");
        assert_eq!(eval("2 ** 10"), "1024");
        assert_eq!(eval("-2 ^ 2"), "-4");
        assert_eq!(eval("2 ^ -1"), "0.5");
        assert_eq!(eval("--3"), "3");
        assert_eq!(eval("+3 - -3"), "6");
        assert_eq!(eval("7 - 2 - 1"), "4");
        assert_eq!(eval("8 / 2 / 2"), "2");
    }

    #[test]
    fn literals_and_constants() {
        assert_eq!(eval("1.5e3"), "1500");
        assert_eq!(eval(".5 + 0.25"), "0.75");
        assert_eq!(eval("2E-3"), "0.002");
        assert_eq!(eval("pi"), "3.14159265358979");
        assert_eq!(eval("e"), "2.71828182845905");
        assert_eq!(eval("PI * 2 - tau"), "0");
    }

    #[test]
    fn functions() {
        assert_eq!(eval("sqrt(16)"), "4");
        assert_eq!(eval("abs(-3.5)"), "3.5");
        assert_eq!(eval("ln(e)"), "1");
        assert_eq!(eval("log10(1000)"), "3");
        assert_eq!(eval("exp(0)"), "1");
        assert_eq!(eval("sin(0) + cos(0)"), "1");
        assert_eq!(eval("tan(pi/4)"), "1");
        assert_eq!(eval("floor(2.7) + ceil(2.1) + round(2.5)"), "8");
        assert_eq!(eval("round(3.14159, 2)"), "3.14");
        assert_eq!(eval("min(3, 1, 2) + max(3, 1, 2)"), "4");
    }

    #[test]
    fn formatting() {
        assert_eq!(eval("0.1 + 0.2"), "0.3");
        assert_eq!(eval("2^53"), "9007199254740992");
        assert_eq!(eval("10^20"), "1e20");
        assert_eq!(eval("1/3"), "0.333333333333333");
        assert_eq!(eval("1e-9"), "1e-9");
        assert_eq!(eval("-0"), "0");
        assert_eq!(eval("-7.25"), "-7.25");
    }

    #[test]
    fn errors_name_the_column() {
        assert_eq!(eval("(1 + 2))"), "error: unexpected ')' at column 8");
        assert_eq!(eval("1 +"), "error: unexpected end of expression");
        assert_eq!(eval("(1 + 2"), "error: missing ')' for the '(' at column 1");
        assert_eq!(eval("2 $ 3"), "error: unexpected character '$' at column 3");
        assert_eq!(eval("2 3"), "error: unexpected number '3' at column 3");
        assert_eq!(eval("1..2"), "error: malformed number '1..2' at column 1");
        assert!(eval("foo + 1").starts_with("error: unknown name 'foo' at column 1"));
        assert!(eval("log(10)").contains("use ln or log10"));
        assert!(eval("sqrt(1, 2)").contains("takes 1 argument, got 2"));
        assert!(eval("sqrt").contains("needs '('"));
        assert_eq!(eval(""), "error: expression is empty");
    }

    #[test]
    fn math_errors() {
        assert_eq!(eval("1 / 0"), "error: division by zero at column 3");
        assert_eq!(eval("5 % (2 - 2)"), "error: modulo by zero at column 3");
        assert!(eval("0 ^ -1").contains("division by zero"));
        assert!(eval("sqrt(-1)").contains("sqrt(-1) at column 1 is not a real number"));
        assert!(eval("ln(0)").contains("undefined"));
        assert!(eval("10 ^ 400").starts_with("error: overflow"));
        assert!(eval("exp(1000)").starts_with("error: overflow"));
        assert_eq!(
            eval("1e400"),
            "error: number '1e400' at column 1 is too large"
        );
    }

    #[test]
    fn limits() {
        let long = "1+".repeat(MAX_LEN) + "1";
        assert!(eval(&long).contains("too long"));
        let deep = "(".repeat(300) + "1" + &")".repeat(300);
        assert_eq!(
            eval(&deep),
            "error: expression is nested too deeply at column 257 (at most 256 levels)"
        );
        let ok = "(".repeat(MAX_DEPTH) + "1" + &")".repeat(MAX_DEPTH);
        assert_eq!(eval(&ok), "1");
        let calls = "abs(".repeat(MAX_DEPTH) + "1" + &")".repeat(MAX_DEPTH);
        assert_eq!(eval(&calls), "1");
        let signs = "-".repeat(MAX_DEPTH) + "1";
        assert_eq!(eval(&signs), "1");
        let signs = "-".repeat(1000) + "1";
        assert!(eval(&signs).contains("nested too deeply"));
        let powers = "2^".repeat(1000) + "1";
        assert!(eval(&powers).contains("nested too deeply"));
    }
}
